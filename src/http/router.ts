// openapi-backend in strict mode over the 3.1 document: Ajv 2020 + formats, memoised routing,
// every operation registered (a missing handler answers 501 from here), response validation.
import { OpenAPIBackend, type Context, type Request as OabRequest } from 'openapi-backend';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { createHash } from 'node:crypto';
import { ApiError } from '../lib/errors.js';
import { assertNoNulCharacters } from './input-guard.js';
import { describeIssues, summarize, type AjvIssue } from './validation-messages.js';
import type { AnyHandler, HandlerMap, HandlerResult, OperationRequest, RequestContext, Router } from './types.js';
import { createMatcher, prepareForBackend, readOperations, type OpenApiDocument, type OperationMeta } from './operations.js';

// CommonJS interop: both modules export their value as `default` under NodeNext.
type AjvCtor = new (opts: object) => { addFormat: unknown };
const Ajv2020 = ((Ajv2020Module as unknown as { default?: AjvCtor }).default ?? Ajv2020Module) as unknown as AjvCtor;
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: unknown) => unknown;

/** openapi-backend checks documents against the 3.0 schema; Redocly lints our 3.1 document instead. */
class OpenAPI31Backend extends OpenAPIBackend {
  override validateDefinition(): never {
    return undefined as never;
  }
}

export type { Router } from './types.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AjvError = { instancePath?: string; schemaPath?: string; message?: string; params?: Record<string, any>; keyword?: string };

export type Around = (
  op: OperationMeta,
  params: Record<string, unknown>,
  body: unknown,
  ctx: RequestContext,
  next: (ctx: RequestContext) => Promise<HandlerResult>,
) => Promise<HandlerResult>;

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
 * One Ajv instance per distinct option set (openapi-backend asks for a fresh one for every validator it
 * compiles: params with `coerceTypes`, bodies, responses). A fresh Ajv 2020 compiles the draft 2020-12
 * meta-schema again to check the schema it is given, so each operation's warm-up paid for that code and
 * its garbage once per validator; sharing the instance compiles it once. Our schemas carry no `$id`, so
 * compiling them side by side in one instance cannot collide.
 */
const ajvByOptions = new Map<string, { addFormat: unknown }>();
function sharedAjv(ajvOpts: object): { addFormat: unknown } {
  // `verbose`: each error carries the schema that failed, whose words (`x-expected`, enum values) make its message.
  const options = { ...ajvOpts, strict: false, allErrors: true, validateFormats: true, verbose: true };
  const key = JSON.stringify(options);
  let ajv = ajvByOptions.get(key);
  if (!ajv) {
    ajv = new Ajv2020(options);
    addFormats(ajv);
    ajvByOptions.set(key, ajv);
  }
  return ajv;
}

/** The four lazily filled maps in which openapi-backend keeps an operation's compiled Ajv validators. */
const VALIDATOR_MAPS = ['requestValidators', 'responseValidators', 'statusBasedResponseValidators', 'responseHeadersValidators'] as const;
type ValidatorMaps = Record<(typeof VALIDATOR_MAPS)[number], Record<string, unknown>>;
const compiledByDocument = new Map<string, ValidatorMaps>();

/**
 * Routers over the same document in one process share their compiled validators (a validator is a
 * pure function of the schema and of the Ajv options, which are this module's own). Compiling one
 * operation's validators costs ~90 ms, so a process that builds several apps (the test suite) pays
 * it once per operation instead of once per app.
 */
