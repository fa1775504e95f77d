// The router: one route match per request (the precompiled matcher of operations.ts), then `dispatch` runs the
// operation it matched, or the one an MCP tool or simulate already holds: U+0000 guard, cursor binding, request
// validation through openapi-backend's public `validateRequest` (src/http/request-validator.ts), the idempotency step
// around the handler, and a 501 for an operation without one.
import { createHash } from 'node:crypto';
import { ApiError } from '../lib/errors.js';
import { assertNoNulCharacters } from './input-guard.js';
import { describeIssues, summarize, type AjvIssue } from './validation-messages.js';
import type { AnyHandler, DispatchInput, HandlerMap, HandlerResult, OperationRequest, RequestContext, Router } from './types.js';
import { createMatcher, readOperations, type OpenApiDocument, type OperationMeta } from './operations.js';
import { createRequestValidator, type RequestValidator } from './request-validator.js';

export type { Router } from './types.js';

export type Around = (op: OperationMeta, params: Record<string, unknown>, body: unknown, ctx: RequestContext, next: (ctx: RequestContext) => Promise<HandlerResult>) => Promise<HandlerResult>;

/**
 * Binds the opaque cursors of the lists taking `#/components/parameters/Cursor` to their list and
 * agent (contract §7: a foreign cursor is validation_failed). The service's own cursor travels
 * inside; delivery cursors stay plain delivery UUIDs (spec 2.5) and are checked by the service.
 */
export function createCursorBinding(document: OpenApiDocument) {
  const bound = new Set<string>();
  for (const item of Object.values(document.paths ?? {})) {
    for (const op of Object.values(item as OpenApiDocument)) {
      const params = (op as OpenApiDocument)?.parameters;
      if (Array.isArray(params) && params.some((p: OpenApiDocument) => p?.$ref === '#/components/parameters/Cursor')) bound.add((op as OpenApiDocument).operationId);
    }
  }
  const tagOf = (operationId: string, agentId: string) => createHash('sha256').update(`${operationId}:${agentId}`).digest('base64url').slice(0, 16);
  const foreign = () =>
    new ApiError('validation_failed', 'cursor is malformed or belongs to another list', { field: 'cursor', errors: [{ location: 'query', path: 'cursor', message: 'is not a cursor of this list' }] });
  return {
    applies: (operationId: string) => bound.has(operationId),
    wrap(operationId: string, agentId: string, inner: string): string {
      return Buffer.from(JSON.stringify({ l: tagOf(operationId, agentId), c: inner })).toString('base64url');
    },
    unwrap(operationId: string, agentId: string, cursor: string): string {
      let parsed: { l?: unknown; c?: unknown };
      try {
        parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { l?: unknown; c?: unknown };
      } catch {
        throw foreign();
      }
      if (!parsed || typeof parsed.c !== 'string' || parsed.l !== tagOf(operationId, agentId)) throw foreign();
      return parsed.c;
    },
  };
}

/**
 * The operations with nothing to validate in a request without a query string: no body, and no parameter other than
 * optional query parameters (`$ref`s to components.parameters resolved). openapi-backend applies no defaults, so such
 * a request reaches the handler with an empty query either way.
 */
export function bareOperations(document: OpenApiDocument): Set<string> {
  const resolve = (p: OpenApiDocument): OpenApiDocument =>
    typeof p?.$ref === 'string' && p.$ref.startsWith('#/components/parameters/') ? (document.components?.parameters?.[p.$ref.slice('#/components/parameters/'.length)] ?? p) : p;
  const bare = new Set<string>();
  for (const item of Object.values(document.paths ?? {}) as OpenApiDocument[]) {
    for (const op of Object.values(item) as OpenApiDocument[]) {
      if (!op || typeof op !== 'object' || typeof op.operationId !== 'string') continue;
      const params = [...(Array.isArray(item.parameters) ? item.parameters : []), ...(Array.isArray(op.parameters) ? op.parameters : [])].map(resolve);
      if (!op.requestBody && params.every((p) => p?.in === 'query' && p.required !== true)) bare.add(op.operationId);
    }
  }
  return bare;
}

const isEmpty = (query: unknown): boolean => {
  if (query === undefined || query === null) return true;
  for (const _key in query as object) return false;
  return true;
};

/**
 * `bareDirect` (default true): requests with nothing to validate skip request validation (see `dispatch`); false
 * validates every request, as test/http/router-bare.test.ts does to compare the two ways. `validator`: the document's
 * compiled validators, shared by the apps a process builds over one document (the test suite); made here otherwise.
 */
