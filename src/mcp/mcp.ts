// The MCP endpoint at /mcp: stateless Streamable HTTP, OAuth bearer tokens bound to /mcp, tools dispatched through the API router.
import { randomUUID } from 'node:crypto';
import type { Express, Request, Response } from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../auth/principal.js';
import { loadDocument, type OpenApiDocument } from '../http/operations.js';
import { BODY_LIMIT_BYTES, createSteps, readJsonBody, type Exchange, type RateOverrides, type StepDeps } from '../http/steps.js';
import type { HandlerResult } from '../http/types.js';
import { isApiError } from '../lib/errors.js';
import type { OperationMeta } from '../lib/contract.js';
import { buildTools, toDispatchRequest, type McpTool } from './tools.js';

export const MCP_PATH = '/mcp';
const SERVER_INFO = { name: 'agent-api', title: 'Agent API', version: '1.0.0' };
const INSTRUCTIONS =
  'Tools act for the one agent and wallet your token was issued for; each mirrors a /v1/agent route and needs that route\'s OAuth scope. ' +
  'Money is a decimal string in asset units. Mutating tools require an idempotency_key: reuse it to retry safely.';

/** The pipeline steps' dependencies, plus the document the tools are generated from. */
export interface McpDeps extends StepDeps {
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
function sendApiAnswer(res: Response, answer: HandlerResult): void {
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name, value);
  res.status(answer.status).json(answer.body);
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
  const steps = createSteps(deps);
  const tools = buildTools(deps.document ?? loadDocument(), deps.router.ops);
  const toolsByName = new Map(tools.map((t) => [t.name, t]));
  const toolList = tools.map((t) => t.definition);
  const allowedOrigin = new URL(config.baseUrl).origin;

  /** The tools a batch of JSON-RPC messages calls (only `tools/call` needs a scope). */
  function calledOperations(body: unknown): OperationMeta[] {
    const messages = (Array.isArray(body) ? body : [body]) as JsonRpcMessage[];
    const ops: OperationMeta[] = [];
    for (const message of messages) {
      if (message?.method !== 'tools/call' || typeof message.params?.name !== 'string') continue;
      const tool = toolsByName.get(message.params.name);
      if (tool) ops.push(tool.op);
    }
    return ops;
  }

  /** One tool call through the same steps as HTTP: rate limit, router (validation, idempotency, handler), respond. */
  async function callTool(principal: Principal, overrides: RateOverrides, requestId: string, name: string, args: Record<string, unknown> | undefined): Promise<CallToolResult> {
    const tool = toolsByName.get(name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    const startedAt = process.hrtime.bigint();
    const exchange: Exchange = { requestId, op: tool.op };
    let result: HandlerResult;
    try {
      await steps.chargeRateLimit(exchange, principal.agentId, tool.op.rateClass, overrides);
      const request = toDispatchRequest(tool, args);
      const ctx = steps.contextFor(exchange, principal, { idempotencyKey: request.idempotencyKey });
      result = await deps.router.handle({ method: request.method, path: request.path, query: request.query, headers: request.headers, body: request.body }, ctx);
    } catch (err) {
      result = steps.errorResult(exchange, err, { tool: name });
    }
    // A refusal a handler returns (status >= 400, the error envelope) and one it throws answer alike.
    const { status, body, headers } = steps.respond(exchange, result);
    const latencyMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
    log.info({ requestId, agentId: principal.agentId, tool: name, route: tool.op.operationId, status, latencyMs: Math.round(latencyMs * 100) / 100 }, 'mcp tool call');
    return {
      content: [{ type: 'text', text: JSON.stringify(body) }],
      ...(status >= 400 ? { isError: true } : {}),
      _meta: { 'agent-api/status': status, 'agent-api/headers': headers },
    };
  }

  function createServer(principal: Principal, overrides: RateOverrides, requestId: string): Server {
    // The low-level server: tool input schemas are the contract's JSON Schemas, and the router (not
    // zod) validates arguments, so a tool refuses exactly what the HTTP route refuses.
    const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
    // Every tool is listed whatever the token's scopes: a client learns what a step-up would unlock,
    // and a call the token cannot make is refused with the 403 challenge before it runs.
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: toolList }));
    server.setRequestHandler(CallToolRequestSchema, async (request) =>
      callTool(principal, overrides, requestId, request.params.name, request.params.arguments as Record<string, unknown> | undefined),
    );
    return server;
  }

  const handle = async (req: Request, res: Response): Promise<void> => {
    const exchange: Exchange = { requestId: requestIdOf(res) };
    try {
      // Streamable HTTP: servers must refuse foreign origins (DNS rebinding); clients outside a browser send none.
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== allowedOrigin) {
        sendJsonRpcError(res, 403, -32000, 'Forbidden: this Origin may not use the MCP endpoint.');
        return;
      }

      const authenticated = await steps.authenticate(req, exchange, 'mcp').catch((err: unknown) => {
        if (!isApiError(err)) throw err;
        sendApiAnswer(res, steps.respond(exchange, steps.errorResult(exchange, err)));
        return null;
      });
      if (!authenticated) return;
      const { principal, overrides } = authenticated;

      if (req.method !== 'POST') {
        // Stateless server: no standalone SSE stream (GET) and no session to end (DELETE).
        sendJsonRpcError(res, 405, -32000, 'Method not allowed: this stateless MCP server accepts POST only.', { Allow: 'POST' });
        return;
      }

      const problem = await readJsonBody(req, res);
      if (problem) {
        if (problem.kind === 'too_large') sendJsonRpcError(res, 413, -32600, `Request bodies are limited to ${BODY_LIMIT_BYTES} bytes.`);
        else sendJsonRpcError(res, 400, -32700, 'Parse error: the request body is not valid JSON.');
        return;
      }

      try {
        steps.requireScope(principal, calledOperations(req.body), 'mcp', 'tool');
      } catch (err) {
        sendApiAnswer(res, steps.respond(exchange, steps.errorResult(exchange, err)));
        return;
      }

      const server = createServer(principal, overrides, exchange.requestId);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      log.error({ err, requestId: exchange.requestId }, 'MCP request failed');
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, `Internal error (request ${exchange.requestId}).`);
    }
  };

  app.all(MCP_PATH, handle);
  return { tools };
}