function shareCompiledValidators(api: OpenAPIBackend, document: OpenApiDocument): void {
  const key = createHash('sha256').update(JSON.stringify(document)).digest('hex');
  const validator = (api as unknown as { validator: ValidatorMaps }).validator;
  let shared = compiledByDocument.get(key);
  if (!shared) {
    shared = Object.fromEntries(VALIDATOR_MAPS.map((name) => [name, validator[name]])) as ValidatorMaps;
    compiledByDocument.set(key, shared);
  }
  for (const name of VALIDATOR_MAPS) validator[name] = shared[name];
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
 * `bareDirect` (default true): requests with nothing to validate skip openapi-backend (see `handle`); false sends
 * every request through it, as test/http/router-bare.test.ts does to compare the two ways.
 */
export async function createRouter(deps: { document: OpenApiDocument; handlers: Partial<HandlerMap> | Record<string, AnyHandler>; around?: Around; bareDirect?: boolean }): Promise<Router> {
  const ops = readOperations(deps.document);
  const byId = new Map(ops.map((op) => [op.operationId, op]));
  const match = createMatcher(ops);
  const implemented = new Set<string>();
  const cursors = createCursorBinding(deps.document);

  const api = new OpenAPI31Backend({
    definition: prepareForBackend(deps.document) as never,
    strict: true,
    validate: true,
    // Compile each operation's validators on first use (~23 ms to start instead of ~10 s for 130
    // validators); `warm()` compiles them in the background once the server listens.
    quick: true,
    coerceTypes: true,
    ajvOpts: { strict: false, allErrors: true },
    customizeAjv: (_original, ajvOpts) => sharedAjv(ajvOpts as object) as never,
  });
  await api.init();
  shareCompiledValidators(api, deps.document);

  // Memoise the flattened operation list and route through our precompiled matcher.
  const router = api.router as unknown as {
    getOperations(): unknown[];
    matchOperation(req: OabRequest, strict?: boolean): unknown;
    normalizeRequest(req: OabRequest): OabRequest;
    parseRequest(req: OabRequest, operation?: unknown): unknown;
  };
  const flattened = router.getOperations.call(router);
  const flatById = new Map((flattened as { operationId: string }[]).map((o) => [o.operationId, o]));
  router.getOperations = () => flattened;
  // openapi-backend parses each request twice: before routing (for a pre-routing handler, which we do not register)
  // and again once the operation is known. Only the second is read (our 404/405 handlers ignore the request), so the
  // first is a stub: no header copy, cookie parse or query clone per request before routing.
  const parseRequest = router.parseRequest.bind(router);
  router.parseRequest = (req: OabRequest, operation?: unknown) => (operation ? parseRequest(req, operation) : { method: req.method, path: req.path, headers: {}, query: {}, params: {}, cookies: {} });
  router.matchOperation = (req: OabRequest, strict?: boolean) => {
    const result = match(req.method, (req.path ?? '/').split('?')[0]!);
    if (result.kind === 'operation') return flatById.get(result.op.operationId);
    if (!strict) return undefined;
    throw new Error(result.kind === 'method_not_allowed' ? '405-methodNotAllowed' : '404-notFound');
  };

  /** The validated, coerced request as the handler of `op` sees it. */
  const requestOf = (c: Context): OperationRequest<never> =>
    ({ operationId: c.operation.operationId, params: c.request.params ?? {}, query: c.request.query ?? {}, body: c.request.requestBody, headers: c.request.headers ?? {} }) as never;
  const wrap = (op: OperationMeta, handler: AnyHandler) => (c: Context, ctx: RequestContext) =>
    deps.around && !ctx.dryRun
      ? deps.around(op, (c.request.params ?? {}) as Record<string, unknown>, c.request.requestBody, ctx, (inner) => handler(requestOf(c), inner))
      : handler(requestOf(c), ctx);
  const handlers: Record<string, (c: Context, ctx: RequestContext) => Promise<HandlerResult>> = {};
  const bare = deps.bareDirect === false ? new Set<string>() : bareOperations(deps.document);
  for (const op of ops) {
    const handler = (deps.handlers as Record<string, AnyHandler | undefined>)[op.operationId];
    if (handler) implemented.add(op.operationId);
    // The one place a route without a handler answers 501; it still passes through idempotency checks.
    handlers[op.operationId] = wrap(
      op,
      handler ??
        (async () => {
          throw new ApiError('not_implemented', `${op.method.toUpperCase()} ${op.path} is not implemented yet.`);
        }),
    );
  }
  api.register({
    ...handlers,
    validationFail: async (c: Context) => {
      // In words, naming each field (src/http/validation-messages.ts); details.field names the first.
      const problems = describeIssues((c.validation.errors ?? []) as AjvIssue[]);
      const first = problems[0];
      throw new ApiError('validation_failed', summarize(problems), {
        ...(first ? { field: first.field, ...(first.fields ? { fields: first.fields } : {}) } : {}),
        errors: problems.map(({ location, path, message }) => ({ location, path, message })),
      });
    },
    notFound: async () => {
      throw new ApiError('not_found', 'No route matches this request.');
    },
    methodNotAllowed: async () => {
      throw new ApiError('method_not_allowed', 'This method is not allowed on this route.');
    },
    unauthorizedHandler: async () => {
      throw new ApiError('authentication_failed', 'Authentication required.');
    },
  });
  // Authentication ran before routing (Express middleware); these only confirm it happened.
  for (const scheme of Object.keys(deps.document.components?.securitySchemes ?? {})) {
    api.registerSecurityHandler(scheme, (_c: Context, ctx: RequestContext) => Boolean(ctx?.principal));
  }

  const validator = (api as unknown as { validator: Record<string, (id: string) => unknown> }).validator;
  return {
    ops,
    byId,
    match,
    implemented,
    async warm(signal) {
      for (const op of ops) {
        await new Promise((resolve) => setImmediate(resolve));
        if (signal?.aborted) return;
        validator.getRequestValidatorsForOperation!.call(validator, op.operationId);
      }
    },
    async handle(req, ctx) {
      // Every entry (HTTP, MCP, simulate) comes through here: U+0000 is refused once, before Ajv.
      const routed = match(req.method, (req.path ?? '/').split('?')[0]!);
      assertNoNulCharacters({ body: req.body, query: req.query as Record<string, unknown>, pathParams: routed.kind === 'operation' ? routed.params : {} });
      const m = ctx?.principal && req.method.toLowerCase() === 'get' ? routed : undefined;
      const listId = m?.kind === 'operation' && cursors.applies(m.op.operationId) ? m.op.operationId : undefined;
      // Nothing for openapi-backend to parse or validate: an authenticated GET of an operation whose parameters are all
      // optional query parameters (or none) and which takes no body, sent without a query string. Its handler gets
      // what openapi-backend would hand it (test/http/router-bare.test.ts holds the two ways alike).
      const run = (r: OabRequest): Promise<HandlerResult> => {
        if (m?.kind === 'operation' && bare.has(m.op.operationId) && isEmpty(r.query)) {
          const c = { operation: { operationId: m.op.operationId }, request: { params: {}, query: {}, headers: r.headers ?? {}, requestBody: r.body } } as unknown as Context;
          return handlers[m.op.operationId]!(c, ctx);
        }
        return api.handleRequest(r, ctx) as Promise<HandlerResult>;
      };
      if (!listId) return run(req);
      const query = (req.query ?? {}) as Record<string, unknown>;
      const agentId = ctx.principal.agentId;
      if (typeof query.cursor === 'string') req = { ...req, query: { ...query, cursor: cursors.unwrap(listId, agentId, query.cursor) } as never };
      const result = await run(req);
      const body = result.body as { next_cursor?: unknown } | undefined;
      if (result.status === 200 && body && typeof body.next_cursor === 'string') return { ...result, body: { ...body, next_cursor: cursors.wrap(listId, agentId, body.next_cursor) } };
      return result;
    },
    validateResponse(operationId, status, body, headers) {
      const problems: string[] = [];
      const res = api.validateResponse(body, operationId, status);
      for (const e of (res.errors ?? []) as AjvError[]) problems.push(`body${e.instancePath ?? ''} ${e.message ?? ''} ${e.params ? JSON.stringify(e.params) : ''}`.trim());
      const hdr = api.validateResponseHeaders(headers, operationId, { statusCode: status });
      for (const e of (hdr.errors ?? []) as AjvError[]) problems.push(`headers${e.instancePath ?? ''} ${e.message ?? ''}`.trim());
      return problems;
    },
  };
}
