// The MCP endpoint at /mcp: Streamable HTTP with sessions (SSE stream, resumable) or stateless POSTs, OAuth tokens bound to /mcp, tools dispatched through the API router.
import { randomUUID } from 'node:crypto';
import type { Express, Request, Response } from 'express';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../auth/principal.js';
import { loadDocument, type OpenApiDocument } from '../http/operations.js';
import { MAX_BODY_DEPTH } from '../http/input-guard.js';
import { BODY_LIMIT_BYTES, createSteps, readJsonBody, scopeAllows, type Exchange, type RateOverrides, type StepDeps } from '../http/steps.js';
import { toApiError } from '../http/error-mapping.js';
import type { HandlerResult } from '../http/types.js';
import { errorBody, isApiError } from '../lib/errors.js';
import type { OperationMeta } from '../lib/contract.js';
import { createEventRelay, EVENT_NOTIFICATION } from './event-relay.js';
import { createSessionEventStore } from './event-store.js';
import { buildSessionTools, type SessionTool } from './session-tools.js';
import { createRedisSessionStore, type RedisCommands, type SessionRecord } from './session-store.js';
import { createSessionRegistry, grantKeyOf, type McpSession } from './sessions.js';
import { replayInitialize, serveWeb } from './web-transport.js';
import { buildTools, toDispatchRequest, type McpTool } from './tools.js';
import { MCP_PATH } from './names.js';
import { authed, authOf, loadSdk, requestIdOf, sendApiAnswer, sendJsonRpcError, type JsonRpcMessage } from './http-edge.js';

export { MCP_PATH };
const SERVER_INFO = { name: 'agent-api', title: 'Agent API', version: '1.0.0' };
const INSTRUCTIONS =
  "Tools act for the one agent and wallet your token was issued for; each agent_* tool mirrors a /v1/agent route (named from its path) and needs that route's OAuth scope. " +
  'Money is a decimal string in asset units. Mutating tools require an idempotency_key: reuse it to retry safely. ' +
  "Writes settle asynchronously: agent_operations_wait_for_status waits for an operation; mcp_subscribe streams the agent's events on the session's GET stream.";

/** The pipeline steps' dependencies, plus the document the tools are generated from. */
export interface McpDeps extends StepDeps {
  /** The bundled document (defaults to generated/openapi.json); tools and their schemas come from it. */
  document?: OpenApiDocument;
  /** Redis (REDIS_URL): sessions and their SSE history are shared, so any API process serves any session. Absent: this process's memory. */
  redis?: RedisCommands | null;
}

export interface McpEndpoint {
  /** Serves POST/GET/DELETE on MCP_PATH. */
  handle(req: Request, res: Response): Promise<void>;
  tools: McpTool[];
  sessionTools: SessionTool[];
  /** Ends every session and stops the event relay (app shutdown). */
  close(): Promise<void>;
}

/** What the handlers of one HTTP request know about the caller (carried in the SDK's authInfo). */
interface Caller {
  principal: Principal;
  overrides: RateOverrides;
  requestId: string;
  /** The bearer token as sent (authentication accepted it). */
  token: string;
}

/** How often an open stream's credential is checked again before events are sent on it. */
const REVERIFY_MS = 1000;

/**
 * Mounts POST/GET/DELETE /mcp. Order: Origin check (403) -> bearer authentication (401; failures
 * limited per client address) -> JSON body, 64 KB (413/400) -> per-tool scope gate on `tools/call`
 * (403 insufficient_scope) -> the session named by Mcp-Session-Id (404 when unknown or of another
 * grant), a new session on `initialize` (429 past the grant's cap), or a stateless POST.
 * Mount before the app's catch-all 404.
 */
export function mountMcp(app: Express, deps: McpDeps): Pick<McpEndpoint, 'close'> {
  // Built on the first request: the SDK (with zod) and the tool definitions generated from the contract
  // (~6 MB of heap) stay out of a process that never sees an MCP client.
  let endpoint: McpEndpoint | undefined;
  app.all(MCP_PATH, (req: Request, res: Response) => (endpoint ??= createMcpEndpoint(deps)).handle(req, res));
  return {
    async close() {
      await endpoint?.close();
    },
  };
}

