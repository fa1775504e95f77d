// Webhook signatures (spec 6.5): HMAC-SHA256, hex, over `<timestamp>.<raw body>`, header `v1=<hex>[,v1=<hex>]`.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** `whsec_` + 32 random bytes; the HMAC key is the secret string exactly as given (contract §11). */
export function generateSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function computeSignature(secret: string, timestamp: number | string, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/** The header value: the current secret first, then any still-valid previous secret. */
export function signatureHeader(secrets: readonly string[], timestamp: number, body: string | Buffer): string {
  return secrets.map((s) => `v1=${computeSignature(s, timestamp, body)}`).join(',');
}

/**
 * Receiver-side check, self-contained so integrators can copy it (README "Verify a webhook").
 * Pass the RAW body bytes, the `Service-Webhook-Timestamp` and `Service-Webhook-Signature`
 * header values, and your secret. Accepts when any `v1=` value matches (constant time) and the
 * timestamp is within `toleranceSeconds` of `nowSeconds`.
 */
export function verifyWebhookSignature(input: {
  rawBody: string | Buffer;
  timestampHeader: string | undefined;
  signatureHeader: string | undefined;
  secret: string;
  toleranceSeconds?: number;
  nowSeconds?: number;
}): boolean {
  const { rawBody, timestampHeader, signatureHeader: header, secret } = input;
  if (!timestampHeader || !header || !/^[0-9]{1,12}$/.test(timestampHeader)) return false;
  const tolerance = input.toleranceSeconds ?? 300;
  const now = input.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestampHeader)) > tolerance) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${timestampHeader}.`).update(rawBody).digest('hex'));
  let matched = false;
  for (const part of header.split(',')) {
    const [version, value] = part.trim().split('=', 2);
    if (version !== 'v1' || !value) continue;
    const given = Buffer.from(value);
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
  }
  return matched;
}
