// AgentClient: one `request(route, input, options)` typed by the route key, the generated methods on top, retries
// on 429/503 (and network errors on idempotent calls) within one deadline, pagination and operation polling.
import { AgentApiError, AgentNetworkError, WaitTimeoutError, parseRetryAfter } from './errors.js';
import { createIdempotencyKey } from './idempotency.js';
import { ERROR_CODES, GROUPS, OPERATIONS } from './generated/operations.js';
import type { CallArgs, ErrorCode, GroupMethods, Operation, OperationStatus, PageItem, PageQuery, PaginatedRouteKey, RequestInput, RequestOptions, ResponseBody, RouteKey } from './types.js';

export type Credentials = { baseUrl: string; agentId: string; apiKey: string } | { baseUrl: string; bearerToken: string };

export interface RetryInfo {
  attempt: number;
  delayMs: number;
  error: AgentApiError | AgentNetworkError;
}

export interface ClientOptions {
  /** Deadline of one call, retries included (default 30 000 ms). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  maxRetries?: number;
  /** Backoff base when no `Retry-After` is given (default 250 ms, doubled per retry). */
  retryBaseMs?: number;
  /** Called before each retry's wait. */
  onRetry?: (info: RetryInfo) => void;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

export interface WaitOptions {
  /** Statuses that end the wait (default: executed, execution_failed, policy_rejected, cancelled). */
  terminal?: readonly OperationStatus[];
  /** Default 60 000 ms. */
  timeoutMs?: number;
  /** First poll interval (default 200 ms), growing by half each poll up to `maxIntervalMs` (default 5 000 ms). */
  intervalMs?: number;
  maxIntervalMs?: number;
  signal?: AbortSignal;
}

export const TERMINAL_STATUSES: readonly OperationStatus[] = ['executed', 'execution_failed', 'policy_rejected', 'cancelled'];

type OperationRow = (typeof OPERATIONS)[keyof typeof OPERATIONS];
const KNOWN_CODES = new Set<string>(ERROR_CODES);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

class AgentClientBase {
  readonly baseUrl: string;
  readonly #auth: Record<string, string>;
  readonly #options: Required<Omit<ClientOptions, 'onRetry' | 'fetch'>> & Pick<ClientOptions, 'onRetry'>;
  readonly #fetch: typeof fetch;

  constructor(credentials: Credentials, options: ClientOptions = {}) {
    if (!credentials?.baseUrl) throw new TypeError('AgentClient: baseUrl is required');
    this.baseUrl = credentials.baseUrl.replace(/\/+$/, '');
    if ('bearerToken' in credentials && credentials.bearerToken) this.#auth = { authorization: `Bearer ${credentials.bearerToken}` };
    else if ('agentId' in credentials && credentials.agentId && credentials.apiKey) this.#auth = { 'x-agent-id': credentials.agentId, 'x-api-key': credentials.apiKey };
    else throw new TypeError('AgentClient: give { agentId, apiKey } or { bearerToken }');
    this.#options = { timeoutMs: options.timeoutMs ?? 30_000, maxRetries: options.maxRetries ?? 3, retryBaseMs: options.retryBaseMs ?? 250, onRetry: options.onRetry };
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    for (const [group, methods] of Object.entries(GROUPS)) {
      const bound: Record<string, unknown> = {};
      for (const [name, route] of Object.entries(methods)) bound[name] = (input?: unknown, opts?: RequestOptions) => this.request(route as RouteKey, input as never, opts);
      Object.defineProperty(this, group, { value: Object.freeze(bound), enumerable: true });
    }
  }

