// The one place a thrown error becomes an API error: ApiError as is, an unreachable database or rate
// limiter as 503 service_unavailable with Retry-After (contract §2), a value already taken under a unique
// index as 409 naming the field, anything else as 500.
import { conflictErrorOf } from '../db/unique-violation.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { ApiError, DependencyUnavailableError, isApiError } from '../lib/errors.js';
import { LimiterUnavailableError } from '../ratelimit/rate-limit.service.js';

/** Whole seconds a client should wait after a 503 (the pool reconnects as soon as the store answers). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

const unavailable = (message: string) => new ApiError('service_unavailable', message, undefined, { headers: { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } });

/** The ApiError `err` stands for, or null when it is an internal error (500, message hidden). */
export function toApiError(err: unknown): ApiError | null {
  if (isApiError(err)) return err;
  if (err instanceof LimiterUnavailableError) return unavailable('Rate limiting is unavailable; writes are refused until it recovers.');
  if (isDatabaseUnavailable(err)) return unavailable('The database is unavailable; retry shortly.');
  if (err instanceof DependencyUnavailableError) return unavailable(`${err.what[0]!.toUpperCase()}${err.what.slice(1)} is unavailable; retry shortly.`);
  return conflictErrorOf(err);
}
