// The request pipeline of /v1/agent, and of /v1/owner + /v1/admin with another authenticate step
// (contract §2 order). Each entry is a list of the steps of src/http/steps.ts:
// authenticate -> chargeRateLimit -> route -> requireScope -> validateRequest -> router (Ajv,
// runIdempotent, handler) -> respond.
import { timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ADMIN_SUBJECT, type Principal } from '../auth/principal.js';
import { OWNER_SESSION_COOKIE, readCookie } from '../console/cookies.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError, isApiError } from '../lib/errors.js';
import { routeFamily, type Metrics } from '../observability/metrics.js';
import { SpanStatusCode, type Tracing } from '../observability/tracing.js';
import { PUBLIC_RULE } from '../ratelimit/classes.js';
import { headOverLimits } from './limits.js';
import type { OperationMeta } from './operations.js';
import { clientAddress, header } from './request.js';
import { createSteps, rateLimitedError, type Authenticated, type Exchange, type StepDeps } from './steps.js';
import type { HandlerResult } from './types.js';

export interface PipelineDeps extends StepDeps {
  /** The operator's token (ADMIN_TOKEN or the embedded default's generated one); null: /v1/admin is off. */
  adminToken?: string | null;
}

type AuthenticateStep = (req: Request, exchange: Exchange, op: OperationMeta | undefined) => Promise<Authenticated>;

interface Locals extends Exchange {
  startedAt: bigint;
  agentId?: string;
}

const locals = (res: Response): Locals => res.locals as Locals;

