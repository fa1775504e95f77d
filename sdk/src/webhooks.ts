// Webhook signature check (spec 6.5, contract §11) with Web Crypto, so it runs in Node >= 20 and browsers alike:
// HMAC-SHA256 keyed with the secret string, over `<Service-Webhook-Timestamp>.<raw body>`, header `v1=<hex>[,v1=<hex>]`.
import type { EventEnvelope } from './types.js';

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyWebhookInput {
  /** The RAW body, exactly as received (never re-serialised JSON). */
  payload: string | Uint8Array;
  headers: WebhookHeaders;
  /** The signing secret, or several (e.g. while you roll a rotation yourself). */
  secret: string | readonly string[];
  /** Accepted clock difference (default 300 s; the spec recommends 5 to 15 minutes). */
  toleranceSeconds?: number;
  nowSeconds?: number;
}

export type WebhookFailure = 'missing_headers' | 'timestamp_out_of_tolerance' | 'signature_mismatch' | 'invalid_payload';

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookFailure,
    message: string,
  ) {
    super(message);
  }
}

const encoder = new TextEncoder();

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name.toLowerCase());
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value.join(',') : value;
}

function hexToBytes(hex: string): Uint8Array | null {
  if (!/^[0-9a-f]{64}$/i.test(hex)) return null;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/**
 * Checks the signature and the timestamp and returns the parsed event; throws WebhookVerificationError otherwise.
 * Comparison is `crypto.subtle.verify` (constant time); any `v1=` value may match (rotation grace window).
 */
export async function verifyWebhookSignature(input: VerifyWebhookInput): Promise<EventEnvelope> {
  const timestamp = header(input.headers, 'service-webhook-timestamp');
  const signature = header(input.headers, 'service-webhook-signature');
  if (!timestamp || !signature || !/^[0-9]{1,12}$/.test(timestamp))
    throw new WebhookVerificationError('missing_headers', 'Service-Webhook-Timestamp or Service-Webhook-Signature is missing or malformed');
  const now = input.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (input.toleranceSeconds ?? 300)) throw new WebhookVerificationError('timestamp_out_of_tolerance', 'the webhook timestamp is outside the tolerance');
  const body = typeof input.payload === 'string' ? encoder.encode(input.payload) : input.payload;
  const prefix = encoder.encode(`${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix, 0);
  signed.set(body, prefix.length);
  const given = signature
    .split(',')
    .map((part) => part.trim().split('='))
    .filter(([version, value]) => version === 'v1' && value)
    .map(([, value]) => hexToBytes(value!))
    .filter((b): b is Uint8Array => b !== null);
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new TypeError('verifyWebhookSignature needs Web Crypto (crypto.subtle); browsers expose it only in secure contexts (https, localhost)');
  const secrets = typeof input.secret === 'string' ? [input.secret] : input.secret;
  let matched = false;
  for (const secret of secrets) {
    const key = await subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    for (const sig of given) if (await subtle.verify('HMAC', key, sig as Uint8Array<ArrayBuffer>, signed)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'no Service-Webhook-Signature value matches');
  try {
    return JSON.parse(typeof input.payload === 'string' ? input.payload : new TextDecoder().decode(input.payload)) as EventEnvelope;
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'the signed body is not JSON');
  }
}
