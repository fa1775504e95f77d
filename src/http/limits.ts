// Size limits on a request's URL and headers, checked inside the /v1/agent pipeline so the refusal
// is the envelope with X-Request-Id and (after authentication) the rate-limit headers.
import type { Request } from 'express';
import { ApiError } from '../lib/errors.js';

/** Request target (path + query), in bytes as sent. */
export const MAX_URL_BYTES = 8 * 1024;
/** All header names and values, in bytes as sent (Node's own default limit for the whole head is 16 KB). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** The 414 or 431 validation_failed for a URL or headers over their limits, else null. */
export function headOverLimits(req: Request): ApiError | null {
  const urlBytes = Buffer.byteLength(req.originalUrl);
  if (urlBytes > MAX_URL_BYTES) {
    return new ApiError(
      'validation_failed',
      `The request URL is ${urlBytes} bytes; the limit is ${MAX_URL_BYTES}.`,
      { errors: [{ location: 'query', path: 'url', message: `exceeds ${MAX_URL_BYTES} bytes` }] },
      { status: 414 },
    );
  }
  let headerBytes = 0;
  for (const part of req.rawHeaders) headerBytes += Buffer.byteLength(part) + 2;
  if (headerBytes > MAX_HEADER_BYTES) {
    return new ApiError(
      'validation_failed',
      `The request headers are ${headerBytes} bytes; the limit is ${MAX_HEADER_BYTES}.`,
      { errors: [{ location: 'header', path: 'headers', message: `exceed ${MAX_HEADER_BYTES} bytes` }] },
      { status: 431 },
    );
  }
  return null;
}
