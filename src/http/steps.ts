// The request pipeline's steps, written once. Every entry composes them as a list, the way
// node-oidc-provider composes its actions: /v1/agent and /v1/owner (pipeline.ts), /mcp (src/mcp/mcp.ts)
// and simulate's dry run (src/handlers/simulate.ts). A step either returns what the next one needs or
// throws the ApiError that answers; `errorResult` and `respond` turn either into the response.
import express, { type Request, type Response } from 'express';
import type { Config } from '../config.js';
import { rollbackAfter, type Db, type Settled } from '../db/knex.js';
import { createApiKeyAuthenticator } from '../auth/api-key.js';
import { buildWwwAuthenticate, type BearerResource, type BearerVerifier } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { validateKey, type Idempotency, fingerprint } from '../idempotency/idempotency.js';
import type { Clock } from '../lib/clock.js';
import type { HandlerResult, OperationMeta } from '../lib/contract.js';
import { ApiError, errorBody, isApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { AUTH_FAILURE_RULE, type RateClass } from '../ratelimit/classes.js';
import type { RateDecision } from '../ratelimit/limiter.js';
import type { RateLimitService } from '../ratelimit/rate-limit.service.js';
import type { Services } from '../services/registry.js';
import { toApiError } from './error-mapping.js';
import { isNestedDeeperThan, tooDeepError } from './input-guard.js';
import { clientAddress, header } from './request.js';
import type { Around } from './router.js';
import type { RequestContext, Router } from './types.js';

export type { Settled } from '../db/knex.js';

export const BODY_LIMIT_BYTES = 64 * 1024;

/** What every entry's steps need (src/app.ts hands the same object to the pipeline and to /mcp). */
export interface StepDeps {
  config: Readonly<Config>;
  db: Db;
  clock: Clock;
  log: Logger;
  router: Router;
  services: Services;
  rateLimits: RateLimitService;
  /** Verifies OAuth access tokens; null: bearer tokens are refused (invalid_token). */
  bearer: BearerVerifier | null;
}

/** One request (or one MCP tool call) as the steps see it; the rate decision's headers go on every answer. */
export interface Exchange {
  requestId: string;
  rate?: RateDecision;
  /** The operation, once routed: its responses are validated against the document. */
  op?: OperationMeta;
}

export type RateOverrides = Parameters<RateLimitService['rulesFor']>[0];
export interface Authenticated {
  principal: Principal;
  overrides: RateOverrides;
}

/** How each protected resource takes credentials (contract §3, §12). */
const RESOURCES: Record<BearerResource, { acceptsApiKeys: boolean; missingToken: string; challengesEveryRefusal: boolean }> = {
  agent: { acceptsApiKeys: true, missingToken: 'The bearer token is missing, malformed or not accepted here.', challengesEveryRefusal: false },
  // /mcp is an OAuth protected resource only; layer-two refusals (agent disabled, outside its window) still point at the metadata.
  mcp: { acceptsApiKeys: false, missingToken: 'A bearer token issued for this MCP resource is required.', challengesEveryRefusal: true },
};

const BEARER = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i;

export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(d.remaining),
    'X-RateLimit-Reset': d.resetAt.toISOString(),
    'X-RateLimit-Window-Seconds': String(d.windowSeconds),
  };
}

export function rateLimitedError(d: RateDecision): ApiError {
  return new ApiError(
    'rate_limited',
    `Rate limit exceeded: ${d.limit} requests per ${d.windowSeconds} s (burst ${d.burst}). Retry after ${d.retryAfterSeconds} s.`,
    { limit_count: d.limit, attempted_count: d.attemptedCount },
    { headers: { 'Retry-After': String(d.retryAfterSeconds) } },
  );
}

