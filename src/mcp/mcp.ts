// The MCP endpoint at /mcp: stateless Streamable HTTP, OAuth bearer tokens bound to /mcp, tools dispatched through the API router.
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../auth/principal.js';
import { findAuthRow } from '../db/repositories/agent.repository.js';
import { loadDocument, type OpenApiDocument } from '../http/operations.js';
import { BODY_LIMIT_BYTES, clientAddress, rateLimitedError, rateLimitHeaders, wwwAuthenticate, type PipelineDeps } from '../http/pipeline.js';
import { toApiError } from '../http/error-mapping.js';
import type { HandlerResult, RequestContext } from '../http/types.js';
import { ApiError, errorBody, isApiError } from '../lib/errors.js';
import { AUTH_FAILURE_RULE } from '../ratelimit/classes.js';
import type { RateDecision } from '../ratelimit/limiter.js';
import { buildTools, toDispatchRequest, type McpTool } from './tools.js';

export const MCP_PATH = '/mcp';
const SERVER_INFO = { name: 'agent-api', title: 'Agent API', version: '1.0.0' };
const INSTRUCTIONS =
  'Tools act for the one agent and wallet your token was issued for; each mirrors a /v1/agent route and needs that route\'s OAuth scope. ' +
  'Money is a decimal string in asset units. Mutating tools require an idempotency_key: reuse it to retry safely.';

/** The /v1/agent pipeline's dependencies, plus the document the tools are generated from. */
export interface McpDeps extends PipelineDeps {
  /** The bundled document (defaults to generated/openapi.json); tools and their input schemas come from it. */
  document?: OpenApiDocument;
}

const requestIdOf = (res: Response): string => (res.locals as { requestId?: string }).requestId ?? randomUUID();

/** Transport-level refusals speak JSON-RPC, as the SDK's own transport does. */
function sendJsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/** Authentication and scope refusals carry the API envelope and the RFC 6750 challenge (contract §2). */
function sendApiError(res: Response, err: ApiError, extraHeaders: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries({ ...extraHeaders, ...err.headers })) res.setHeader(name, value);
  res.status(err.status).json(errorBody(err.code, err.message, err.details));
}

interface JsonRpcMessage {
  method?: unknown;
  params?: { name?: unknown };
}

/**
 * Mounts POST/GET/DELETE /mcp. Order: Origin check (403) -> bearer authentication (401; failures
 * limited per client address) -> JSON body, 64 KB (413/400) -> per-tool scope gate on `tools/call`
 * (403 insufficient_scope) -> a fresh MCP server and stateless transport for this request.
 * Mount before the app's catch-all 404.
 */
