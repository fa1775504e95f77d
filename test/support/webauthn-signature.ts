// A passkey assertion as an owner signature on chain (issue 27): the ABI encoding of OpenZeppelin's
// WebAuthn.WebAuthnAuth (r, s, challengeIndex, typeIndex, authenticatorData, clientDataJSON) that PasskeyOwner's
// ERC-1271 check decodes, with s in the lower half (OpenZeppelin's P256 refuses the other, malleable, half).
import { bytesToHex, encodeAbiParameters, type Hex } from 'viem';
import type { RawAssertion } from './webauthn.js';

/** secp256r1's group order n. */
export const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** (r, s) of a DER ECDSA signature: SEQUENCE { INTEGER r, INTEGER s }. */
export function derToRs(der: Uint8Array): { r: bigint; s: bigint } {
  if (der[0] !== 0x30) throw new Error('not a DER signature');
  let at = 2;
  const int = () => {
    if (der[at] !== 0x02) throw new Error('not a DER integer');
    const len = der[at + 1]!;
    const value = BigInt(bytesToHex(der.subarray(at + 2, at + 2 + len)));
    at += 2 + len;
    return value;
  };
  return { r: int(), s: int() };
}

/** The signature bytes PasskeyOwner.isValidSignature takes; `lowS: false` keeps s as the authenticator gave it. */
export function encodeWebAuthnSignature(a: RawAssertion, opts: { lowS?: boolean; s?: bigint } = {}): Hex {
  const { r, s: given } = derToRs(a.signature);
  const s = opts.s ?? (opts.lowS === false || given <= P256_N / 2n ? given : P256_N - given);
  const toWord = (n: bigint) => `0x${n.toString(16).padStart(64, '0')}` as Hex;
  return encodeAbiParameters(
    [{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'string' }],
    [toWord(r), toWord(s), BigInt(a.clientDataJSON.indexOf('"challenge":"')), BigInt(a.clientDataJSON.indexOf('"type":"webauthn.get"')), bytesToHex(a.authenticatorData), a.clientDataJSON],
  );
}
