// The request pipeline of /v1/agent, and of /v1/owner + /v1/admin with another authenticate step:
// authenticate -> rate limit -> parse -> route + validate (openapi-backend) -> idempotency ->
// handler -> validate response -> write (contract §2 order).
import { timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Knex } from 'knex';
import type { Config } from '../config.js';
import { assertAgentActive, createApiKeyAuthenticator } from '../auth/api-key.js';
import { ADMIN_SUBJECT, type Principal } from '../auth/principal.js';
import { findAuthRow } from '../db/repositories/agent.repository.js';
import { fingerprint, validateKey, type Idempotency } from '../idempotency/idempotency.js';
import { sha256Hex } from '../lib/crypto.js';
import { OWNER_SESSION_COOKIE, readCookie } from '../console/cookies.js';
import type { Clock } from '../lib/clock.js';
import { ApiError, errorBody, isApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { routeFamily, type Metrics } from '../observability/metrics.js';
import { SpanStatusCode, type Tracing } from '../observability/tracing.js';
import { AUTH_FAILURE_RULE, PUBLIC_RULE, type RateClass } from '../ratelimit/classes.js';
import type { RateDecision } from '../ratelimit/limiter.js';
import type { RateLimitService } from '../ratelimit/rate-limit.service.js';
import type { Services } from '../services/registry.js';
import { toApiError } from './error-mapping.js';
import { headOverLimits } from './limits.js';
import type { OperationMeta } from './operations.js';
import type { Around, Router } from './router.js';
import type { HandlerResult, RequestContext } from './types.js';

export const BODY_LIMIT_BYTES = 64 * 1024;

export interface BearerVerifier {
  verify(token: string, resource: 'agent' | 'mcp'): Promise<Principal>;
}

export interface PipelineDeps {
  config: Readonly<Config>;
  db: Knex;
  clock: Clock;
  log: Logger;
  router: Router;
  services: Services;
  rateLimits: RateLimitService;
  bearer: BearerVerifier | null;
  /** The operator's token (ADMIN_TOKEN or the embedded default's generated one); null: /v1/admin is off. */
  adminToken?: string | null;
}

type Authenticated = { principal: Principal; overrides: Parameters<RateLimitService['rulesFor']>[0] };
type AuthenticateStep = (req: Request, res: Response, op: OperationMeta | undefined) => Promise<Authenticated>;

interface Locals {
  requestId: string;
  startedAt: bigint;
  rate?: RateDecision;
  op?: OperationMeta;
  agentId?: string;
}

const locals = (res: Response): Locals => res.locals as Locals;

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

export function wwwAuthenticate(baseUrl: string, resource: 'agent' | 'mcp', error: string, scope?: string): string {
  const metadata = `${baseUrl}/.well-known/oauth-protected-resource/${resource === 'agent' ? 'v1/agent' : 'mcp'}`;
  const parts = [`resource_metadata="${metadata}"`, `error="${error}"`];
  if (scope) parts.push(`scope="${scope}"`);
  return `Bearer ${parts.join(', ')}`;
}

/** Client address for per-address limits; X-Forwarded-For only when TRUST_PROXY is set (Express `trust proxy`). */
export const clientAddress = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

export function createPipeline(deps: PipelineDeps) {
  const { config, router, rateLimits, log } = deps;
  const authenticateKey = createApiKeyAuthenticator({ db: deps.db, clock: deps.clock });

  function send(req: Request, res: Response, result: HandlerResult): void {
    const l = locals(res);
    const headers: Record<string, string> = { ...(l.rate ? rateLimitHeaders(l.rate) : {}), ...(result.headers ?? {}), 'X-Request-Id': l.requestId };
    let { status, body } = result;
    if (config.validateResponses && l.op) {
      const problems = router.validateResponse(l.op.operationId, status, body, headers);
      if (problems.length > 0) {
        log.error({ operationId: l.op.operationId, status, problems, requestId: l.requestId }, 'response does not match the document');
        status = 500;
        body = errorBody('internal_error', `Response failed validation against the document (request ${l.requestId}).`, { response_validation: problems });
      }
    }
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    // The access line is written by src/http/access-log.ts when the response closes.
    res.status(status).json(body);
  }

  function sendError(req: Request, res: Response, err: unknown): void {
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.code === 'service_unavailable') log.warn({ err, requestId: locals(res).requestId }, 'backing service unavailable');
      send(req, res, { status: apiError.status, body: errorBody(apiError.code, apiError.message, apiError.details), headers: apiError.headers });
      return;
    }
    log.error({ err, requestId: locals(res).requestId }, 'unhandled error');
    send(req, res, { status: 500, body: errorBody('internal_error', `An internal error occurred (request ${locals(res).requestId}).`) });
  }

  /** Charges the per-address failure bucket; a refused charge turns the failure into 429. */
  async function failAuthentication(req: Request, res: Response, err: ApiError): Promise<never> {
    const decision = await rateLimits.chargeAddress('authfail', clientAddress(req), AUTH_FAILURE_RULE);
    locals(res).rate = decision;
    if (!decision.allowed) throw rateLimitedError(decision);
    throw err;
  }

  async function authenticate(req: Request, res: Response, resource: 'agent' | 'mcp'): Promise<{ principal: Principal; overrides: Parameters<RateLimitService['rulesFor']>[0] }> {
    const authorization = req.headers.authorization;
    if (authorization !== undefined) {
      const m = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(authorization);
      const invalid = (message: string) =>
        new ApiError('invalid_token', message, undefined, { headers: { 'WWW-Authenticate': wwwAuthenticate(config.baseUrl, resource, 'invalid_token') } });
      if (!m || !deps.bearer) return failAuthentication(req, res, invalid('The bearer token is missing, malformed or not accepted here.'));
      try {
        const principal = await deps.bearer.verify(m[1]!, resource);
        if (principal.snapshot) return { principal, overrides: principal.snapshot.rateOverrides };
        // A verifier without a snapshot: read the agent here and apply layer two ourselves.
        const row = await findAuthRow(deps.db, principal.agentId);
        if (!row) throw invalid('The token refers to an unknown agent.');
        assertAgentActive(row, deps.clock.now());
        return { principal, overrides: row.rate_overrides };
      } catch (err) {
        if (isApiError(err) && err.status === 401) {
          const withHeader = err.code === 'invalid_token' && !err.headers['WWW-Authenticate'] ? invalid(err.message) : err;
          return failAuthentication(req, res, withHeader);
        }
        throw err;
      }
    }
    try {
      const { principal, row } = await authenticateKey(header(req, 'x-agent-id'), header(req, 'x-api-key'));
      return { principal, overrides: row.rate_overrides };
    } catch (err) {
      if (isApiError(err) && err.status === 401) return failAuthentication(req, res, err);
      throw err;
    }
  }

  function checkScope(principal: Principal, op: OperationMeta, resource: 'agent' | 'mcp'): void {
    if (principal.method !== 'oauth' || !op.scope) return;
    if (principal.scopes.has(op.scope) || op.altScopes.some((s) => principal.scopes.has(s))) return;
    throw new ApiError('insufficient_scope', `This route requires the scope ${op.scope}.`, { required_scope: op.scope }, {
      headers: { 'WWW-Authenticate': wwwAuthenticate(config.baseUrl, resource, 'insufficient_scope', op.scope) },
    });
  }

  const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, type: ['application/json', 'application/*+json'], strict: false });
  const parseBody = (req: Request, res: Response) =>
    new Promise<void>((resolve, reject) => {
      jsonParser(req, res, (err?: unknown) => {
        if (!err) return resolve();
        const e = err as { type?: string; status?: number };
        if (e.type === 'entity.too.large' || e.status === 413) return reject(new ApiError('payload_too_large', `Request bodies are limited to ${BODY_LIMIT_BYTES} bytes.`));
        if (e.type === 'entity.parse.failed') return reject(new ApiError('validation_failed', 'The request body is not valid JSON.', { errors: [{ location: 'body', path: '/', message: 'malformed JSON' }] }));
        if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') return reject(new ApiError('validation_failed', 'Unsupported request body encoding.', { errors: [{ location: 'body', path: '/', message: 'unsupported encoding' }] }));
        // Any other client-side failure to read the body (a truncated gzip stream, an aborted upload).
        if (typeof e.status === 'number' && e.status < 500) return reject(new ApiError('validation_failed', 'The request body could not be read.', { errors: [{ location: 'body', path: '/', message: 'unreadable body' }] }));
        reject(err);
      });
    });

  /** One entry of the pipeline; only the authenticate step differs between /v1/agent and /v1/owner. */
  const createEntry = (authenticateStep: AuthenticateStep) => async (req: Request, res: Response): Promise<void> => {
    const path = req.originalUrl.split('?')[0]!;
    try {
      const match = router.match(req.method, path);
      const op = match.kind === 'operation' ? match.op : undefined;
      locals(res).op = op;

      // An over-long URL or header block is refused whoever sends it; a caller who authenticates
      // gets its rate-limit headers and is charged, one who does not is not told 401 instead.
      const oversize = headOverLimits(req);
      if (op?.isPublic) {
        const decision = await rateLimits.chargeAddress('public', clientAddress(req), PUBLIC_RULE);
        locals(res).rate = decision;
        if (!decision.allowed) throw rateLimitedError(decision);
        if (oversize) throw oversize;
        const ctx = baseContext(req, res, null);
        send(req, res, await router.handle({ method: req.method, path, query: req.query as never, headers: req.headers as never, body: undefined }, ctx as RequestContext));
        return;
      }

      const { principal, overrides } = await authenticateStep(req, res, op).catch((err: unknown) => {
        throw oversize && isApiError(err) && err.status === 401 ? oversize : err;
      });
      locals(res).agentId = principal.agentId;
      const cls: RateClass = op?.rateClass ?? 'read';
      const rule = rateLimits.rulesFor(overrides)[cls];
      const decision = await rateLimits.charge(principal.agentId, cls, rule);
      locals(res).rate = decision;
      if (!decision.allowed) throw rateLimitedError(decision);
      if (oversize) throw oversize;
      if (match.kind === 'not_found') throw new ApiError('not_found', 'No route matches this request.');
      if (match.kind === 'method_not_allowed') {
        throw new ApiError('method_not_allowed', `Allowed methods: ${match.allowed.join(', ')}.`, undefined, { headers: { Allow: match.allowed.join(', ') } });
      }
      checkScope(principal, op!, 'agent');
      checkOwnerSide(principal, op!);
      assertDecodablePath(path);
      await parseBody(req, res);
      const idempotencyKey = validateKey(header(req, 'idempotency-key'));
      const ctx: RequestContext = { ...baseContext(req, res, principal), idempotencyKey };
      const result = await router.handle({ method: req.method, path, query: req.query as never, headers: req.headers as never, body: req.body }, ctx);
      send(req, res, result);
    } catch (err) {
      sendError(req, res, err);
    }
  };

  const agentApi = createEntry((req, res) => authenticate(req, res, 'agent'));

  /**
   * /v1/owner and /v1/admin: `Authorization: Bearer` with an owner token (owt_…) or the admin token.
   * Without a configured admin token the /v1/admin routes do not exist (404 before authentication).
   */
  const adminDigest = deps.adminToken ? Buffer.from(sha256Hex(deps.adminToken)) : null;
  const authenticateOwner: AuthenticateStep = async (req, res, op) => {
    if (!adminDigest && (op?.scope === 'admin' || req.originalUrl.startsWith('/v1/admin'))) throw new ApiError('not_found', 'The /v1/admin routes are off: no admin token is configured.');
    const failed = () => failAuthentication(req, res, new ApiError('authentication_failed', 'Send an owner token or the admin token as Authorization: Bearer <token>, or sign in to the console.'));
    const sessionToken = req.headers.authorization === undefined ? readCookie(req, OWNER_SESSION_COOKIE) : undefined;
    if (sessionToken !== undefined && op?.scope !== 'admin') return authenticateSession(req, res, sessionToken, failed);
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!m) return failed();
    const token = m[1]!;
    if (adminDigest && timingSafeEqual(Buffer.from(sha256Hex(token)), adminDigest)) {
      return { principal: { agentId: ADMIN_SUBJECT, walletId: '', ownerId: '', agentName: '', method: 'admin_token', scopes: new Set(), clientId: null, grantId: null }, overrides: [] };
    }
    const owner = await deps.services.owner.authenticateToken(deps.db, token);
    if (!owner) return failed();
    return { principal: { agentId: owner.ownerId, walletId: '', ownerId: owner.ownerId, agentName: '', method: 'owner_token', ownerTokenId: owner.tokenId, scopes: new Set(), clientId: null, grantId: null }, overrides: [] };
  };
  /** The console's session cookie; a write also needs the session's X-CSRF-Token header. */
  async function authenticateSession(req: Request, res: Response, token: string, failed: () => Promise<never>): Promise<Authenticated> {
    const session = await deps.services.owner.authenticateSession(deps.db, token);
    if (!session) return failed();
    if (!['GET', 'HEAD'].includes(req.method)) {
      const given = Buffer.from(sha256Hex(header(req, 'x-csrf-token') ?? ''));
      if (!timingSafeEqual(given, Buffer.from(sha256Hex(session.csrfToken)))) {
        return failAuthentication(req, res, new ApiError('authentication_failed', 'A console write needs the X-CSRF-Token header of its session.'));
      }
    }
    return { principal: { agentId: session.ownerId, walletId: '', ownerId: session.ownerId, agentName: '', method: 'owner_session', ownerTokenId: null, scopes: new Set(), clientId: null, grantId: null }, overrides: [] };
  }
  const ownerApi = createEntry(authenticateOwner);

  /** Owner and admin credentials stay on their side; an owner token never reaches a /v1/admin route. */
  function checkOwnerSide(principal: Principal, op: OperationMeta): void {
    if (op.scope === 'admin' && principal.method !== 'admin_token') throw new ApiError('insufficient_scope', 'This route needs the admin token.', { required_scope: 'admin' });
  }

  function baseContext(req: Request, res: Response, principal: Principal | null): Omit<RequestContext, 'principal' | 'idempotencyKey'> & { principal: Principal; idempotencyKey: string | null } {
    return {
      requestId: locals(res).requestId,
      principal: principal as Principal,
      db: deps.db,
      idempotencyKey: null,
      services: deps.services,
      clock: deps.clock,
      config,
      log,
      router,
      clientAddress: clientAddress(req),
    };
  }

  return { agentApi, ownerApi, send, sendError, authenticate, checkScope };
}

