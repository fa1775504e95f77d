// Owner changes signed by the owner's passkey (issue 27). When an agent's account is owned by one of the owner's
// passkeys (its PasskeyOwner contract, docs/CUSTODY.md), an owner change sent without a signature answers 428
// `owner_signature_required` with the EIP-712 typed data; the console hashes it (viem's hashTypedData), asks the
// passkey for an assertion with that digest as the challenge (user verification required: the account checks the UV
// flag), encodes the assertion as OpenZeppelin's WebAuthn.WebAuthnAuth (s in the lower half, as its P256 requires),
// and sends the same request again with `owner_signature`. The account verifies it on chain through ERC-1271.
import { startAuthentication } from '@simplewebauthn/browser';
import { bytesToHex, encodeAbiParameters, hashTypedData, hexToBytes, type Hex } from 'viem';
import { typedDataOf } from '../../src/lib/typed-data-json.js';
import { ApiFailure, type Schemas } from './api.js';

export type OwnerSignature = Schemas['OwnerSignature'];

/** secp256r1's group order n. */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

const fromB64url = (s: string): Uint8Array =>
  Uint8Array.from(
    atob(
      s
        .replace(/-/g, '+')
        .replace(/_/g, '/')
        .padEnd(Math.ceil(s.length / 4) * 4, '='),
    ),
    (c) => c.charCodeAt(0),
  );
const toB64url = (b: Uint8Array): string =>
  btoa(String.fromCharCode(...b))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** (r, s) of a DER ECDSA signature: SEQUENCE { INTEGER r, INTEGER s }. */
function derToRs(der: Uint8Array): { r: bigint; s: bigint } {
  let at = 2;
  const int = () => {
    if (der[at] !== 0x02) throw new Error('the passkey answered a signature that is not DER');
    const len = der[at + 1]!;
    const value = BigInt(bytesToHex(der.subarray(at + 2, at + 2 + len)));
    at += 2 + len;
    return value;
  };
  if (der[0] !== 0x30) throw new Error('the passkey answered a signature that is not DER');
  return { r: int(), s: int() };
}

const word = (n: bigint) => `0x${n.toString(16).padStart(64, '0')}` as Hex;

/** Signs an `owner_signature_required` proposal with the passkey `credentialId` (its `primaryType` must be `expect`). */
export async function signWithPasskey(credentialId: string, proposal: Record<string, unknown>, expect: string): Promise<OwnerSignature> {
  const typed = proposal.typed_data as Record<string, unknown>;
  const domain = typed.domain as { verifyingContract?: string };
  if (typed.primaryType !== expect) throw new Error(`the server asked to sign ${String(typed.primaryType)}, not ${expect}: not signed`);
  if (String(domain.verifyingContract).toLowerCase() !== String(proposal.account).toLowerCase()) throw new Error("the proposal's typed data is not for the agent's account: not signed");
  const digest = hashTypedData(typedDataOf(typed));
  const assertion = await startAuthentication({
    optionsJSON: { challenge: toB64url(hexToBytes(digest)), allowCredentials: [{ id: credentialId, type: 'public-key' }], userVerification: 'required', timeout: 300_000 },
  });
  const clientDataJSON = new TextDecoder().decode(fromB64url(assertion.response.clientDataJSON));
  const { r, s } = derToRs(fromB64url(assertion.response.signature));
  const signature = encodeAbiParameters(
    [{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'string' }],
    [
      word(r),
      word(s > P256_N / 2n ? P256_N - s : s),
      BigInt(clientDataJSON.indexOf('"challenge":"')),
      BigInt(clientDataJSON.indexOf('"type":"webauthn.get"')),
      bytesToHex(fromB64url(assertion.response.authenticatorData)),
      clientDataJSON,
    ],
  );
  return { signature, nonce: String(proposal.nonce), deadline: String(proposal.deadline), ...(proposal.unlock_at !== undefined ? { unlock_at: String(proposal.unlock_at) } : {}) };
}

/**
 * Runs `attempt` unsigned; when the change needs the owner's signature and the account is the passkey
 * `credentialId`'s, signs the 428's proposal with it and runs the same change again with the signature.
 */
export async function withPasskeySignature<T>(credentialId: string | null | undefined, expect: string, attempt: (signature?: OwnerSignature) => Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    if (!credentialId || !(err instanceof ApiFailure) || err.error.code !== 'owner_signature_required' || !err.error.details) throw err;
    return attempt(await signWithPasskey(credentialId, err.error.details as Record<string, unknown>, expect));
  }
}