export async function createRouter(deps: {
  document: OpenApiDocument;
  handlers: Partial<HandlerMap> | Record<string, AnyHandler>;
  around?: Around;
  bareDirect?: boolean;
  validator?: RequestValidator;
}): Promise<Router> {
  const ops = readOperations(deps.document);
  const byId = new Map(ops.map((op) => [op.operationId, op]));
  const match = createMatcher(ops);
  const cursors = createCursorBinding(deps.document);
  const validator = deps.validator ?? (await createRequestValidator(deps.document));
  const bare = deps.bareDirect === false ? new Set<string>() : bareOperations(deps.document);

  const handlers = new Map<string, AnyHandler>();
  for (const [operationId, handler] of Object.entries(deps.handlers as Record<string, AnyHandler | undefined>)) {
    // What openapi-backend's strict mode refused at registration: a handler for an operation the document lacks.
    if (!byId.has(operationId)) throw new Error(`a handler is registered for ${operationId}, which the document does not describe`);
    if (handler) handlers.set(operationId, handler);
  }
  const implemented = new Set(handlers.keys());

  /** The operation's handler with the idempotency step around it (a dry run skips it); the one place a route without a handler answers 501. */
  const run = (op: OperationMeta, req: OperationRequest<never>, ctx: RequestContext): Promise<HandlerResult> => {
    const handler =
      handlers.get(op.operationId) ??
      (async () => {
        throw new ApiError('not_implemented', `${op.method.toUpperCase()} ${op.path} is not implemented yet.`);
      });
    return deps.around && !ctx.dryRun ? deps.around(op, req.params as Record<string, unknown>, req.body, ctx, (inner) => handler(req, inner)) : handler(req, ctx);
  };

  /** The request as the handler sees it: validated, its query and path parameters coerced. */
  function validated(op: OperationMeta, input: DispatchInput, ctx: RequestContext): OperationRequest<never> {
    // Authentication ran before (each entry's first step); only a public operation is dispatched without a principal.
    if (!op.isPublic && !ctx.principal) throw new ApiError('authentication_failed', 'Authentication required.');
    // Nothing to validate: a GET with a principal of an operation whose parameters are all optional query parameters
    // (or none) and which takes no body, sent without a query string. No defaults apply, so its handler gets what
    // validation would hand it (test/http/router-bare.test.ts holds the two ways alike).
    if (ctx.principal && op.method === 'get' && bare.has(op.operationId) && isEmpty(input.query)) {
      return { operationId: op.operationId, params: {}, query: {}, body: input.body, headers: input.headers } as OperationRequest<never>;
    }
    const result = validator.validateRequest(op.operationId, { method: op.method, path: input.path, query: input.query as never, headers: input.headers as never, body: input.body });
    if (result.errors) {
      // In words, naming each field (src/http/validation-messages.ts); details.field names the first.
      const problems = describeIssues(result.errors as AjvIssue[]);
      const first = problems[0];
      throw new ApiError('validation_failed', summarize(problems), {
        ...(first ? { field: first.field, ...(first.fields ? { fields: first.fields } : {}) } : {}),
        errors: problems.map(({ location, path, message }) => ({ location, path, message })),
      });
    }
    const coerced: { params?: Record<string, string>; query?: unknown } = result.coerced ?? {};
    return { operationId: op.operationId, params: coerced.params ?? {}, query: coerced.query ?? {}, body: input.body, headers: input.headers } as OperationRequest<never>;
  }

  async function dispatch(op: OperationMeta, input: DispatchInput, ctx: RequestContext): Promise<HandlerResult> {
    // Every entry (HTTP, MCP, simulate) comes through here: U+0000 is refused once, before Ajv.
    assertNoNulCharacters({ body: input.body, query: input.query, pathParams: input.params });
    const listId = ctx?.principal && op.method === 'get' && cursors.applies(op.operationId) ? op.operationId : undefined;
    if (!listId) return run(op, validated(op, input, ctx), ctx);
    const agentId = ctx.principal.agentId;
    if (typeof input.query.cursor === 'string') input = { ...input, query: { ...input.query, cursor: cursors.unwrap(listId, agentId, input.query.cursor) } };
    const result = await run(op, validated(op, input, ctx), ctx);
    const body = result.body as { next_cursor?: unknown } | undefined;
    if (result.status === 200 && body && typeof body.next_cursor === 'string') return { ...result, body: { ...body, next_cursor: cursors.wrap(listId, agentId, body.next_cursor) } };
    return result;
  }

  return {
    ops,
    byId,
    match,
    implemented,
    dispatch,
    async handle(req, ctx) {
      const path = (req.path ?? '/').split('?')[0]!;
      const routed = match(req.method, path);
      const query = (req.query ?? {}) as Record<string, unknown>;
      if (routed.kind === 'operation') return dispatch(routed.op, { path, params: routed.params, query, headers: req.headers ?? {}, body: req.body }, ctx);
      assertNoNulCharacters({ body: req.body, query });
      if (routed.kind === 'method_not_allowed') throw new ApiError('method_not_allowed', 'This method is not allowed on this route.');
      throw new ApiError('not_found', 'No route matches this request.');
    },
    async warm(signal) {
      for (const op of ops) {
        await new Promise((resolve) => setImmediate(resolve));
        if (signal?.aborted) return;
        validator.compileRequestValidators(op.operationId);
      }
    },
    validateResponse: (operationId, status, body, headers) => validator.validateResponse(operationId, status, body, headers),
  };
}
