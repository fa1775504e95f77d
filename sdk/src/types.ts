// Route-key typing: `'POST /v1/agent/payments'` -> the operation's flat input (path + query + body) and success body,
// all read from the generated `paths` (no hand-written copies).
import type { components, paths } from './generated/api.js';
import type { GROUPS, ERROR_CODES, OPERATION_STATUSES } from './generated/operations.js';

type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';
type Simplify<T> = { [K in keyof T]: T[K] } & {};

type AgentPath = Extract<keyof paths, `/v1/agent/${string}`>;
/** Every /v1/agent operation as `'<METHOD> <path template>'`, e.g. `'GET /v1/agent/operations/{id}'`. */
export type RouteKey = {
  [P in AgentPath]: { [M in Method]: paths[P][M] extends { responses: unknown } ? `${Uppercase<M>} ${P}` : never }[Method];
}[AgentPath];

export type OperationOf<K extends RouteKey> = K extends `${infer M} ${infer P}` ? (P extends keyof paths ? (Lowercase<M> extends keyof paths[P] ? paths[P][Lowercase<M>] : never) : never) : never;

type ParamsIn<Op, Where extends 'path' | 'query'> = Op extends { parameters: infer X }
  ? X extends { [W in Where]?: infer V }
    ? [V] extends [never]
      ? unknown
      : [V] extends [undefined]
        ? unknown
        : NonNullable<V>
    : unknown
  : unknown;
type BodyOf<Op> = Op extends { requestBody?: infer RB } ? ([RB] extends [never] ? unknown : NonNullable<RB> extends { content: { 'application/json': infer B } } ? B : unknown) : unknown;

/** The request body alone (a union when the document says oneOf). */
export type RequestBody<K extends RouteKey> = BodyOf<OperationOf<K>>;
/** What a call takes: the path parameters, the query parameters and the body fields in one object. */
export type RequestInput<K extends RouteKey> =
  BodyOf<OperationOf<K>> extends infer B ? (B extends unknown ? Simplify<ParamsIn<OperationOf<K>, 'path'> & ParamsIn<OperationOf<K>, 'query'> & B> : never) : never;

type SuccessStatus = 200 | 201 | 202;
type ResponsesOf<Op> = Op extends { responses: infer R } ? R : never;
/** The parsed success body (`{ ok: true, ... }`). */
export type ResponseBody<K extends RouteKey> = ResponsesOf<OperationOf<K>>[Extract<keyof ResponsesOf<OperationOf<K>>, SuccessStatus>] extends infer R
  ? R extends { content: { 'application/json': infer B } }
    ? B
    : undefined
  : never;

/** Routes whose success body is a list page (`items`, `next_cursor`, `has_more`). */
export type PaginatedRouteKey = { [K in RouteKey]: ResponseBody<K> extends { items: unknown[]; next_cursor?: unknown } ? K : never }[RouteKey];
export type PageItem<K extends PaginatedRouteKey> = ResponseBody<K> extends { items: (infer I)[] } ? I : never;
export type PageQuery<K extends PaginatedRouteKey> = Omit<RequestInput<K>, 'cursor'>;

export interface RequestOptions {
  /** Sent as `Idempotency-Key`; writes that require one get `createIdempotencyKey()` when absent, reused by every retry. */
  idempotencyKey?: string;
  /** Deadline of the whole call, retries included (default: the client's `timeoutMs`). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Extra headers (`X-Request-Id`, ...). */
  headers?: Record<string, string>;
}

type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
/** Input optional when nothing in it is required. */
export type CallArgs<K extends RouteKey> = RequiredKeys<RequestInput<K>> extends never ? [input?: RequestInput<K>, options?: RequestOptions] : [input: RequestInput<K>, options?: RequestOptions];

type Groups = typeof GROUPS;
/** `client.payments.create(body, opts)`: one method per operation, generated from the document. */
export type GroupMethods = {
  [G in keyof Groups]: { [N in keyof Groups[G]]: (...args: CallArgs<Extract<Groups[G][N], RouteKey>>) => Promise<ResponseBody<Extract<Groups[G][N], RouteKey>>> };
};

export type ErrorCode = (typeof ERROR_CODES)[number];
export type OperationStatus = (typeof OPERATION_STATUSES)[number];
export type Operation = components['schemas']['Operation'];
export type EventEnvelope = components['schemas']['EventEnvelope'];
export type Schemas = components['schemas'];
