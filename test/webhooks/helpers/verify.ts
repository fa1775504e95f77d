// An independent receiver-side verifier (does not import src/): HMAC-SHA256 hex over `<ts>.<raw body>`.
import crypto from 'node:crypto';

export function signaturesIn(header: string | string[] | undefined): string[] {
  if (typeof header !== 'string') return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.startsWith('v1='))
    .map((p) => p.slice(3));
}

export function independentVerify(secret: string, timestamp: string, rawBody: Buffer, header: string | string[] | undefined): boolean {
  const mac = crypto.createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), rawBody]));
  const expected = mac.digest();
  return signaturesIn(header).some((hex) => {
    const given = Buffer.from(hex, 'hex');
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}
