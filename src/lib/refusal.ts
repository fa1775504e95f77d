// A refusal is an answer, not an exception: a service that refuses a write after recording it (a
// policy rejection keeps its operation and event) returns a Refusal, the transaction commits as
// for any answer, and the handler maps it to the document's error response.
import { ERROR_STATUS, errorBody, type ErrorBody, type ErrorCode } from './errors.js';

export interface Refusal {
  readonly refusal: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export function refuse(code: ErrorCode, message: string, details?: Record<string, unknown>): Refusal {
  return { refusal: details === undefined ? { code, message } : { code, message, details } };
}

export function isRefusal(value: unknown): value is Refusal {
  return typeof value === 'object' && value !== null && 'refusal' in value;
}

/** The error response of a refusal (403 for policy codes), as a handler returns it. */
export function refusalAnswer(r: Refusal): { status: 403; body: ErrorBody } {
  return { status: ERROR_STATUS[r.refusal.code] as 403, body: errorBody(r.refusal.code, r.refusal.message, r.refusal.details) };
}

/** A handler's 200 answer, or the error answer of a refusal. */
export function answer<B>(result: B | Refusal): { status: 200; body: B } | { status: 403; body: ErrorBody } {
  return isRefusal(result) ? refusalAnswer(result) : { status: 200, body: result };
}