export function mountMcp(app: Express, deps: McpDeps): { tools: McpTool[] } {
  const { config, log } = deps;
  const tools = buildTools(deps.document ?? loadDocument(), deps.router.ops);
  const toolsByName = new Map(tools.map((t) => [t.name, t]));
  const toolList = tools.map((t) => t.definition);
  const allowedOrigin = new URL(config.baseUrl).origin;

  async function authenticate(req: Request): Promise<{ principal: Principal } | { error: ApiError; rate?: RateDecision }> {
    const invalid = (message: string) =>
      new ApiError('invalid_token', message, undefined, { headers: { 'WWW-Authenticate': wwwAuthenticate(config.baseUrl, 'mcp', 'invalid_token') } });
    let error: ApiError;
    const m = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(req.headers.authorization ?? '');
    if (!m || !deps.bearer) {
      // Header keys are not accepted here: /mcp is an OAuth protected resource only.
      error = invalid('A bearer token issued for this MCP resource is required.');
    } else {
      try {
        return { principal: await deps.bearer.verify(m[1]!, 'mcp') };
      } catch (err) {
        if (!isApiError(err) || err.status !== 401) throw err;
        error = err.code === 'invalid_token' && !err.headers['WWW-Authenticate'] ? invalid(err.message) : err;
        if (err.code !== 'invalid_token') {
          // Layer-two refusals (agent disabled, outside its window) still point the client at the metadata.
          error = new ApiError(err.code, err.message, err.details, { headers: { ...err.headers, 'WWW-Authenticate': wwwAuthenticate(config.baseUrl, 'mcp', 'invalid_token') } });
        }
      }
    }
    const decision = await deps.rateLimits.chargeAddress('authfail', clientAddress(req), AUTH_FAILURE_RULE);
    return decision.allowed ? { error, rate: decision } : { error: rateLimitedError(decision), rate: decision };
  }

  /** The scopes a batch of JSON-RPC messages needs and the token lacks (only `tools/call` needs any). */
  function missingScopes(principal: Principal, body: unknown): string[] {
    const messages = (Array.isArray(body) ? body : [body]) as JsonRpcMessage[];
    const missing = new Set<string>();
    for (const message of messages) {
      if (message?.method !== 'tools/call' || typeof message.params?.name !== 'string') continue;
      const tool = toolsByName.get(message.params.name);
      if (!tool?.op.scope) continue;
      const { scope, altScopes } = tool.op;
      if (!principal.scopes.has(scope) && !altScopes.some((s) => principal.scopes.has(s))) missing.add(scope);
    }
    return [...missing];
  }

  /** Runs one tool call through the same machinery as HTTP: rate limit, router (validation, idempotency, handler), response check. */
  async function callTool(principal: Principal, requestId: string, name: string, args: Record<string, unknown> | undefined): Promise<CallToolResult> {
    const tool = toolsByName.get(name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    const startedAt = process.hrtime.bigint();
    let rate: RateDecision | undefined;
    let result: HandlerResult;
    try {
      const overrides = principal.snapshot?.rateOverrides ?? (await findAuthRow(deps.db, principal.agentId))?.rate_overrides ?? [];
      const rule = deps.rateLimits.rulesFor(overrides)[tool.op.rateClass];
      rate = await deps.rateLimits.charge(principal.agentId, tool.op.rateClass, rule);
      if (!rate.allowed) throw rateLimitedError(rate);
      const request = toDispatchRequest(tool, args);
      const ctx: RequestContext = {
        requestId,
        principal,
        db: deps.db,
        idempotencyKey: request.idempotencyKey,
        services: deps.services,
        clock: deps.clock,
        config,
        log,
        router: deps.router,
      };
      result = await deps.router.handle({ method: request.method, path: request.path, query: request.query, headers: request.headers, body: request.body }, ctx);
    } catch (err) {
      const apiError = toApiError(err);
      if (apiError) {
        result = { status: apiError.status, body: errorBody(apiError.code, apiError.message, apiError.details), headers: apiError.headers };
      } else {
        log.error({ err, requestId, tool: name }, 'unhandled error in MCP tool call');
        result = { status: 500, body: errorBody('internal_error', `An internal error occurred (request ${requestId}).`) };
      }
    }

    const headers: Record<string, string> = { ...(rate ? rateLimitHeaders(rate) : {}), ...(result.headers ?? {}), 'X-Request-Id': requestId };
    let { status, body } = result;
    if (config.validateResponses) {
      const problems = deps.router.validateResponse(tool.op.operationId, status, body, headers);
      if (problems.length > 0) {
        log.error({ operationId: tool.op.operationId, status, problems, requestId }, 'response does not match the document');
        status = 500;
        body = errorBody('internal_error', `Response failed validation against the document (request ${requestId}).`, { response_validation: problems });
      }
    }
    const latencyMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
    log.info({ requestId, agentId: principal.agentId, tool: name, route: tool.op.operationId, status, latencyMs: Math.round(latencyMs * 100) / 100 }, 'mcp tool call');
    return {
      content: [{ type: 'text', text: JSON.stringify(body) }],
      ...(status >= 400 ? { isError: true } : {}),
      _meta: { 'agent-api/status': status, 'agent-api/headers': headers },
    };
  }

  function createServer(principal: Principal, requestId: string): Server {
    // The low-level server: tool input schemas are the contract's JSON Schemas, and the router (not
    // zod) validates arguments, so a tool refuses exactly what the HTTP route refuses.
    const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
    // Every tool is listed whatever the token's scopes: a client learns what a step-up would unlock,
    // and a call the token cannot make is refused with the 403 challenge before it runs.
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: toolList }));
    server.setRequestHandler(CallToolRequestSchema, async (request) =>
      callTool(principal, requestId, request.params.name, request.params.arguments as Record<string, unknown> | undefined),
    );
    return server;
  }

  const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, type: ['application/json', 'application/*+json'], strict: false });
  const parseBody = (req: Request, res: Response) =>
    new Promise<unknown>((resolve) => {
      jsonParser(req, res, (err?: unknown) => resolve(err ?? null));
    });

  const handle = async (req: Request, res: Response): Promise<void> => {
    const requestId = requestIdOf(res);
    try {
      // Streamable HTTP: servers must refuse foreign origins (DNS rebinding); clients outside a browser send none.
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== allowedOrigin) {
        sendJsonRpcError(res, 403, -32000, 'Forbidden: this Origin may not use the MCP endpoint.');
        return;
      }

      const auth = await authenticate(req);
      if ('error' in auth) {
        sendApiError(res, auth.error, auth.rate ? rateLimitHeaders(auth.rate) : {});
        return;
      }
      const { principal } = auth;

      if (req.method !== 'POST') {
        // Stateless server: no standalone SSE stream (GET) and no session to end (DELETE).
        sendJsonRpcError(res, 405, -32000, 'Method not allowed: this stateless MCP server accepts POST only.', { Allow: 'POST' });
        return;
      }

      const parseError = (await parseBody(req, res)) as { type?: string; status?: number } | null;
      if (parseError) {
        if (parseError.type === 'entity.too.large' || parseError.status === 413) sendJsonRpcError(res, 413, -32600, `Request bodies are limited to ${BODY_LIMIT_BYTES} bytes.`);
        else sendJsonRpcError(res, 400, -32700, 'Parse error: the request body is not valid JSON.');
        return;
      }

      const missing = missingScopes(principal, req.body);
      if (missing.length > 0) {
        const scope = missing.join(' ');
        sendApiError(
          res,
          new ApiError('insufficient_scope', `This tool requires the scope ${scope}.`, { required_scope: scope }, {
            headers: { 'WWW-Authenticate': wwwAuthenticate(config.baseUrl, 'mcp', 'insufficient_scope', scope) },
          }),
        );
        return;
      }

      const server = createServer(principal, requestId);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      log.error({ err, requestId }, 'MCP request failed');
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, `Internal error (request ${requestId}).`);
    }
  };

  app.all(MCP_PATH, handle);
  return { tools };
}