/** Runs an operation's handler inside the idempotency protocol when the route takes a key. */
export function createIdempotencyAround(idempotency: Idempotency): Around {
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

/** A path with a malformed percent-escape is a client error (the router's parameter parser would throw). */
function assertDecodablePath(path: string): void {
  try {
    decodeURIComponent(path);
  } catch {
    throw new ApiError('validation_failed', 'The request path contains a malformed percent-escape.', { errors: [{ location: 'path', path: 'path', message: 'malformed percent-escape' }] });
  }
}

export function header(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** X-Request-Id on every response: the caller's when it is sane, else a new UUID. */
export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  const incoming = header(req, 'x-request-id');
  const requestId = incoming && /^[\x21-\x7e]{1,128}$/.test(incoming) ? incoming : crypto.randomUUID();
  (res.locals as Locals).requestId = requestId;
  (res.locals as Locals).startedAt = process.hrtime.bigint();
  res.setHeader('X-Request-Id', requestId);
  next();
}

/** Counts and times every response by operationId (route family outside /v1/agent); mounted only when metrics are on. */
export function createRequestMetricsMiddleware(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    res.once('finish', () => {
      const l = res.locals as Locals;
      const seconds = Number(process.hrtime.bigint() - l.startedAt) / 1e9;
      metrics.observeRequest(l.op?.operationId ?? routeFamily(req.path), res.statusCode, seconds);
    });
    next();
  };
}

/** One server span per request, named by its operationId (route family outside /v1/agent) once known; mounted only when tracing is on. */
export function createRequestTracingMiddleware(tracing: Tracing) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = (res.locals as Locals).requestId;
    tracing.startRoot(`${req.method} ${routeFamily(req.path)}`, { 'http.request.method': req.method, 'url.path': req.path, 'agentapi.request_id': requestId }, (span) => {
      res.once('close', () => {
        const operationId = (res.locals as Locals).op?.operationId;
        const name = operationId ?? routeFamily(req.path);
        span.updateName(name);
        span.setAttributes({ 'agentapi.operation_id': name, 'http.response.status_code': res.statusCode });
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      });
      next();
    });
  };
}