export function createSteps(deps: StepDeps) {
  const { config, log, router, rateLimits } = deps;
  const authenticateKey = createApiKeyAuthenticator({ db: deps.db, clock: deps.clock });
  // RFC 6750 §3.1: a request that sent no credentials at all gets the challenge without an error code.
  const invalidToken = (resource: BearerResource, message: string, from?: ApiError, credentialsSent = true) =>
    new ApiError(from?.code ?? 'invalid_token', message, from?.details, {
      headers: { ...from?.headers, 'WWW-Authenticate': buildWwwAuthenticate(config.baseUrl, resource, credentialsSent ? 'invalid_token' : undefined) },
    });

  /** Charges the per-address failure bucket; a refused charge turns the failure into 429. */
  async function failAuthentication(req: Request, exchange: Exchange, err: ApiError): Promise<never> {
    const decision = await rateLimits.chargeAddress('authfail', clientAddress(req), AUTH_FAILURE_RULE);
    exchange.rate = decision;
    if (!decision.allowed) throw rateLimitedError(decision);
    throw err;
  }

  /** The agent behind a bearer token for `resource`, or (on /v1/agent only) behind X-Agent-Id + X-Api-Key. */
  async function authenticate(req: Request, exchange: Exchange, resource: BearerResource): Promise<Authenticated> {
    const rules = RESOURCES[resource];
    const authorization = req.headers.authorization;
    if (authorization === undefined && rules.acceptsApiKeys) {
      try {
        const { principal, row } = await authenticateKey(header(req, 'x-agent-id'), header(req, 'x-api-key'));
        return { principal, overrides: row.rate_overrides };
      } catch (err) {
        if (isApiError(err) && err.status === 401) return failAuthentication(req, exchange, err);
        throw err;
      }
    }
    const token = BEARER.exec(authorization ?? '')?.[1];
    if (!token || !deps.bearer) return failAuthentication(req, exchange, invalidToken(resource, rules.missingToken, undefined, authorization !== undefined));
    try {
      const principal = await deps.bearer.verify(token, resource);
      return { principal, overrides: principal.snapshot.rateOverrides };
    } catch (err) {
      if (!isApiError(err) || err.status !== 401) throw err;
      if (err.code === 'invalid_token' && !err.headers['WWW-Authenticate']) return failAuthentication(req, exchange, invalidToken(resource, err.message));
      if (err.code !== 'invalid_token' && rules.challengesEveryRefusal) return failAuthentication(req, exchange, invalidToken(resource, err.message, err));
      return failAuthentication(req, exchange, err);
    }
  }

  /** Charges the subject's bucket of the operation's class; 429 with Retry-After when it is empty. */
  async function chargeRateLimit(exchange: Exchange, subject: string, cls: RateClass, overrides: RateOverrides): Promise<void> {
    const decision = await rateLimits.charge(subject, cls, rateLimits.rulesFor(overrides)[cls]);
    exchange.rate = decision;
    if (!decision.allowed) throw rateLimitedError(decision);
  }

  /** The shared scope step with this server's challenge URL. */
  const requireScopeHere = (principal: Principal, ops: OperationMeta[], resource: BearerResource, noun: 'route' | 'tool' = 'route') => requireScope(config.baseUrl, principal, ops, resource, noun);

  /**
   * What the router cannot check: a decodable path, a JSON body of at most 64 KB, a sane
   * Idempotency-Key. Returns the key; the router then validates the request against the document.
   */
  async function validateRequest(req: Request, res: Response, path: string): Promise<{ idempotencyKey: string | null }> {
    assertDecodablePath(path);
    const problem = await readJsonBody(req, res);
    if (problem) throw bodyError(problem);
    return { idempotencyKey: validateKey(header(req, 'idempotency-key')) };
  }

  /** The handlers' context: the one literal every entry builds its RequestContext from. */
  function contextFor(exchange: Exchange, principal: Principal | null, extra: { idempotencyKey?: string | null; clientAddress?: string } = {}): RequestContext {
    return {
      requestId: exchange.requestId,
      principal: principal as Principal,
      db: deps.db,
      idempotencyKey: extra.idempotencyKey ?? null,
      services: deps.services,
      clock: deps.clock,
      config,
      log,
      router,
      ...(extra.clientAddress === undefined ? {} : { clientAddress: extra.clientAddress }),
    };
  }

  /** The answer of a thrown error: the ApiError it stands for, else a 500 that hides internals. */
  function errorResult(exchange: Exchange, err: unknown, logContext: Record<string, unknown> = {}): HandlerResult {
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.code === 'service_unavailable') log.warn({ err, requestId: exchange.requestId, ...logContext }, 'backing service unavailable');
      return { status: apiError.status, body: errorBody(apiError.code, apiError.message, apiError.details), headers: apiError.headers };
    }
    log.error({ err, requestId: exchange.requestId, ...logContext }, 'unhandled error');
    return { status: 500, body: errorBody('internal_error', `An internal error occurred (request ${exchange.requestId}).`) };
  }

  /** The response as it is sent: rate-limit headers and X-Request-Id added, checked against the document in test and development. */
  function respond(exchange: Exchange, result: HandlerResult): HandlerResult {
    const headers: Record<string, string> = { ...(exchange.rate ? rateLimitHeaders(exchange.rate) : {}), ...(result.headers ?? {}), 'X-Request-Id': exchange.requestId };
    let { status, body } = result;
    if (config.validateResponses && exchange.op) {
      const problems = router.validateResponse(exchange.op.operationId, status, body, headers);
      if (problems.length > 0) {
        log.error({ operationId: exchange.op.operationId, status, problems, requestId: exchange.requestId }, 'response does not match the document');
        status = 500;
        body = errorBody('internal_error', `Response failed validation against the document (request ${exchange.requestId}).`, { response_validation: problems });
      }
    }
    return { status, body, headers };
  }

  return { authenticate, failAuthentication, chargeRateLimit, requireScope: requireScopeHere, validateRequest, contextFor, errorResult, respond };
}

