// agentctl as a client of the owner and admin APIs: finds the running server, authenticates with the
// admin token, sends each write with a fresh Idempotency-Key, and turns the envelope back into output.
import { randomUUID } from 'node:crypto';
import { readAdminTokenFile } from '../auth/admin-token.js';
import type { Config } from '../config.js';

export interface HttpCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  /** What the command prints; by default the response body without `ok`. */
  output?: (body: Record<string, unknown>) => Record<string, unknown>;
}

export class ApiCallError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    /** The error's details (an `owner_signature_required` answer carries the proposal to sign). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface ApiClient {
  baseUrl: string;
  call(call: HttpCall): Promise<Record<string, unknown>>;
}

const withoutOk = (body: Record<string, unknown>): Record<string, unknown> => {
  const { ok: _ok, ...rest } = body;
  return rest;
};

/** The admin token agentctl uses: ADMIN_TOKEN, else (embedded default) DATA_DIR/admin-token. */
export function cliAdminToken(config: Readonly<Config>): string | null {
  if (config.adminToken) return config.adminToken;
  return config.databaseUrl ? null : readAdminTokenFile(config.dataDir);
}

/**
 * The running server as an API client, or null when none answers at AGENT_API_BASE_URL (agentctl
 * then opens the database itself). A server that answers but refuses the token is an error: the
 * command must not write behind the back of a server holding the data.
 */
export async function connectToServer(config: Readonly<Config>, fetchImpl: typeof fetch = fetch): Promise<ApiClient | null> {
  const baseUrl = config.agentApiBaseUrl;
  try {
    await fetchImpl(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1500) });
  } catch {
    return null;
  }
  const token = cliAdminToken(config);
  if (!token) {
    // With Postgres the database is safe to share; the embedded one is not.
    if (config.databaseUrl) return null;
    throw new Error(`a server answers at ${baseUrl} but no admin token was found (set ADMIN_TOKEN or check DATA_DIR/admin-token)`);
  }
  const client: ApiClient = {
    baseUrl,
    async call(call) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json' };
      if (call.method !== 'GET') headers['idempotency-key'] = randomUUID();
      if (call.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetchImpl(`${baseUrl}${call.path}`, { method: call.method, headers, body: call.body === undefined ? undefined : JSON.stringify(call.body) });
      const text = await res.text();
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        throw new ApiCallError(`server answered ${res.status} without JSON`, res.status, 'internal_error');
      }
      if (!res.ok || body.ok !== true) {
        const error = (body.error ?? {}) as { code?: string; message?: string; details?: { errors?: { path?: string; message?: string }[] } & Record<string, unknown> };
        const problems = error.details?.errors?.map((e) => `${e.path ?? ''} ${e.message ?? ''}`.trim()).join('; ');
        throw new ApiCallError(`${error.message ?? `HTTP ${res.status}`}${problems && !error.message?.includes(problems) ? ` (${problems})` : ''}`, res.status, error.code ?? 'unknown', error.details);
      }
      return (call.output ?? withoutOk)(body);
    },
  };
  // The token must open the server's door; a refusal here means the wrong server or token.
  try {
    await client.call({ method: 'GET', path: '/v1/owner/audit?limit=1' });
  } catch (err) {
    if (err instanceof ApiCallError && (err.status === 401 || err.status === 404)) throw new Error(`the server at ${baseUrl} refused the admin token (${err.message})`, { cause: err });
    throw err;
  }
  return client;
}
