// A software WebAuthn authenticator for API tests (the Chromium tests use the DevTools virtual authenticator): one
// P-256 credential, "none" attestation, answers in the JSON shape @simplewebauthn/browser sends. The CBOR it needs
// (maps of small ints, text and bytes) is encoded here: WebAuthn's own encoding, not a library's.
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

type Cbor = number | string | Buffer | Map<Cbor, Cbor>;

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 256) return Buffer.from([(major << 5) | 24, n]);
  const b = Buffer.alloc(3);
  b[0] = (major << 5) | 25;
  b.writeUInt16BE(n, 1);
  return b;
}

function cbor(v: Cbor): Buffer {
  if (typeof v === 'number') return v >= 0 ? head(0, v) : head(1, -1 - v);
  if (typeof v === 'string') return Buffer.concat([head(3, Buffer.byteLength(v)), Buffer.from(v)]);
  if (Buffer.isBuffer(v)) return Buffer.concat([head(2, v.length), v]);
  return Buffer.concat([head(5, v.size), ...[...v].flatMap(([k, x]) => [cbor(k), cbor(x)])]);
}

const b64url = (b: Buffer) => b.toString('base64url');
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();

/** A WebAuthn assertion's raw parts: what an authenticator returns for `navigator.credentials.get`. */
export interface RawAssertion {
  authenticatorData: Buffer;
  clientDataJSON: string;
  /** The DER-encoded ECDSA P-256 signature over authenticatorData || sha256(clientDataJSON). */
  signature: Buffer;
}

export interface SoftAuthenticator {
  credentialId: string;
  /** The credential's P-256 public key coordinates (32 bytes each, 0x hex). */
  publicKey: { qx: `0x${string}`; qy: `0x${string}` };
  /**
   * An assertion whose challenge is `challenge` (raw bytes, base64url in clientDataJSON as browsers put it): the
   * shape a passkey signs an EIP-712 digest in (issue 27). `flags` defaults to UP|UV; `clientData` edits the JSON.
   */
  signChallenge(challenge: Uint8Array, opts?: { flags?: number; origin?: string }): RawAssertion;
  /** The answer to registration options (`ownerPasskeyRegistrationOptions`). */
  register(options: { challenge: string }): Record<string, unknown>;
  /** The answer to assertion options; `tamper` flips a signature byte. */
  assert(options: { challenge: string }, opts?: { tamper?: boolean; origin?: string }): Record<string, unknown>;
}

export function createSoftAuthenticator(rpId: string, origin: string): SoftAuthenticator {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' }) as { x: string; y: string };
  const credId = randomBytes(16);
  let counter = 0;
  const clientData = (type: string, challenge: string, o = origin) => Buffer.from(JSON.stringify({ type, challenge, origin: o, crossOrigin: false }));
  const counterBytes = () => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(counter);
    return b;
  };
  const signWith = (key: KeyObject, data: Buffer) => sign('sha256', data, key);
  return {
    credentialId: b64url(credId),
    publicKey: { qx: `0x${Buffer.from(jwk.x, 'base64url').toString('hex')}`, qy: `0x${Buffer.from(jwk.y, 'base64url').toString('hex')}` },
    signChallenge(challenge, opts = {}) {
      counter += 1;
      const authenticatorData = Buffer.concat([sha256(rpId), Buffer.from([opts.flags ?? 0x05]), counterBytes()]);
      const clientDataJSON = clientData('webauthn.get', b64url(Buffer.from(challenge)), opts.origin).toString('utf8');
      return { authenticatorData, clientDataJSON, signature: signWith(privateKey, Buffer.concat([authenticatorData, sha256(clientDataJSON)])) };
    },
    register(options) {
      const cose = cbor(
        new Map<Cbor, Cbor>([
          [1, 2],
          [3, -7],
          [-1, 1],
          [-2, Buffer.from(jwk.x, 'base64url')],
          [-3, Buffer.from(jwk.y, 'base64url')],
        ]),
      );
      const len = Buffer.alloc(2);
      len.writeUInt16BE(credId.length);
      const authData = Buffer.concat([sha256(rpId), Buffer.from([0x45]), counterBytes(), Buffer.alloc(16), len, credId, cose]);
      const attestationObject = cbor(
        new Map<Cbor, Cbor>([
          ['fmt', 'none'],
          ['attStmt', new Map()],
          ['authData', authData],
        ]),
      );
      return {
        id: b64url(credId),
        rawId: b64url(credId),
        type: 'public-key',
        response: { clientDataJSON: b64url(clientData('webauthn.create', options.challenge)), attestationObject: b64url(attestationObject), transports: ['internal'] },
        clientExtensionResults: {},
      };
    },
    assert(options, opts = {}) {
      counter += 1;
      const authData = Buffer.concat([sha256(rpId), Buffer.from([0x05]), counterBytes()]);
      const cd = clientData('webauthn.get', options.challenge, opts.origin);
      const signature = signWith(privateKey, Buffer.concat([authData, sha256(cd)]));
      if (opts.tamper) signature.writeUInt8(signature.readUInt8(signature.length - 1) ^ 0xff, signature.length - 1);
      return {
        id: b64url(credId),
        rawId: b64url(credId),
        type: 'public-key',
        response: { clientDataJSON: b64url(cd), authenticatorData: b64url(authData), signature: b64url(signature) },
        clientExtensionResults: {},
      };
    },
  };
}
