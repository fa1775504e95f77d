// The console's only door to the service: the owner API (/v1/owner) with the session cookie, plus
// the sign-in routes. Writes carry the session's CSRF token and a fresh Idempotency-Key.

export interface ApiErrorBody {
  code: string;
  message: string;
  details?: { errors?: { location?: string; path?: string; message?: string }[]; problems?: string[] };
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly error: ApiErrorBody,
  ) {
    super(error.message);
  }
}

let csrfToken = '';

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = Record<string, any>;

export async function call(method: string, path: string, body?: unknown): Promise<Json> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method !== 'GET') {
    headers['x-csrf-token'] = csrfToken;
    headers['idempotency-key'] = crypto.randomUUID();
  }
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  const parsed = (await res.json().catch(() => ({ ok: false, error: { code: 'internal_error', message: `HTTP ${res.status}` } }))) as Json;
  if (!res.ok || parsed.ok !== true) throw new ApiFailure(res.status, parsed.error as ApiErrorBody);
  return parsed;
}

export const owner = (path: string) => `/v1/owner${path}`;
export const get = (path: string) => call('GET', owner(path));
export const post = (path: string, body?: unknown) => call('POST', owner(path), body);
export const put = (path: string, body?: unknown) => call('PUT', owner(path), body);
export const del = (path: string) => call('DELETE', owner(path));
