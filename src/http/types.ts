// The contract between the HTTP glue and the handlers: handlers are typed by operationId from the
// document (generated/api.d.ts), so a body, a parameter or a response the document does not
// describe is a compile error.
import type { Request as OabRequest } from 'openapi-backend';
import type { operations } from '../../generated/api.js';
import type { Config } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../lib/clock.js';
import type { ErrorBody } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { Principal } from '../auth/principal.js';
import type { Services } from '../services/registry.js';
import type { HandlerResult, OperationId, OperationMeta } from '../lib/contract.js';
import type { MatchResult } from './operations.js';

export type { HandlerResult, OperationId, Schema } from '../lib/contract.js';

type Parameters<K extends OperationId> = operations[K]['parameters'];
type Present<T> = [Exclude<T, undefined>] extends [never] ? Record<string, never> : Exclude<T, undefined>;
type Json<T> = T extends { content: { 'application/json': infer B } } ? B : undefined;

export type PathParams<K extends OperationId> = Present<Parameters<K>['path']>;
export type QueryParams<K extends OperationId> = Partial<Present<Parameters<K>['query']>>;
export type RequestBody<K extends OperationId> = operations[K] extends { requestBody: infer R }
  ? Json<R>
  : operations[K] extends { requestBody?: infer R }
    ? Json<Exclude<R, undefined>> | undefined
    : undefined;

/** What a handler receives: the request after openapi-backend validated and coerced it. */
export interface OperationRequest<K extends OperationId> {
  operationId: K;
  params: PathParams<K>;
  query: QueryParams<K>;
  body: RequestBody<K>;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

type Responses<K extends OperationId> = operations[K]['responses'];
/** The statuses below 400 the document declares for an operation, each with its body. */
type Answers<K extends OperationId> =
  | {
      [S in keyof Responses<K>]: S extends number ? (`${S}` extends `${1 | 2 | 3}${string}` ? { status: S; body: Json<Responses<K>[S]>; headers?: Record<string, string> } : never) : never;
    }[keyof Responses<K>]
  | Refused<K>;
/** The 403 of an operation that declares one: a refusal the service returned (src/lib/refusal.ts `answer`). */
type Refused<K extends OperationId> = 403 extends keyof Responses<K> ? { status: 403; body: Json<Responses<K>[403]> } : never;

/** A request for an operation already known: the path as sent (its parameters already taken from it) and the rest. */
export interface DispatchInput {
  path: string;
  params: Record<string, string>;
  query: Record<string, unknown>;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: unknown;
}

/** The app's router (src/http/router.ts): routing, request validation, the handlers, response validation. */
export interface Router {
  ops: OperationMeta[];
  byId: Map<string, OperationMeta>;
  /** The one route match of a request (HTTP entries and simulate); MCP tools hold their operation. */
  match(method: string, path: string): MatchResult;
  /** Matches `req` and dispatches it: for callers holding only a method and a path (tests). */
  handle(req: OabRequest, ctx: RequestContext): Promise<HandlerResult>;
  /** Runs an operation already matched or held: U+0000 guard, cursors, validation, idempotency, handler. */
  dispatch(op: OperationMeta, input: DispatchInput, ctx: RequestContext): Promise<HandlerResult>;
  /** Problems of a response against the document (empty when it conforms). */
  validateResponse(operationId: string, status: number, body: unknown, headers: Record<string, string>): string[];
  implemented: Set<string>;
  /**
   * Compiles every operation's request validators ahead of use, yielding to the event loop between operations
   * (stops when `signal` aborts). Response validators (VALIDATE_RESPONSES, off in production) compile on an
   * operation's first response instead: warming them too cost ~4x the CPU and ~135 MB of RSS
   * (docs/perf/issue-12-performance.md, "Performance: footprint and startup").
   */
  warm(signal?: AbortSignal): Promise<void>;
}

export interface RequestContext {
  requestId: string;
  principal: Principal;
  /** The idempotency transaction for idempotent writes, otherwise the pool. */
  db: Db;
  /** Present when the caller sent an Idempotency-Key. */
  idempotencyKey: string | null;
  services: Services;
  clock: Clock;
  config: Readonly<Config>;
  log: Logger;
  /** The app's router, for handlers that dispatch a request of their own (simulate). */
  router: Router;
  /** The caller's address (X-Forwarded-For only with TRUST_PROXY), for the owner audit log. */
  clientAddress?: string;
  /** A dry run (simulate): the idempotency layer is skipped, the caller rolls everything back. */
  dryRun?: boolean;
}

/** The body the document declares for one status of an operation. */
export type ResponseBody<K extends OperationId, S extends keyof Responses<K>> = Json<Responses<K>[S]>;

/** A policy refusal returned as a value (src/lib/refusal.ts), for operations whose document declares a 403. */
type RefusalAnswers<K extends OperationId> = 403 extends keyof Responses<K> ? { status: 403; body: ErrorBody } : never;

/** The handler of one operation: its request and its success answers (and a refusal's 403) come from the document. */
export type Handler<K extends OperationId> = (req: OperationRequest<K>, ctx: RequestContext) => Promise<Answers<K> | RefusalAnswers<K>>;

/**
 * Operations the document describes but the router does not serve: probes (src/http/health.ts), the
 * documents rendered from it (src/docs/) and the OAuth authorization server with its metadata (oidc-provider, src/oauth/).
 */
export const SERVED_OUTSIDE_ROUTER = [
  'getHealth',
  'getReadiness',
  'getDocs',
  'getSkill',
  'getLlmsTxt',
  'getAuthorizationServerMetadata',
  'getOpenIdConfiguration',
  'getProtectedResourceMetadataAgent',
  'getProtectedResourceMetadataMcp',
  'oauthRegister',
  'oauthAuthorize',
  'oauthToken',
  'oauthRevoke',
  'oauthJwks',
  // A webhook the service sends (the document's `webhooks`), not a route it serves.
  'receiveAgentEvent',
] as const satisfies readonly OperationId[];
type RoutedOperationId = Exclude<OperationId, (typeof SERVED_OUTSIDE_ROUTER)[number]>;

/** Every routed operation of the document has a handler: a missing one is a compile error. */
export type HandlerMap = { [K in RoutedOperationId]: Handler<K> };

/** The router's view of any handler. */
export type AnyHandler = (req: OperationRequest<OperationId>, ctx: RequestContext) => Promise<HandlerResult>;