  /** Calls one operation; resolves with the parsed success body, throws AgentApiError or AgentNetworkError. */
  async request<K extends RouteKey>(route: K, ...[input, options = {}]: CallArgs<K>): Promise<ResponseBody<K>> {
    const op = (OPERATIONS as Record<string, OperationRow>)[route];
    if (!op) throw new TypeError(`AgentClient: unknown route '${route}'`);
    const { url, body } = this.#build(op, (input ?? {}) as Record<string, unknown>);
    const headers: Record<string, string> = { accept: 'application/json', ...this.#auth, ...(options.headers ?? {}) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const key = options.idempotencyKey ?? (op.idempotency === 'required' ? createIdempotencyKey() : undefined);
    if (key !== undefined) headers['idempotency-key'] = key;
    // A write is safe to resend after a lost answer only with its key; reads and the optional-key routes (simulate, resolve, quote) change nothing.
    const resendable = op.method === 'GET' || key !== undefined || op.idempotency === 'optional';
    const deadline = Date.now() + (options.timeoutMs ?? this.#options.timeoutMs);

    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new AgentNetworkError(`${route}: no answer within the deadline`, { timedOut: true });
      const timeout = AbortSignal.timeout(remaining);
      const signal = options.signal ? anySignal(options.signal, timeout) : timeout;
      let failure: AgentApiError | AgentNetworkError;
      let retryAfterMs: number | undefined;
      try {
        const res = await this.#fetch(url, { method: op.method, headers, body, signal });
        const text = await res.text();
        const parsed = parseJson(text);
        if (res.ok) return parsed as ResponseBody<K>;
        failure = toApiError(res, parsed, text);
        // After a lost answer the resent write may find the first still running: its replay follows shortly.
        const inProgress = attempt > 0 && key !== undefined && failure.code === 'idempotency_request_in_progress';
        if (res.status !== 429 && res.status !== 503 && !inProgress) throw failure;
        retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
      } catch (err) {
        if (err instanceof AgentApiError) throw err;
        if (options.signal?.aborted) throw options.signal.reason;
        failure = new AgentNetworkError(`${route}: ${timeout.aborted ? 'no answer within the deadline' : ((err as Error)?.message ?? String(err))}`, { cause: err, timedOut: timeout.aborted });
        if (!resendable || timeout.aborted) throw failure;
      }
      if (attempt >= this.#options.maxRetries) throw failure;
      // Retry-After is a floor: wait at least that long plus jitter so a crowd of clients does not return at once.
      const base = retryAfterMs ?? this.#options.retryBaseMs * 2 ** attempt;
      const delayMs = Math.round(base + Math.random() * Math.min(1000, Math.max(100, base * 0.2)));
      if (Date.now() + delayMs >= deadline) throw failure;
      this.#options.onRetry?.({ attempt: attempt + 1, delayMs, error: failure });
      await sleep(delayMs, options.signal);
    }
  }

  /** Every item of every page, fetched lazily (the next page only when the loop asks for it). */
  async *paginate<K extends PaginatedRouteKey>(route: K, query?: PageQuery<K>, options?: RequestOptions): AsyncGenerator<PageItem<K>, void, undefined> {
    let cursor: string | null | undefined;
    do {
      const input = { ...(query ?? {}), ...(cursor ? { cursor } : {}) } as unknown as RequestInput<K>;
      const page = (await (this.request as (r: RouteKey, i: unknown, o?: RequestOptions) => Promise<unknown>)(route, input, options)) as {
        items: PageItem<K>[];
        next_cursor?: string | null;
        has_more?: boolean;
      };
      for (const item of page.items) yield item;
      cursor = page.has_more === false ? null : page.next_cursor;
    } while (cursor);
  }

  /** Polls `GET /v1/agent/operations/{id}` with growing, jittered intervals until a terminal status or the deadline. */
  async waitForOperation(id: string, options: WaitOptions = {}): Promise<Operation> {
    const terminal = options.terminal ?? TERMINAL_STATUSES;
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    let interval = options.intervalMs ?? 200;
    let last: Operation | undefined;
    const expired = () => new WaitTimeoutError(`operation ${id} is still ${last?.status ?? 'unread'} after the wait deadline`, last);
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw expired();
      try {
        last = (await this.request('GET /v1/agent/operations/{id}', { id }, { timeoutMs: remaining, signal: options.signal })).operation;
      } catch (err) {
        if (err instanceof AgentNetworkError && err.timedOut && Date.now() >= deadline) throw expired();
        throw err;
      }
      if (terminal.includes(last.status)) return last;
      const pause = Math.min(interval * (0.8 + Math.random() * 0.4), deadline - Date.now());
      if (pause > 0) await sleep(pause, options.signal);
      interval = Math.min(interval * 1.5, options.maxIntervalMs ?? 5_000);
    }
  }

  #build(op: OperationRow, input: Record<string, unknown>): { url: string; body: string | undefined } {
    const rest: Record<string, unknown> = { ...input };
    let path: string = op.path;
    for (const name of op.pathParams) {
      const value = rest[name];
      if (value === undefined || value === null || value === '') throw new TypeError(`${op.operationId}: path parameter '${name}' is required`);
      path = path.replace(`{${name}}`, encodeURIComponent(String(value)));
      delete rest[name];
    }
    const search = new URLSearchParams();
    for (const name of op.queryParams) {
      const value = rest[name];
      delete rest[name];
      if (value === undefined || value === null) continue;
      for (const v of Array.isArray(value) ? value : [value]) search.append(name, String(v));
    }
    const query = search.toString();
    return { url: `${this.baseUrl}${path}${query ? `?${query}` : ''}`, body: op.body ? JSON.stringify(rest) : undefined };
  }
}

/** AbortSignal.any where the platform has it (Node >= 20.3, current browsers), else the same by hand. */
function anySignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (typeof AbortSignal.any === 'function') return AbortSignal.any([a, b]);
  const controller = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) controller.abort(s.reason);
    else s.addEventListener('abort', () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The envelope's error, or for an answer without one (a proxy's page) a code from the status. */
function toApiError(res: Response, parsed: unknown, text: string): AgentApiError {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => (headers[name.toLowerCase()] = value));
  const envelope = (parsed as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  if (envelope && typeof envelope.code === 'string') {
    return new AgentApiError({
      code: envelope.code as ErrorCode,
      message: typeof envelope.message === 'string' ? envelope.message : envelope.code,
      status: res.status,
      details: envelope.details as Record<string, unknown> | undefined,
      headers,
      body: parsed,
    });
  }
  const byStatus: Record<number, ErrorCode> = {
    400: 'validation_failed',
    401: 'authentication_failed',
    404: 'not_found',
    405: 'method_not_allowed',
    413: 'payload_too_large',
    429: 'rate_limited',
    502: 'upstream_error',
    503: 'service_unavailable',
  };
  const code = byStatus[res.status] ?? 'internal_error';
  return new AgentApiError({
    code: KNOWN_CODES.has(code) ? code : 'internal_error',
    message: `HTTP ${res.status} without an error envelope: ${text.slice(0, 200)}`,
    status: res.status,
    headers,
    body: parsed,
  });
}

/** `new AgentClient({ baseUrl, agentId, apiKey } | { baseUrl, bearerToken }, { timeoutMs })`, with `client.payments.create(...)` and friends. */
export type AgentClient = AgentClientBase & GroupMethods;
export const AgentClient = AgentClientBase as unknown as new (credentials: Credentials, options?: ClientOptions) => AgentClient;
