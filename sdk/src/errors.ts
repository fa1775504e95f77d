// The errors a call can throw: the API's envelope (AgentApiError), the network (AgentNetworkError), a wait that ran out.
import { ERROR_CODES } from './generated/operations.js';
import type { ErrorCode, Operation } from './types.js';

/** A non-2xx answer: the envelope's `code`, `message` and `details`, the HTTP status, `X-Request-Id` and every header. */
export class AgentApiError<C extends ErrorCode = ErrorCode> extends Error {
  override readonly name = 'AgentApiError';
  readonly code: C;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | undefined;
  /** Response headers, lower-case names. */
  readonly headers: Record<string, string>;
  /** The parsed body (or the raw text when it was not JSON). */
  readonly body: unknown;

  constructor(init: { code: C; message: string; status: number; details?: Record<string, unknown>; headers?: Record<string, string>; body?: unknown }) {
    super(init.message);
    this.code = init.code;
    this.status = init.status;
    this.details = init.details;
    this.headers = init.headers ?? {};
    this.requestId = this.headers['x-request-id'];
    this.body = init.body;
  }

  /** `Retry-After` in milliseconds (seconds or an HTTP date), when the answer carried one. */
  get retryAfterMs(): number | undefined {
    return parseRetryAfter(this.headers['retry-after']);
  }
}

/** The API error carried by `e` (an AgentApiError), else undefined (Hightop's SDK helper of the same name). */
export function getAgentApiError(e: unknown): AgentApiError | undefined {
  return e instanceof AgentApiError ? e : undefined;
}

/** The API error carried by `e` when its code is `code`, else undefined. */
export function getAgentApiErrorByCode<C extends ErrorCode>(e: unknown, code: C): AgentApiError<C> | undefined {
  return e instanceof AgentApiError && e.code === code ? (e as AgentApiError<C>) : undefined;
}

/** Whether `value` is one of the document's error codes (ERROR_CODES). */
export function isAgentErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/** True when `e` is an AgentApiError, and (given codes) one of them; narrows `e.code`. */
export function isAgentApiError<C extends ErrorCode = ErrorCode>(e: unknown, ...codes: C[]): e is AgentApiError<C> {
  return e instanceof AgentApiError && (codes.length === 0 || codes.includes(e.code as C));
}

/** The request did not get an answer: connection refused or reset, DNS, or the deadline (`timedOut`). */
export class AgentNetworkError extends Error {
  override readonly name = 'AgentNetworkError';
  readonly timedOut: boolean;
  constructor(message: string, opts: { cause?: unknown; timedOut?: boolean } = {}) {
    super(message, { cause: opts.cause });
    this.timedOut = opts.timedOut ?? false;
  }
}

/** `waitForOperation` reached its deadline before a terminal status; `operation` is the last one read. */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
  constructor(
    message: string,
    readonly operation: Operation | undefined,
  ) {
    super(message);
  }
}

export function parseRetryAfter(value: string | undefined | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
