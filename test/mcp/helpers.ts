// MCP test helpers: the test server with /mcp, access tokens signed with the server's own keys, and an SDK client.
import { randomBytes, randomUUID } from 'node:crypto';
import express from 'express';
import { importJWK, SignJWT } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createBearerVerifier, resourceUrl, type BearerResource } from '../../src/auth/bearer.js';
import { insertGrantBinding, upsertModel } from '../../src/db/repositories/oauth.repository.js';
import { requestIdMiddleware } from '../../src/http/pipeline.js';
import { createSealer } from '../../src/lib/crypto.js';
import { mountMcp } from '../../src/mcp/mcp.js';
import { loadSigningKeys } from '../../src/oauth/keys.js';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

/**
 * The test server with /mcp. While src/app.ts does not mount it yet, the same app is wrapped
 * with mountMcp in front (built from the app's own router, services and a real bearer verifier).
 */
export async function startMcpTestServer(opts: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
  const server = await startTestServer(opts);
  const probe = await fetch(`${server.baseUrl}/mcp`, { method: 'POST' });
  await probe.arrayBuffer();
  if (probe.status === 404) {
    const { built } = server;
    const outer = express();
    outer.disable('x-powered-by');
    outer.set('trust proxy', server.config.trustProxy);
    outer.use(requestIdMiddleware);
    mountMcp(outer, {
      config: server.config,
      db: built.db,
      clock: built.clock,
      log: built.log,
      router: built.router,
      services: built.services,
      rateLimits: built.services.rateLimits,
      bearer: createBearerVerifier({ config: server.config, db: built.db, clock: built.clock }),
    });
    outer.use(built.app);
    server.server.removeAllListeners('request');
    server.server.on('request', outer);
  }
  return server;
}

/**
 * A real access token as the authorization server would issue it: signed with the server's current
 * key, with a live grant behind it, so the production verifier checks it end to end.
 */
export async function mintAccessToken(server: TestServer, agent: TestAgent, opts: { scopes: string[]; resource?: BearerResource; lifetimeSeconds?: number }): Promise<string> {
  const resource = opts.resource ?? 'mcp';
  const audience = resourceUrl(server.config.baseUrl, resource);
  const now = server.clock.now();
  const [key] = await loadSigningKeys(server.db, createSealer(server.config.masterKey), server.clock);
  const grantId = `test-grant-${randomBytes(8).toString('hex')}`;
  const scope = opts.scopes.join(' ');
  await upsertModel(server.db, {
    model: 'Grant',
    id: grantId,
    payload: { accountId: agent.agentId, clientId: 'mcp-test-client' },
    grant_id: null,
    uid: null,
    user_code: null,
    expires_at: new Date(now.getTime() + 3_600_000),
  });
  await insertGrantBinding(server.db, { id: grantId, client_id: 'mcp-test-client', owner_id: agent.ownerId, agent_id: agent.agentId, resource: audience, scope, created_at: now });
  const privateKey = await importJWK(key!.privateJwk, key!.alg);
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ scope, client_id: 'mcp-test-client', gid: grantId })
    .setProtectedHeader({ alg: key!.alg, typ: 'at+jwt', kid: key!.kid })
    .setIssuer(server.config.baseUrl)
    .setAudience(audience)
    .setSubject(agent.agentId)
    .setJti(randomUUID())
    .setIssuedAt(iat)
    .setExpirationTime(iat + (opts.lifetimeSeconds ?? 900))
    .sign(privateKey);
}

/** An MCP SDK client connected to the server's /mcp with a bearer token. */
export async function connectClient(server: TestServer, token: string, headers: Record<string, string> = {}): Promise<Client> {
  return (await connectSession(server, token, headers)).client;
}

/** The same, with its transport (session id, terminateSession). */
export async function connectSession(server: TestServer, token: string, headers: Record<string, string> = {}): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'agent-api-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
  });
  await client.connect(transport);
  return { client, transport };
}

/** A raw JSON-RPC POST to /mcp (for status codes and headers the SDK client hides). */
export async function postMcp(server: TestServer, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: unknown }> {
  const res = await fetch(`${server.baseUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export const toolCall = (name: string, args: Record<string, unknown>, id = 1) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function resultBody(result: unknown): any {
  const content = (result as { content?: { type: string; text: string }[] }).content;
  if (content?.[0]?.type !== 'text') throw new Error(`tool result without text content: ${JSON.stringify(result)}`);
  return JSON.parse(content[0].text);
}

/** Reads SSE events from a fetch response until `until` holds or the time runs out. */
export async function readSse(res: Response, until: (events: { id?: string; data: unknown }[]) => boolean, ms = 8000): Promise<{ id?: string; data: unknown }[] & { closed?: boolean }> {
  const events: { id?: string; data: unknown }[] & { closed?: boolean } = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const deadline = Date.now() + ms;
  try {
    while (!until(events) && Date.now() < deadline) {
      const chunk = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(resolve, deadline - Date.now())).then(() => null)]);
      if (!chunk) break;
      if (chunk.done) {
        events.closed = true;
        break;
      }
      buffer += decoder.decode(chunk.value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const id = /^id: ?(.*)$/m.exec(block)?.[1];
        const data = block
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trim())
          .join('\n');
        if (data) events.push({ id, data: JSON.parse(data) });
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return events;
}