/**
 * A dry run of one request (simulate): the router's validation and the handler run in a transaction
 * that is always rolled back, without the idempotency step; the answer or the error comes back as a value.
 */
export function dryRun(ctx: RequestContext, op: OperationMeta, request: { path: string; params: Record<string, string>; body: unknown }): Promise<Settled<HandlerResult>> {
  return rollbackAfter(ctx.db, (trx) =>
    ctx.router.dispatch(
      op,
      { path: request.path, params: request.params, query: {}, headers: { 'idempotency-key': `simulate-${ctx.requestId}`, 'content-type': 'application/json' }, body: request.body },
      { ...ctx, db: trx, idempotencyKey: null, dryRun: true },
    ),
  );
}

/** The scope rule: header keys hold every scope; an OAuth token needs the operation's scope or one of its alternatives. */
export function scopeAllows(principal: Principal, op: Pick<OperationMeta, 'scope' | 'altScopes'>): boolean {
  return principal.method !== 'oauth' || !op.scope || principal.scopes.has(op.scope) || op.altScopes.some((s) => principal.scopes.has(s));
}

/**
 * 403 insufficient_scope with the RFC 6750 challenge when an OAuth token lacks the scope of one of
 * `ops` (an MCP batch may call several tools: their missing scopes are named together). Header keys
 * hold every scope.
 */
export function requireScope(baseUrl: string, principal: Principal, ops: OperationMeta[], resource: BearerResource, noun: 'route' | 'tool' = 'route'): void {
  const missing = new Set<string>();
  for (const op of ops) if (!scopeAllows(principal, op)) missing.add(op.scope!);
  if (missing.size === 0) return;
  const scope = [...missing].join(' ');
  throw new ApiError(
    'insufficient_scope',
    `This ${noun} requires the scope ${scope}.`,
    { required_scope: scope },
    {
      headers: { 'WWW-Authenticate': buildWwwAuthenticate(baseUrl, resource, 'insufficient_scope', scope) },
    },
  );
}

/**
 * The idempotency step. It runs inside the router, around the handler, because it needs the
 * validated request (its fingerprint); a dry run (simulate) skips it.
 */
