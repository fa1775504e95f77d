// Idempotency keys: random, URL-safe, at most 200 characters (contract §5), from Web Crypto (Node >= 20 and browsers).

/** `<prefix>_<32 hex>`; the prefix (default `sdk`) helps find a key in logs. */
export function createIdempotencyKey(prefix = 'sdk'): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  const key = `${prefix}_${hex}`;
  if (key.length > 200 || !prefix.trim()) throw new RangeError('createIdempotencyKey: the prefix must be non-blank and the key at most 200 characters');
  return key;
}