/** The endpoint `mountMcp` serves (built on the first request to MCP_PATH). */
export function createMcpEndpoint(deps: McpDeps): McpEndpoint {
  const {
    Server: SdkServerClass,
    StreamableHTTPServerTransport,
    WebStandardStreamableHTTPServerTransport,
    CallToolRequestSchema,
    ErrorCode,
    isInitializeRequest,
    ListToolsRequestSchema,
    McpError,
  } = loadSdk();
  const { config, log } = deps;
  const steps = createSteps(deps);
  const document = deps.document ?? loadDocument();
  const tools = buildTools(document, deps.router.ops);
  const sessionTools = buildSessionTools(document);
  const routeTools = new Map<string, McpTool>();
  for (const t of tools) {
    routeTools.set(t.name, t);
    if (t.legacyName) routeTools.set(t.legacyName, t);
  }
  const localTools = new Map(sessionTools.map((t) => [t.name, t]));
  for (const name of localTools.keys()) if (routeTools.has(name)) throw new Error(`MCP tool ${name} is both a route tool and a session tool`);
  const listed: { op: OperationMeta; definition: McpTool['definition'] }[] = [...tools, ...sessionTools];
  const opOf = (name: string): OperationMeta | undefined => routeTools.get(name)?.op ?? localTools.get(name)?.op;
  const allowedOrigin = new URL(config.baseUrl).origin;

  const store = deps.redis ? createRedisSessionStore(deps.redis, { prefix: config.redisPrefix, idleMs: config.mcp.sessionIdleMs }) : null;
  const sessions = createSessionRegistry({
    maxPerGrant: config.mcp.maxSessionsPerGrant,
    idleMs: config.mcp.sessionIdleMs,
    log,
    onEnd: (session) => relay.forget(session.id),
    ...(store ? { shared: { store, rebuild: rebuildSession } } : {}),
  });
  const relay = createEventRelay({
    db: deps.db,
    events: deps.services.events,
    log,
    pollMs: config.mcp.eventPollMs,
    mayDeliver: (session) => stillAuthorized(session),
    ...(store ? { shared: { store: store.subscriptions, sessions: () => sessions.all().filter((s) => s.openStreams > 0) } } : {}),
    send: async (session, event) => {
      // The SDK stores the message in the session's event store before writing it (replayed after a reconnect).
      await (session.server as unknown as { notification(n: { method: string; params: unknown }): Promise<void> }).notification({ method: EVENT_NOTIFICATION, params: event });
    },
  });

  /**
   * A stream outlives the request that opened it, so before sending events the relay re-verifies the
   * session's latest token (expiry, grant revocation, the agent's state) at most once a second. While it
   * fails, events wait and the open stream is closed, so the client reconnects with a fresh token (or,
   * its grant revoked, is refused and never receives them).
   */
  async function stillAuthorized(session: McpSession): Promise<boolean> {
    const now = Date.now();
    if (now - session.verifiedAt < REVERIFY_MS) return true;
    try {
      if (!deps.bearer) return false;
      await deps.bearer.verify(session.token, 'mcp');
      session.verifiedAt = now;
      return true;
    } catch (err) {
      if (!isApiError(err)) throw err;
      session.transport.closeStandaloneSSEStream();
      return false;
    }
  }

  /** The operations a batch of JSON-RPC messages calls (only `tools/call` needs a scope). */
  function calledOperations(body: unknown): OperationMeta[] {
    const messages = (Array.isArray(body) ? body : [body]) as JsonRpcMessage[];
    const ops: OperationMeta[] = [];
    for (const message of messages) {
      if (message?.method !== 'tools/call' || typeof message.params?.name !== 'string') continue;
      const op = opOf(message.params.name);
      if (op) ops.push(op);
    }
    return ops;
  }

  /** GET /v1/agent/operations/{id} through the router for wait_for_status (charged once, by the tool call). */
  const getOperation = deps.router.byId.get('getOperation')!;
  function readOperation(caller: Caller, id: string): Promise<HandlerResult> {
    const ctx = steps.contextFor({ requestId: caller.requestId }, caller.principal);
    return deps.router.dispatch(getOperation, { path: `/v1/agent/operations/${encodeURIComponent(id)}`, params: { id }, query: {}, headers: {}, body: undefined }, ctx);
  }

  /** One tool call through the same steps as HTTP: rate limit, router (validation, idempotency, handler), respond. */
  async function callTool(caller: Caller, session: McpSession | null, name: string, args: Record<string, unknown> | undefined, signal: AbortSignal): Promise<CallToolResult> {
    const { principal, overrides, requestId } = caller;
    const route = routeTools.get(name);
    const local = localTools.get(name);
    const op = route?.op ?? local?.op;
    if (!op) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    const startedAt = process.hrtime.bigint();
    // Session tools have no route: their answers are checked against their own outputSchema (by clients and tests), not the document.
    const exchange: Exchange = { requestId, ...(route ? { op } : {}) };
    let result: HandlerResult;
    try {
      await steps.chargeRateLimit(exchange, principal.agentId, op.rateClass, overrides);
      if (route) {
        const request = toDispatchRequest(route, args);
        const ctx = steps.contextFor(exchange, principal, { idempotencyKey: request.idempotencyKey });
        result = await deps.router.dispatch(op, request, ctx);
      } else {
        result = await local!.run({ principal, session, relay, signal, readOperation: (id) => readOperation(caller, id) }, args ?? {});
      }
    } catch (err) {
      result = steps.errorResult(exchange, err, { tool: name });
    }
    // A refusal a handler returns (status >= 400, the error envelope) and one it throws answer alike.
    const { status, body, headers } = steps.respond(exchange, result);
    const latencyMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
    log.info({ requestId, agentId: principal.agentId, sessionId: session?.id, tool: name, route: op.operationId, status, latencyMs: Math.round(latencyMs * 100) / 100 }, 'mcp tool call');
    const ok = status < 400;
    return {
      content: [{ type: 'text', text: JSON.stringify(body) }],
      // The success body is the tool's structured result (its outputSchema is the route's 200/201 schema).
      ...(ok ? { structuredContent: body as Record<string, unknown> } : { isError: true }),
      _meta: { 'agent-api/status': status, 'agent-api/headers': headers },
    };
  }

  const callerOf = (authInfo: AuthInfo | undefined): Caller => {
    const caller = authInfo?.extra?.caller as Caller | undefined;
    if (!caller) throw new McpError(ErrorCode.InternalError, 'request without an authenticated caller');
    return caller;
  };

  /** One SDK server: per session (kept) or per stateless request. The caller comes with each request. */
  function createServer(session: () => McpSession | null): Server {
    // The low-level server: tool schemas are the contract's JSON Schemas, and the router (not zod)
    // validates arguments, so a tool refuses exactly what the HTTP route refuses.
    const server = new SdkServerClass(SERVER_INFO, {
      capabilities: { tools: { listChanged: false }, experimental: { 'agent_api/events': { notification: EVENT_NOTIFICATION } } },
      instructions: INSTRUCTIONS,
    });
    // Only the tools the token's scopes allow (spec 5.2: a read token sees read tools).
    server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
      const { principal } = callerOf(extra.authInfo);
      return { tools: listed.filter((t) => scopeAllows(principal, t.op)).map((t) => t.definition) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
      callTool(callerOf(extra.authInfo), session(), request.params.name, request.params.arguments as Record<string, unknown> | undefined, extra.signal),
    );
    return server;
  }

  async function openSession(req: Request, res: Response, caller: Caller, exchange: Exchange): Promise<void> {
    const grantKey = grantKeyOf(caller.principal);
    if (!(await sessions.makeRoom(grantKey))) {
      const max = config.mcp.maxSessionsPerGrant;
      sendApiAnswer(
        res,
        steps.respond(exchange, {
          status: 429,
          body: errorBody('rate_limited', `This grant already holds ${max} MCP sessions: end one with DELETE /mcp (Mcp-Session-Id) or let it expire.`, { limit_count: max, attempted_count: max + 1 }),
          headers: { 'Retry-After': String(await sessions.retryAfterSeconds(grantKey)) },
        }),
      );
      return;
    }
    const session = await buildSession(randomUUID(), grantKey, caller.principal, caller.token);
    await sessions.add(session, req.body);
    await serveWeb(session.transport, req, res, config.baseUrl, authOf(req));
    if (session.transport.sessionId !== session.id) await sessions.end(session.id, 'initialize failed');
    else log.info({ sessionId: session.id, agentId: session.agentId, requestId: caller.requestId }, 'mcp session opened');
  }

  /** A session's SDK server and transport in this process (its history in Redis when shared, else in memory). */
  async function buildSession(id: string, grantKey: string, principal: { agentId: string; walletId: string }, token: string): Promise<McpSession> {
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      enableJsonResponse: true,
      eventStore: store ? store.eventStore(id) : createSessionEventStore(),
      onsessionclosed: () => void sessions.end(id, 'deleted'),
    });
    const { agentId, walletId } = principal;
    const session: McpSession = { id, grantKey, agentId, walletId, server: createServer(() => session), transport, lastSeenAt: Date.now(), confirmed: false, openStreams: 0, token, verifiedAt: 0 };
    transport.onclose = () => void sessions.end(id, 'closed');
    await session.server.connect(transport);
    return session;
  }

  /** A session another process opened, rebuilt here from its record (the request that names it brings the token). */
  async function rebuildSession(record: SessionRecord): Promise<McpSession> {
    const session = await buildSession(record.id, record.grantKey, record, '');
    await replayInitialize(session.transport, record.initialize, config.baseUrl, MCP_PATH);
    return session;
  }

  async function handleStateless(req: Request, res: Response): Promise<void> {
    const server = createServer(() => null);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
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
      const caller: Caller = { ...authenticated, requestId: exchange.requestId, token: (req.headers.authorization ?? '').replace(/^Bearer\s+/i, '').trim() };

      if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
        sendJsonRpcError(res, 405, -32000, 'Method not allowed.', { Allow: 'GET, POST, DELETE' });
        return;
      }

      if (req.method === 'POST') {
        const problem = await readJsonBody(req, res);
        if (problem) {
          if (problem.kind === 'too_large') sendJsonRpcError(res, 413, -32600, `Request bodies are limited to ${BODY_LIMIT_BYTES} bytes.`);
          else if (problem.kind === 'too_deep') sendJsonRpcError(res, 400, -32600, `Invalid request: the body nests objects and arrays more than ${MAX_BODY_DEPTH} levels deep.`);
          else sendJsonRpcError(res, 400, -32700, 'Parse error: the request body is not valid JSON.');
          return;
        }
        try {
          steps.requireScope(caller.principal, calledOperations(req.body), 'mcp', 'tool');
        } catch (err) {
          sendApiAnswer(res, steps.respond(exchange, steps.errorResult(exchange, err)));
          return;
        }
      }

      authed(req).auth = { token: '', clientId: caller.principal.clientId ?? '', scopes: [...caller.principal.scopes], extra: { caller } };
      const sessionId = req.headers['mcp-session-id'];
      if (typeof sessionId === 'string') {
        const session = await sessions.get(sessionId);
        // A session answers only tokens of the grant that opened it; to anyone else it does not exist.
        if (!session || session.grantKey !== grantKeyOf(caller.principal)) {
          sendJsonRpcError(res, 404, -32001, 'Session not found: initialize a new one.');
          return;
        }
        await sessions.confirm(session);
        session.token = caller.token;
        session.verifiedAt = Date.now();
        if (req.method === 'GET') {
          session.openStreams += 1;
          res.on('close', () => {
            session.openStreams -= 1;
            session.lastSeenAt = Date.now();
          });
          relay.wake();
        }
        await serveWeb(session.transport, req, res, config.baseUrl, authOf(req));
        return;
      }
      if (req.method !== 'POST') {
        sendJsonRpcError(res, 400, -32000, 'Bad Request: GET and DELETE need the Mcp-Session-Id an initialize returned.');
        return;
      }
      if (isInitializeRequest(req.body)) await openSession(req, res, caller, exchange);
      else await handleStateless(req, res);
    } catch (err) {
      // An outage (Postgres, or Redis holding the sessions) is a 503 with Retry-After, as on /v1/agent; the rest is a 500.
      const answer = toApiError(err);
      if (answer?.code === 'service_unavailable') {
        log.warn({ err, requestId: exchange.requestId }, 'MCP request refused: a store is unavailable');
        if (!res.headersSent) sendJsonRpcError(res, 503, -32603, answer.message, answer.headers);
        return;
      }
      log.error({ err, requestId: exchange.requestId }, 'MCP request failed');
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, `Internal error (request ${exchange.requestId}).`);
    }
  };

  return {
    handle,
    tools,
    sessionTools,
    async close() {
      relay.close();
      await sessions.close();
    },
  };
}
