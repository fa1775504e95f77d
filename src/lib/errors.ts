// The HTTP status of each of the document's error codes (contract §2) and the ApiError type.
import type { ERROR_CODES } from '../../generated/vocabulary.js';

/** Every code of `#/components/schemas/ErrorCode`, and no other, with its status. */
export const ERROR_STATUS = {
  validation_failed: 400,
  authentication_failed: 401,
  agent_disabled: 401,
  agent_not_yet_active: 401,
  agent_expired: 401,
  invalid_token: 401,
  insufficient_scope: 403,
  owner_only_action: 403,
  permission_not_granted: 403,
  asset_not_allowed: 403,
  recipient_not_allowed: 403,
  protocol_not_allowed: 403,
  limit_exceeded: 403,
  ltv_too_high: 403,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_reuse_mismatch: 409,
  idempotency_request_in_progress: 409,
  quote_expired: 409,
  quote_already_consumed: 409,
  ltv_target_unreachable: 409,
  time_delay_not_reached: 409,
  invalid_state_transition: 409,
  payload_too_large: 413,
  insufficient_funds: 422,
  slippage_exceeded: 422,
  price_stale: 422,
  rate_limited: 429,
  internal_error: 500,
  not_implemented: 501,
  upstream_error: 502,
  service_unavailable: 503,
  // Issue 24: an owner change in evm mode waits for the owner's EIP-712 signature (details: the typed data).
  owner_signature_required: 428,
  step_up_required: 428,
  // Hightop's vocabulary (issue 26, item 11): cooldown_active and agent_api_chain_unavailable are returned, the
  // others are declared reserved in the document (x-reserved-codes) so that clients handle them.
  signature_expired: 400,
  signature_invalid_s: 400,
  identity_gated_action: 403,
  operation_feature_disabled: 403,
  cooldown_active: 403,
  cheque_not_found: 404,
  operation_not_cancellable: 409,
  operation_not_supported_for_wrapper_version: 409,
  signature_invalid_nonce: 409,
  cheque_replaced: 409,
  loot_not_available: 409,
  starter_agent_not_removable: 409,
  owner_changed_pending_state: 409,
  one_off_payment_already_paid: 409,
  one_off_payment_not_active: 409,
  one_off_payment_replaced: 409,
  one_off_payment_stale: 409,
  pending_one_off_payment_settings_exists: 409,
  pending_one_off_payment_settings_missing: 409,
  pending_time_lock_exists: 409,
  migration_blocked_pending_one_off_payment_settings: 409,
  migration_blocked_pending_time_lock: 409,
  timelock_not_elapsed: 409,
  rule_changed_during_execution: 409,
  invalid_pull_one_off_payment_flags: 422,
  execution_failed: 502,
  execution_timeout: 502,
  batch_step_failed: 502,
  agent_api_cutover_in_progress: 503,
  agent_api_chain_unavailable: 503,
} as const satisfies Record<(typeof ERROR_CODES)[number], number>;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface ApiErrorOptions {
  headers?: Record<string, string>;
  /** A more precise status within the code's class (validation_failed as 414 or 431 for an over-long URL or header block). */
  status?: 414 | 431;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options: ApiErrorOptions = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = options.status ?? ERROR_STATUS[code];
    // validation_failed always lists its problems (details.errors), as the document requires.
    this.details = code === 'validation_failed' && !Array.isArray(details?.errors) ? { ...details, errors: [{ location: 'body', message }] } : details;
    this.headers = options.headers ?? {};
  }
}

export interface ErrorBody {
  ok: false;
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export function errorBody(code: ErrorCode, message: string, details?: Record<string, unknown>): ErrorBody {
  return { ok: false, error: details === undefined ? { code, message } : { code, message, details } };
}

export function isApiError(err: unknown): err is ApiError {
  return err instanceof ApiError;
}

export interface ValidationProblem {
  location: 'body' | 'query' | 'path' | 'header';
  /** JSON pointer (body) or parameter name (query, path, header). */
  path?: string;
  message: string;
}

/** A 400 validation_failed listing each problem. */
export function validationFailed(message: string, errors: ValidationProblem[]): ApiError {
  return new ApiError('validation_failed', message, { errors });
}

/**
 * A store the service depends on (other than Postgres, which src/db/unavailable.ts recognises) did not answer: the
 * request is answered 503 `service_unavailable` with Retry-After, not 500 (contract §2). `what` names it for the message.
 */
export class DependencyUnavailableError extends Error {
  constructor(
    readonly what: string,
    options?: { cause?: unknown },
  ) {
    super(`${what} is unavailable`, options);
    this.name = 'DependencyUnavailableError';
  }
}
