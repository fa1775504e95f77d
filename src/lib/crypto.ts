// Hashing, constant-time comparison and AES-256-GCM sealing of secrets at rest.
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

export const sha256Hex = (value: string | Buffer): string => createHash('sha256').update(value).digest('hex');

export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  if (left.length !== right.length) {
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

/** Canonical JSON: object keys sorted at every depth, so equal values hash equally. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export interface Sealer {
  seal(plaintext: string): string;
  open(sealed: string): string;
}

// A KeyObject made once: given a Buffer, every createCipheriv would import the key again (~3 % of a payment's CPU).
const sealingKey = (masterKey: string): KeyObject => createSecretKey(createHash('sha256').update(`agent-api:seal:${masterKey}`).digest());

function openWith(key: KeyObject, sealed: string): string {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error('unsealable value');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}

/**
 * AES-256-GCM with a key derived from the master secret; output `v1.<iv>.<tag>.<ciphertext>` base64url.
 * During a key rotation (docs/OPERATIONS.md) `previousMasterKey` still opens what it sealed: the GCM tag
 * tells the keys apart, so values need no key id. Sealing always uses the current key.
 */
export function createSealer(masterKey: string, previousMasterKey: string | null = null): Sealer {
  const key = sealingKey(masterKey);
  const previous = previousMasterKey ? sealingKey(previousMasterKey) : null;
  return {
    seal(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
    },
    open(sealed) {
      try {
        return openWith(key, sealed);
      } catch (err) {
        if (!previous) throw err;
        return openWith(previous, sealed);
      }
    },
  };
}