export function runIdempotent(idempotency: Idempotency): Around {
  return async (op, params, body, ctx, next) => {
    if (op.idempotency === 'none') return next(ctx);
    if (!ctx.idempotencyKey) {
      if (op.idempotency === 'required') {
        throw new ApiError('validation_failed', 'The Idempotency-Key header is required on this route.', { errors: [{ location: 'header', path: 'Idempotency-Key', message: 'is required' }] });
      }
      return next(ctx);
    }
    const outcome = await idempotency.run(
      { agentId: ctx.principal.agentId, key: ctx.idempotencyKey, operationId: op.operationId, fingerprint: fingerprint({ method: op.method, operationId: op.operationId, params, body }) },
      (trx) => next({ ...ctx, db: trx }),
    );
    return outcome.result;
  };
}

/** Why a JSON body could not be read (express.json's error, classified). */
export type BodyProblem = { kind: 'too_large' | 'too_deep' | 'malformed' | 'encoding' | 'unreadable' } | { kind: 'failed'; err: unknown };

/** body-parser's `verify` hook: sees the raw bytes before JSON.parse; a throw becomes the parser's error. */
export function refuseDeepJson(_req: unknown, _res: unknown, buf: Buffer, encoding: string | null): void {
  // express.raw passes no encoding: the bytes are taken as UTF-8, as JSON on the wire is (RFC 8259 §8.1).
  const text = !encoding || /^utf-?8$/i.test(encoding) ? buf : new TextDecoder(encoding).decode(buf);
  if (isNestedDeeperThan(text)) throw Object.assign(new Error('JSON nested too deep'), { status: 400, type: 'entity.too.deep' });
}

const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, type: ['application/json', 'application/*+json'], strict: false, verify: refuseDeepJson });

const NO_BODY_PROBLEM: Promise<null> = Promise.resolve(null);

/** Parses a JSON body into `req.body` (at most BODY_LIMIT_BYTES); each entry answers a problem in its own protocol. */
export function readJsonBody(req: Request, res: Response): Promise<BodyProblem | null> {
  // body-parser's own test for a request without a body (type-is hasBody), answered without its promise, stream and
  // debug plumbing: every GET takes this way. req.body is left as body-parser leaves it, undefined.
  if (req.headers['transfer-encoding'] === undefined && isNaN(Number(req.headers['content-length']))) {
    if (!('body' in (req as object))) (req as { body?: unknown }).body = undefined;
    return NO_BODY_PROBLEM;
  }
  return new Promise((resolve) => {
    jsonParser(req, res, (err?: unknown) => {
      if (!err) return resolve(null);
      const e = err as { type?: string; status?: number };
      if (e.type === 'entity.too.large' || e.status === 413) return resolve({ kind: 'too_large' });
      if (e.type === 'entity.too.deep') return resolve({ kind: 'too_deep' });
      if (e.type === 'entity.parse.failed') return resolve({ kind: 'malformed' });
      if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') return resolve({ kind: 'encoding' });
      // Any other client-side failure to read the body (a truncated gzip stream, an aborted upload).
      if (typeof e.status === 'number' && e.status < 500) return resolve({ kind: 'unreadable' });
      resolve({ kind: 'failed', err });
    });
  });
}

function bodyError(problem: BodyProblem): unknown {
  const invalid = (message: string, detail: string) => new ApiError('validation_failed', message, { errors: [{ location: 'body', path: '/', message: detail }] });
  switch (problem.kind) {
    case 'too_large':
      return new ApiError('payload_too_large', `Request bodies are limited to ${BODY_LIMIT_BYTES} bytes.`);
    case 'too_deep':
      return tooDeepError();
    case 'malformed':
      return invalid('The request body is not valid JSON.', 'malformed JSON');
    case 'encoding':
      return invalid('Unsupported request body encoding.', 'unsupported encoding');
    case 'unreadable':
      return invalid('The request body could not be read.', 'unreadable body');
    case 'failed':
      return problem.err;
  }
}

/** A path with a malformed percent-escape is a client error (the router's parameter parser would throw). */
function assertDecodablePath(path: string): void {
  try {
    decodeURIComponent(path);
  } catch {
    throw new ApiError('validation_failed', 'The request path contains a malformed percent-escape.', { errors: [{ location: 'path', path: 'path', message: 'malformed percent-escape' }] });
  }
}
