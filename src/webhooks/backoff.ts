// Retry schedule (contract §11): growing delays with jitter, bounded by first attempt + 72 h.
//
// Delays after attempt 1, 2, ...: 10 s, 1 min, 5 min, 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, 18 h, 24 h
// (cumulative ~69.6 h), then 24 h; each jittered by +/-10 % and clamped to the deadline, so the
// last attempt lands exactly on the deadline and a retryable failure there exhausts the delivery.
// A receiver's Retry-After (429/503) lengthens a delay, up to one hour.

export const RETRY_HORIZON_MS = 72 * 60 * 60 * 1000;
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
export const RETRY_DELAYS_MS = [10 * SECOND, MINUTE, 5 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 12 * HOUR, 18 * HOUR, 24 * HOUR];
export const JITTER_RATIO = 0.1;
/** The longest a receiver's Retry-After may delay the next attempt. */
export const MAX_RETRY_AFTER_MS = HOUR;

export interface BackoffInput {
  /** Attempts made so far, including the one that just failed (>= 1). */
  attempts: number;
  now: Date;
  deadline: Date;
  /** Receiver's Retry-After (429/503), already converted to milliseconds from now. */
  retryAfterMs?: number | null;
  random?: () => number;
}

/** When to try again, or null when the deadline has been reached (retries exhausted). */
export function nextAttemptAt(input: BackoffInput): Date | null {
  const now = input.now.getTime();
  const deadline = input.deadline.getTime();
  if (now >= deadline) return null;
  const base = RETRY_DELAYS_MS[Math.min(input.attempts, RETRY_DELAYS_MS.length) - 1] ?? RETRY_DELAYS_MS[0]!;
  const jitter = 1 + ((input.random ?? Math.random)() * 2 - 1) * JITTER_RATIO;
  let delay = Math.round(base * jitter);
  // A receiver's Retry-After may push the attempt out, but by at most an hour (else a hostile
  // `Retry-After: 999999999` would park the delivery until the 72 h deadline).
  if (input.retryAfterMs != null && input.retryAfterMs > delay) delay = Math.min(input.retryAfterMs, MAX_RETRY_AFTER_MS);
  return new Date(Math.min(now + delay, deadline));
}

/** Retry-After as delta-seconds or an HTTP-date; invalid values are ignored (null). */
export function parseRetryAfter(value: string | undefined | null, now: Date): number | null {
  if (value == null) return null;
  const trimmed = value.trim();
  if (/^[0-9]{1,10}$/.test(trimmed)) return Number(trimmed) * 1000;
  // IMF-fixdate only (RFC 9110), e.g. "Sun, 06 Nov 1994 08:49:37 GMT"; V8's lenient Date.parse is not a parser.
  if (!/^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/.test(trimmed)) return null;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now.getTime());
}
