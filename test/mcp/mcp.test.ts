// /mcp over HTTP with the SDK's own client: authentication, per-tool scopes, tools/list and tool calls through the router.
import { expect } from 'chai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { createTableResolver } from '../webhooks/hostile-urls.js';
import { newKey, type TestAgent, type TestServer } from '../helpers/server.js';
import { connectClient, mintAccessToken, postMcp, resultBody, startMcpTestServer, toolCall } from './helpers.js';

describe('MCP endpoint /mcp', function () {
  this.timeout(30_000);
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  let client: Client;
  const clients: Client[] = [];

  before(async () => {
    server = await startMcpTestServer({ env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' } });
    // The webhook routes serve as the mutating tools here; a resolver table keeps the URL checks off real DNS.
    (server.services as { webhooks: unknown }).webhooks = createWebhookService({
      clock: server.clock,
      sealer: createSealer(server.config.masterKey),
      allowLoopback: server.config.unsafeAllowLoopbackTargets,
      resolver: createTableResolver(),
    });
    agent = await server.createAgent({ name: 'mcp agent' });
    await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'webhook_management', limit: 1000, burst: 1000, windowSeconds: 60 });
    token = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
    client = await connectClient(server, token);
    clients.push(client);
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await server?.close();
  });

  const challenge = (error: string | null, scope?: string) =>
    `Bearer resource_metadata="${server.baseUrl}/.well-known/oauth-protected-resource/mcp"${error ? `, error="${error}"` : ''}${scope ? `, scope="${scope}"` : ''}`;

  const webhookCount = async (agentId: string) => Number((await server.db('webhook_endpoints').where({ agent_id: agentId }).count<{ count: string }[]>('* as count'))[0]!.count);

  describe('tools/list', () => {
    it('lists one tool per /v1/agent operation, plus the three session tools, with its input schema', async () => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      const expectedCount = server.built.router.ops.filter((op) => op.path.startsWith('/v1/agent') && !op.isPublic).length;
      expect(tools).to.have.length(expectedCount + 3);
      expect(names).to.include.members(['agent_operations_wait_for_status', 'mcp_subscribe', 'mcp_unsubscribe']);
      expect(names).to.include.members(['agent_self_get', 'agent_balances_list', 'agent_payments_create', 'agent_webhooks_create', 'agent_operations_get']);
      expect(names).not.to.include('agent_open_api_get');

      const self = tools.find((t) => t.name === 'agent_self_get')!;
      expect(self.inputSchema).to.deep.include({ type: 'object', additionalProperties: false });
      expect(self.annotations).to.include({ readOnlyHint: true });

      // Issue 30 item 9: the hint follows the route's scope, not its method (a POST that only reads is read-only).
      const session = new Set(['agent_operations_wait_for_status', 'mcp_subscribe', 'mcp_unsubscribe']);
      const routeTools = tools.filter((t) => !session.has(t.name));
      const wrong = routeTools
        .map((t) => ({ name: t.name, scope: t._meta?.['agent-api/required_scope'] as string | null, route: String(t._meta?.['agent-api/route']), hints: t.annotations }))
        .filter((t) => t.hints?.readOnlyHint !== (t.scope === 'agent:read' || t.scope === 'agent:simulate') || (t.hints?.readOnlyHint && t.hints.destructiveHint))
        .map((t) => `${t.name} (${t.route}, ${t.scope}): readOnlyHint ${String(t.hints?.readOnlyHint)}, destructiveHint ${String(t.hints?.destructiveHint)}`);
      expect(wrong, wrong.join('\n')).to.deep.equal([]);
      expect(routeTools.filter((t) => t.annotations?.readOnlyHint && !String(t._meta?.['agent-api/route']).startsWith('GET ')).map((t) => t.name)).to.include('agent_recipients_resolve_create');

      const pay = tools.find((t) => t.name === 'agent_payments_create')!;
      expect(pay.inputSchema.required).to.include.members(['to', 'asset', 'idempotency_key']);
      expect(pay.inputSchema.properties).to.have.keys(['to', 'asset', 'deliver_as', 'note', 'slippage_percent', 'prefer', 'amount', 'amount_usd', 'idempotency_key']);
      expect(pay._meta).to.include({ 'agent-api/required_scope': 'agent:payments:write' });
      expect(pay.annotations).to.include({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });

      const op = tools.find((t) => t.name === 'agent_operations_get')!;
      expect(op.inputSchema.required).to.deep.equal(['id']);
      expect(op.inputSchema.properties).to.have.keys(['id', 'include']);
    });

    it('lists only the tools the token scopes allow', async () => {
      const readOnly = await connectClient(server, await mintAccessToken(server, agent, { scopes: ['agent:read'] }));
      clients.push(readOnly);
      const names = (await readOnly.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['agent_self_get', 'agent_payments_list', 'agent_webhooks_get', 'agent_operations_wait_for_status', 'mcp_subscribe']);
      expect(names).not.to.include.members(['agent_payments_create']);
      expect(names.filter((n) => /_(create|update|delete)$/.test(n))).to.deep.equal(['agent_recipients_resolve_create']);

      const manager = await connectClient(server, await mintAccessToken(server, agent, { scopes: ['agent:webhooks:manage'] }));
      clients.push(manager);
      const managed = (await manager.listTools()).tools.map((t) => t.name);
      // Webhook reads also take agent:webhooks:manage; other reads need agent:read.
      expect(managed).to.include.members(['agent_webhooks_create', 'agent_webhooks_list', 'agent_webhooks_get']);
      expect(managed).not.to.include('agent_self_get');
    });
  });

  describe('tools/call', () => {
    it('returns the agent from agent_self_get', async () => {
      const result = await client.callTool({ name: 'agent_self_get', arguments: {} });
      expect(result.isError, JSON.stringify(result)).to.not.equal(true);
      const body = resultBody(result);
      expect(body.ok).to.equal(true);
      expect(JSON.stringify(body)).to.include(agent.agentId);
      expect(JSON.stringify(body)).to.include(agent.walletId);
      const meta = result._meta as Record<string, Record<string, string> | number>;
      expect(meta['agent-api/status']).to.equal(200);
      expect((meta['agent-api/headers'] as Record<string, string>)['X-RateLimit-Limit']).to.match(/^\d+$/);
    });

    it('answers validation_failed from the router when a path parameter is malformed', async () => {
      const result = await client.callTool({ name: 'agent_operations_get', arguments: { id: 'not-a-uuid' } });
      expect(result.isError).to.equal(true);
      const body = resultBody(result);
      expect(body.ok).to.equal(false);
      expect(body.error.code).to.equal('validation_failed');
    });

    it('answers validation_failed naming the field when a tool argument holds U+0000', async () => {
      const result = await client.callTool({ name: 'agent_recipients_resolve_create', arguments: { to: 'a\u0000b' } });
      expect(result.isError).to.equal(true);
      const body = resultBody(result);
      expect(body.error.code).to.equal('validation_failed');
      expect(body.error.details.errors).to.deep.include({ location: 'body', path: '/to', message: 'must not contain the NUL character (U+0000)' });
    });

    it('answers not_found for a webhook of nobody', async () => {
      const result = await client.callTool({ name: 'agent_webhooks_get', arguments: { id: '00000000-0000-4000-8000-000000000000' } });
      expect(result.isError).to.equal(true);
      expect(resultBody(result).error.code).to.equal('not_found');
    });

    it('refuses a mutating tool without idempotency_key and changes nothing', async () => {
      const before = await webhookCount(agent.agentId);
      const result = await client.callTool({ name: 'agent_webhooks_create', arguments: { url: 'https://hooks.example.com/no-key', event_types: ['payment.executed'] } });
      expect(result.isError).to.equal(true);
      const body = resultBody(result);
      expect(body.error.code).to.equal('validation_failed');
      expect(JSON.stringify(body.error.details)).to.include('idempotency_key');
      expect(await webhookCount(agent.agentId)).to.equal(before);
    });

    it('replays the first result when the same idempotency_key is sent again', async () => {
      const key = newKey();
      const args = { url: 'https://hooks.example.com/replay', event_types: ['payment.executed'], idempotency_key: key };
      const first = await client.callTool({ name: 'agent_webhooks_create', arguments: args });
      expect(first.isError, JSON.stringify(first)).to.not.equal(true);
      const created = resultBody(first);
      expect(created.webhook.id).to.be.a('string');
      const count = await webhookCount(agent.agentId);

      const second = await client.callTool({ name: 'agent_webhooks_create', arguments: args });
      expect(second.isError).to.not.equal(true);
      expect(resultBody(second)).to.deep.equal(created);
      expect((second._meta as Record<string, Record<string, string>>)['agent-api/headers']!['X-Idempotency-Replayed']).to.equal('true');
      expect(await webhookCount(agent.agentId)).to.equal(count);

      // The key belongs to the agent across transports: the same request over HTTP replays too.
      const http = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url: args.url, event_types: args.event_types }, idempotencyKey: key });
      expect(http.status).to.equal(200);
      expect(http.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(http.body.webhook.id).to.equal(created.webhook.id);

      const other = await client.callTool({ name: 'agent_webhooks_create', arguments: { ...args, url: 'https://hooks.example.com/other' } });
      expect(other.isError).to.equal(true);
      expect(resultBody(other).error.code).to.equal('idempotency_key_reuse_mismatch');
      expect(await webhookCount(agent.agentId)).to.equal(count);
    });

    it('passes path and query arguments to the route', async () => {
      const created = resultBody(
        await client.callTool({
          name: 'agent_webhooks_create',
          arguments: { url: 'https://hooks.example.com/path', event_types: ['payment.executed'], description: 'before', idempotency_key: newKey() },
        }),
      );
      const updated = await client.callTool({ name: 'agent_webhooks_update', arguments: { id: created.webhook.id, description: 'after', idempotency_key: newKey() } });
      expect(updated.isError, JSON.stringify(updated)).to.not.equal(true);
      expect(resultBody(updated).webhook.description).to.equal('after');

      const page = await client.callTool({ name: 'agent_webhooks_list', arguments: { limit: 1 } });
      expect(page.isError, JSON.stringify(page)).to.not.equal(true);
      expect(resultBody(page).items).to.have.length(1);
      expect(resultBody(page).has_more).to.equal(true);

      const tooMany = await client.callTool({ name: 'agent_webhooks_list', arguments: { limit: 101 } });
      expect(tooMany.isError).to.equal(true);
      expect(resultBody(tooMany).error.code).to.equal('validation_failed');
    });

    it('refuses arguments a body-less tool does not know', async () => {
      const result = await client.callTool({ name: 'agent_self_get', arguments: { surprise: 1 } });
      expect(result.isError).to.equal(true);
      expect(resultBody(result).error.code).to.equal('validation_failed');
    });

    it('answers a JSON-RPC error for an unknown tool', async () => {
      const res = await postMcp(server, toolCall('agent_nothing_get', {}), { authorization: `Bearer ${token}` });
      expect(res.status).to.equal(200);
      expect((res.body as { error: { code: number } }).error.code).to.equal(-32602);
    });

    it('charges the route rate-limit class per call', async () => {
      const limited = await server.createAgent({ name: 'limited mcp agent' });
      await server.services.agents.setRateLimit(server.db, limited.agentId, { class: 'read', limit: 2, burst: 2, windowSeconds: 60 });
      const limitedClient = await connectClient(server, await mintAccessToken(server, limited, { scopes: ['agent:read'] }));
      clients.push(limitedClient);
      for (let i = 0; i < 2; i += 1) expect((await limitedClient.callTool({ name: 'agent_self_get', arguments: {} })).isError).to.not.equal(true);
      const third = await limitedClient.callTool({ name: 'agent_self_get', arguments: {} });
      expect(third.isError).to.equal(true);
      const body = resultBody(third);
      expect(body.error.code).to.equal('rate_limited');
      expect(body.error.details).to.deep.equal({ limit_count: 2, attempted_count: 3 });
    });
  });

  describe('authentication', () => {
    it('answers 401 with the resource-metadata challenge when no token is sent', async () => {
      const res = await postMcp(server, toolCall('agent_self_get', {}));
      expect(res.status).to.equal(401);
      // No bearer token: the challenge carries no error code (RFC 6750 section 3.1; issue 29 item 6).
      expect(res.headers.get('www-authenticate')).to.equal(challenge(null));
      expect((res.body as { error: { code: string } }).error.code).to.equal('invalid_token');
    });

    it('refuses header keys at /mcp', async () => {
      const res = await postMcp(server, toolCall('agent_self_get', {}), agent.headers);
      expect(res.status).to.equal(401);
      // Header keys are a method /mcp does not take, so no bearer token was sent: no error code (RFC 6750 section 3.1).
      expect(res.headers.get('www-authenticate')).to.equal(challenge(null));
    });

    it('refuses a token issued for /v1/agent with 401', async () => {
      const agentToken = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES], resource: 'agent' });
      // The same token is good at /v1/agent ...
      const http = await server.request('GET', '/v1/agent/self', { headers: { authorization: `Bearer ${agentToken}` } });
      expect(http.status).to.equal(200);
      // ... and refused at /mcp, by raw request and by the SDK client.
      const res = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${agentToken}` });
      expect(res.status).to.equal(401);
      expect(res.headers.get('www-authenticate')).to.equal(challenge('invalid_token'));
      const err = await connectClient(server, agentToken).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StreamableHTTPError);
      expect((err as StreamableHTTPError).code).to.equal(401);
    });

    it('refuses an expired /mcp token and one whose grant was revoked', async () => {
      const shortLived = await mintAccessToken(server, agent, { scopes: ['agent:read'], lifetimeSeconds: -10 });
      expect((await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${shortLived}` })).status).to.equal(401);
      const revoked = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      expect((await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${revoked}` })).status).to.equal(200);
      await server.db('oauth_grants').where({ agent_id: agent.agentId }).whereNull('revoked_at').update({ revoked_at: server.clock.now(), revoked_reason: 'test' });
      expect((await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${revoked}` })).status).to.equal(401);
      token = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
      client = await connectClient(server, token);
      clients.push(client);
    });

    it('answers 401 agent_disabled with the challenge for a valid token of a disabled agent', async () => {
      const other = await server.createAgent({ name: 'disabled mcp agent' });
      const otherToken = await mintAccessToken(server, other, { scopes: ['agent:read'] });
      expect((await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${otherToken}` })).status).to.equal(200);
      await server.services.agents.setEnabled(server.db, other.agentId, false);
      const res = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${otherToken}` });
      expect(res.status).to.equal(401);
      expect((res.body as { error: { code: string } }).error.code).to.equal('agent_disabled');
      expect(res.headers.get('www-authenticate')).to.equal(challenge('invalid_token'));
    });

    it('answers 403 insufficient_scope on tools/call for a tool whose scope the token lacks', async () => {
      const readToken = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const before = await webhookCount(agent.agentId);
      const args = { url: 'https://hooks.example.com/scope', event_types: ['payment.executed'], idempotency_key: newKey() };
      const res = await postMcp(server, toolCall('agent_webhooks_create', args), { authorization: `Bearer ${readToken}` });
      expect(res.status).to.equal(403);
      expect(res.headers.get('www-authenticate')).to.equal(challenge('insufficient_scope', 'agent:webhooks:manage'));
      expect((res.body as { error: { code: string } }).error.code).to.equal('insufficient_scope');

      const readClient = await connectClient(server, readToken);
      clients.push(readClient);
      const err = await readClient.callTool({ name: 'agent_webhooks_create', arguments: args }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StreamableHTTPError);
      expect((err as StreamableHTTPError).code).to.equal(403);
      expect(await webhookCount(agent.agentId)).to.equal(before);
      // The read tools stay available to the same token.
      expect((await readClient.callTool({ name: 'agent_self_get', arguments: {} })).isError).to.not.equal(true);
    });

    it('checks every message of a JSON-RPC batch against the scopes', async () => {
      const readToken = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const batch = [
        toolCall('agent_self_get', {}, 1),
        toolCall('agent_payments_create', { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1', idempotency_key: newKey() }, 2),
      ];
      const res = await postMcp(server, batch, { authorization: `Bearer ${readToken}` });
      expect(res.status).to.equal(403);
      expect(res.headers.get('www-authenticate')).to.equal(challenge('insufficient_scope', 'agent:payments:write'));
    });
  });

  describe('transport', () => {
    it('refuses a foreign Origin with 403', async () => {
      const res = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${token}`, origin: 'https://evil.example' });
      expect(res.status).to.equal(403);
      const same = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${token}`, origin: new URL(server.baseUrl).origin });
      expect(same.status).to.equal(200);
    });

    it('answers 400 to GET and DELETE without a session, and 405 to other methods', async () => {
      for (const method of ['GET', 'DELETE']) {
        const res = await fetch(`${server.baseUrl}/mcp`, { method, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
        await res.arrayBuffer();
        expect(res.status, method).to.equal(400);
      }
      const put = await fetch(`${server.baseUrl}/mcp`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } });
      await put.arrayBuffer();
      expect(put.status).to.equal(405);
      expect(put.headers.get('allow')).to.equal('GET, POST, DELETE');
    });

    it('answers 413 above 64 KB and 400 for malformed JSON', async () => {
      const big = JSON.stringify(toolCall('agent_self_get', { pad: 'x'.repeat(70 * 1024) }));
      expect((await postMcp(server, big, { authorization: `Bearer ${token}` })).status).to.equal(413);
      const broken = await postMcp(server, '{"jsonrpc":', { authorization: `Bearer ${token}` });
      expect(broken.status).to.equal(400);
      expect((broken.body as { error: { code: number } }).error.code).to.equal(-32700);
    });
  });
});
