// The console's only door to the service: the owner API (/v1/owner) through openapi-fetch, typed by the document's
// generated `paths`, with the session cookie; plus the console's own sign-in routes. Writes carry the session's CSRF
// token and a fresh Idempotency-Key.
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from '../../generated/api.js';

export type { paths };

export type Schemas = components['schemas'];
export type ApiErrorBody = Schemas['ErrorEnvelope']['error'];

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly error: ApiErrorBody,
  ) {
    super(error.message);
  }
}

/** The session's CSRF token, kept by the one client the console has (set at sign-in and on each session read). */
const session = { csrfToken: '' };

export function setCsrfToken(token: string): void {
  session.csrfToken = token;
}

const csrfHeader: Middleware = {
  onRequest({ request }) {
    if (request.method !== 'GET') request.headers.set('x-csrf-token', session.csrfToken);
    return request;
  },
};

/** The header every owner write requires: a fresh key per click (a retry of the same click is not the console's). */
export const idempotency = () => ({ 'Idempotency-Key': crypto.randomUUID() });

export const api = createClient<paths>({ baseUrl: location.origin, credentials: 'same-origin', headers: { accept: 'application/json' } });
api.use(csrfHeader);

const fallbackError = (status: number): ApiErrorBody => ({ code: 'internal_error', message: `HTTP ${status}` }) as ApiErrorBody;

/** The answer's body when the call succeeded; otherwise an ApiFailure carrying the envelope's error. */
export async function ok<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || data === undefined) throw new ApiFailure(response.status, (error as { error?: ApiErrorBody } | undefined)?.error ?? fallbackError(response.status));
  return data;
}

/**
 * Many owner answers are left open by the document (`OwnerResult`: `ok` plus the action's fields). The console reads
 * them as the shape the service sends, named once here per page: the agent API's schema of the same noun where one
 * exists. Typing these answers in the document itself is what would remove this seam.
 */
export const asView = <T>(result: Schemas['OwnerResult']): T => result as unknown as T;

export interface RateLimitsView {
  classes: { class: string; limit: number; burst: number; window_seconds: number; remaining: number; reset_at: string }[];
}
export interface WebhookView {
  id: string;
  url: string;
  agent_name: string;
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  last_delivered_at: string | null;
  failing_since: string | null;
  last_failure_at: string | null;
  /** The newest failed attempt's error class (or `http_<status>`) while the endpoint is failing. */
  last_error: string | null;
}
export interface DeliveryView {
  event_id: string;
  event_type: string;
  status: string;
  attempt: number;
  http_status: number | null;
  error_class: string | null;
  last_attempt_at: string | null;
}
export interface ConnectedAppView {
  grant_id: string;
  client_id: string;
  client_name: string | null;
  agent_name: string;
  scope: string[];
  status: string;
  created_at: string;
  last_used_at: string | null;
}
export type Page<T> = { items: T[] };

/** The sign-in routes (/console/auth/*) are the console's own, outside the OpenAPI document. */
export interface ConsoleSession {
  email: string;
  csrf_token: string;
}

export async function consoleAuth<T = Record<string, unknown>>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = session.csrfToken;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`/console/auth/${path}`, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  const parsed = (await res.json().catch(() => ({ ok: false, error: fallbackError(res.status) }))) as { ok?: boolean; error?: ApiErrorBody };
  if (!res.ok || parsed.ok !== true) throw new ApiFailure(res.status, parsed.error ?? fallbackError(res.status));
  return parsed as T;
}