export function createPipeline(deps: PipelineDeps) {
  const { router, rateLimits } = deps;
  const steps = createSteps(deps);

  function send(res: Response, result: HandlerResult): void {
    const { status, body, headers } = steps.respond(locals(res), result);
    for (const [name, value] of Object.entries(headers ?? {})) res.setHeader(name, value);
    // The access line is written by src/http/access-log.ts when the response closes.
    if (plainJson(res, status, body)) {
      // What res.status(status).json(body) writes here, without Express's content-type parsing and freshness check.
      const json = JSON.stringify(body);
      res.statusCode = status;
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.setHeader('Content-Length', String(Buffer.byteLength(json)));
      res.end(json);
      return;
    }
    res.status(status).json(body);
  }

  /** One entry of the pipeline; only the authenticate step differs between /v1/agent and /v1/owner. */
  const createEntry =
    (authenticate: AuthenticateStep) =>
    async (req: Request, res: Response): Promise<void> => {
      const path = req.originalUrl.split('?')[0]!;
      const exchange = locals(res);
      try {
        const match = router.match(req.method, path);
        const op = match.kind === 'operation' ? match.op : undefined;
        exchange.op = op;

        // An over-long URL or header block is refused whoever sends it; a caller who authenticates
        // gets its rate-limit headers and is charged, one who does not is not told 401 instead.
        const oversize = headOverLimits(req);
        if (match.kind === 'operation' && match.op.isPublic) {
          exchange.rate = await rateLimits.chargeAddress('public', clientAddress(req), PUBLIC_RULE);
          if (!exchange.rate.allowed) throw rateLimitedError(exchange.rate);
          if (oversize) throw oversize;
          const ctx = steps.contextFor(exchange, null, { clientAddress: clientAddress(req) });
          send(res, await router.dispatch(match.op, { path, params: match.params, query: req.query, headers: req.headers, body: undefined }, ctx));
          return;
        }

        const { principal, overrides } = await authenticate(req, exchange, op).catch((err: unknown) => {
          throw oversize && isApiError(err) && err.status === 401 ? oversize : err;
        });
        exchange.agentId = principal.agentId;
        await steps.chargeRateLimit(exchange, principal.agentId, op?.rateClass ?? 'read', overrides);
        if (oversize) throw oversize;
        if (match.kind === 'not_found') throw new ApiError('not_found', 'No route matches this request.');
        if (match.kind === 'method_not_allowed') {
          throw new ApiError('method_not_allowed', `Allowed methods: ${match.allowed.join(', ')}.`, undefined, { headers: { Allow: match.allowed.join(', ') } });
        }
        steps.requireScope(principal, [match.op], 'agent');
        requireOwnerSide(principal, match.op);
        const { idempotencyKey } = await steps.validateRequest(req, res, path);
        const ctx = steps.contextFor(exchange, principal, { idempotencyKey, clientAddress: clientAddress(req) });
        send(res, await router.dispatch(match.op, { path, params: match.params, query: req.query, headers: req.headers, body: req.body }, ctx));
      } catch (err) {
        send(res, steps.errorResult(exchange, err));
      }
    };

  const agentApi = createEntry((req, exchange) => steps.authenticate(req, exchange, 'agent'));

  /**
   * /v1/owner and /v1/admin: `Authorization: Bearer` with an owner token (owt_…) or the admin token.
   * Without a configured admin token the /v1/admin routes do not exist (404 before authentication).
   */
  const adminDigest = deps.adminToken ? Buffer.from(sha256Hex(deps.adminToken)) : null;
  const authenticateOwner: AuthenticateStep = async (req, exchange, op) => {
    if (!adminDigest && (op?.scope === 'admin' || req.originalUrl.startsWith('/v1/admin'))) throw new ApiError('not_found', 'The /v1/admin routes are off: no admin token is configured.');
    const failed = () =>
      steps.failAuthentication(req, exchange, new ApiError('authentication_failed', 'Send an owner token or the admin token as Authorization: Bearer <token>, or sign in to the console.'));
    const sessionToken = req.headers.authorization === undefined ? readCookie(req, OWNER_SESSION_COOKIE) : undefined;
    if (sessionToken !== undefined && op?.scope !== 'admin') return authenticateSession(req, exchange, sessionToken, failed);
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!m) return failed();
    const token = m[1]!;
    if (adminDigest && timingSafeEqual(Buffer.from(sha256Hex(token)), adminDigest)) {
      return { principal: { agentId: ADMIN_SUBJECT, walletId: '', ownerId: '', agentName: '', method: 'admin_token', scopes: new Set(), clientId: null, grantId: null }, overrides: [] };
    }
    const owner = await deps.services.owner.authenticateToken(deps.db, token);
    if (!owner) return failed();
    return {
      principal: { agentId: owner.ownerId, walletId: '', ownerId: owner.ownerId, agentName: '', method: 'owner_token', ownerTokenId: owner.tokenId, scopes: new Set(), clientId: null, grantId: null },
      overrides: [],
    };
  };
  /** The console's session cookie; a write also needs the session's X-CSRF-Token header. */
  async function authenticateSession(req: Request, exchange: Exchange, token: string, failed: () => Promise<never>): Promise<Authenticated> {
    const session = await deps.services.owner.authenticateSession(deps.db, token);
    if (!session) return failed();
    if (!['GET', 'HEAD'].includes(req.method)) {
      const given = Buffer.from(sha256Hex(header(req, 'x-csrf-token') ?? ''));
      if (!timingSafeEqual(given, Buffer.from(sha256Hex(session.csrfToken)))) {
        return steps.failAuthentication(req, exchange, new ApiError('authentication_failed', 'A console write needs the X-CSRF-Token header of its session.'));
      }
    }
    return {
      principal: { agentId: session.ownerId, walletId: '', ownerId: session.ownerId, agentName: '', method: 'owner_session', ownerTokenId: null, scopes: new Set(), clientId: null, grantId: null },
      overrides: [],
    };
  }
  const ownerApi = createEntry(authenticateOwner);

  return { agentApi, ownerApi };
}

/**
 * Whether Express's res.json would only serialise the body and set Content-Type and Content-Length: a body to send,
 * not HEAD, no 204/304, no Content-Type of the handler's, and nothing for its freshness check to turn into a 304 (no
 * If-None-Match or If-Modified-Since in the request: Express answers `If-None-Match: *` with 304 even without an ETag).
 */
function plainJson(res: Response, status: number, body: unknown): boolean {
  const h = res.req.headers;
  return (
    body !== undefined && status !== 204 && status !== 304 && res.req.method !== 'HEAD' && h['if-none-match'] === undefined && h['if-modified-since'] === undefined && !res.hasHeader('Content-Type')
  );
}

/** Owner and admin credentials stay on their side; an owner token never reaches a /v1/admin route. */
function requireOwnerSide(principal: Principal, op: OperationMeta): void {
  if (op.scope === 'admin' && principal.method !== 'admin_token') throw new ApiError('insufficient_scope', 'This route needs the admin token.', { required_scope: 'admin' });
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
