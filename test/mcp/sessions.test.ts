// MCP parity (issue 13) with the SDK's own client against a live server: route-derived names, scope-filtered
// tools/list, outputSchema + structuredContent, sessions (SSE stream, Last-Event-ID, DELETE, the per-grant cap,
// idle expiry), agent_operations_wait_for_status, mcp_subscribe events; and the MCP Inspector CLI listing the tools.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createDemoAgent, newKey, type TestAgent, type TestServer } from '../helpers/server.js';
import { connectSession, mintAccessToken, postMcp, readSse, startMcpTestServer } from './helpers.js';

const run = promisify(execFile);
const Ajv2020 = Ajv2020Module as unknown as typeof Ajv2020Module.default;
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const CAP = 3;
const RECIPIENT = '0x1111111111111111111111111111111111111111';
const initialize = (id = 1) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-test', version: '1.0.0' } } });
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };

describe('MCP parity: names, schemas, sessions, streams', function () {
  this.timeout(60_000);
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  let tools: Map<string, Tool>;
  const notifications: { method: string; params?: Record<string, unknown> }[] = [];
  const toClose: Client[] = [];
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const validators = new Map<string, ValidateFunction>();
  const validated = new Set<string>();

  /** A tool call whose structuredContent must match the tool's outputSchema (Ajv 2020) and equal the text content. */
  async function call(name: string, args: Record<string, unknown> = {}, via: Client = client): Promise<CallToolResult> {
    const result = (await via.callTool({ name, arguments: args })) as CallToolResult;
    if (!result.isError) {
      const tool = tools.get(name);
      expect(tool?.outputSchema, name).to.be.an('object');
      let validate = validators.get(name);
      if (!validate) validators.set(name, (validate = ajv.compile(tool!.outputSchema!)));
      expect(validate(result.structuredContent), `${name}: ${JSON.stringify(validate.errors)}`).to.equal(true);
      expect(result.structuredContent).to.deep.equal(JSON.parse((result.content[0] as { text: string }).text));
      validated.add(name);
    } else {
      expect(result.structuredContent, name).to.equal(undefined);
    }
    return result;
  }

  const pay = async (via: Client = client) => {
    const result = await call('agent_payments_create', { to: RECIPIENT, asset: 'USDC', amount: '1.25', idempotency_key: newKey() }, via);
    expect(result.isError, JSON.stringify(result)).to.not.equal(true);
    return (result.structuredContent as { operation_id: string }).operation_id;
  };

  before(async () => {
    server = await startMcpTestServer({ worker: true, env: { SETTLEMENT_DELAY_MS: '800', MCP_MAX_SESSIONS_PER_GRANT: String(CAP), MCP_EVENT_POLL_MS: '100' } });
    agent = await createDemoAgent(server);
    token = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
    ({ client, transport } = await connectSession(server, token));
    client.fallbackNotificationHandler = async (n) => void notifications.push(n as (typeof notifications)[number]);
    tools = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
  });

  after(async () => {
    for (const c of [client, ...toClose]) await c?.close().catch(() => undefined);
    await server?.close();
  });

  describe('tools/list', () => {
    it('names tools from the route path and verb', () => {
      expect([...tools.keys()]).to.include.members([
        'agent_balances_cash_list',
        'agent_borrow_collateral_add_create',
        'agent_account_get',
        'agent_webhooks_update',
        'agent_trusted_destinations_delete',
      ]);
      for (const name of tools.keys()) expect(name).to.match(/^(agent_[a-z0-9_]+_(get|list|create|update|delete)|agent_operations_wait_for_status|mcp_subscribe|mcp_unsubscribe)$/);
    });

    it('carries scope, rate class, idempotency_key and the hints of each tool', () => {
      const add = tools.get('agent_borrow_collateral_add_create')!;
      expect(add.annotations).to.include({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });
      expect(add._meta).to.include({ 'agent-api/required_scope': 'agent:borrow:write', 'agent-api/rate_limit_class': 'write', 'agent-api/idempotency_key_required': true });
      expect(add.inputSchema.required).to.include('idempotency_key');
      const account = tools.get('agent_account_get')!;
      expect(account.annotations).to.include({ readOnlyHint: true, destructiveHint: false, idempotentHint: true });
      expect(account._meta).to.include({ 'agent-api/required_scope': 'agent:read', 'agent-api/rate_limit_class': 'read', 'agent-api/idempotency_key_required': false });
      const hook = tools.get('agent_webhooks_delete')!;
      expect(hook._meta).to.include({ 'agent-api/rate_limit_class': 'webhook_management', 'agent-api/required_scope': 'agent:webhooks:manage' });
      for (const tool of tools.values()) {
        expect(tool.outputSchema?.type, tool.name).to.equal('object');
        expect(tool._meta, tool.name).to.have.keys([
          'agent-api/operation_id',
          'agent-api/route',
          'agent-api/required_scope',
          'agent-api/alternative_scopes',
          'agent-api/rate_limit_class',
          'agent-api/idempotency_key_required',
        ]);
      }
    });

    it('shows a token only the tools its scopes allow', async () => {
      const { client: reader } = await connectSession(server, await mintAccessToken(server, agent, { scopes: ['agent:read'] }));
      toClose.push(reader);
      const names = (await reader.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['agent_account_get', 'agent_balances_cash_list', 'agent_operations_wait_for_status', 'mcp_subscribe']);
      expect(names).to.not.include.members(['agent_payments_create']);
      expect(names).to.not.include('agent_borrow_collateral_add_create');
      expect(names.length).to.be.below(tools.size);
    });
  });

  describe('tools/call', () => {
    it('returns structuredContent matching the outputSchema on every read tool without required arguments', async () => {
      const reads = [...tools.values()].filter(
        (t) => t.annotations?.readOnlyHint && !(t.inputSchema.required ?? []).length && t.name.startsWith('agent_') && t.name !== 'agent_operations_wait_for_status',
      );
      expect(reads.length).to.be.at.least(25);
      for (const tool of reads) {
        const result = await call(tool.name);
        expect(result.isError, `${tool.name}: ${JSON.stringify(result.content)}`).to.not.equal(true);
      }
    });

    it('still answers the names used before route-derived ones', async () => {
      expect(tools.has('agent_cash_balances_list')).to.equal(false);
      const old = (await client.callTool({ name: 'agent_cash_balances_list', arguments: {} })) as CallToolResult;
      expect(old.isError).to.not.equal(true);
      expect(old.structuredContent).to.deep.equal((await call('agent_balances_cash_list')).structuredContent);
    });
  });

  describe('agent_operations_wait_for_status', () => {
    it('returns once the operation reaches a terminal status', async () => {
      const id = await pay();
      const result = await call('agent_operations_wait_for_status', { operation_id: id, terminal_statuses: ['executed', 'execution_failed'], timeout_seconds: 20 });
      const body = result.structuredContent as { reached: boolean; timed_out: boolean; operation: { id: string; status: string } };
      expect(body).to.include({ reached: true, timed_out: false });
      expect(body.operation).to.include({ id, status: 'executed' });
    });

    it('returns timed_out with the last status when the timeout passes first', async () => {
      const id = await pay();
      const started = Date.now();
      const result = await call('agent_operations_wait_for_status', { operation_id: id, terminal_statuses: ['cancelled'], timeout_seconds: 0.3 });
      const body = result.structuredContent as { reached: boolean; timed_out: boolean; waited_ms: number; operation: { status: string } };
      expect(body).to.include({ reached: false, timed_out: true });
      expect(body.waited_ms).to.be.at.least(300);
      expect(Date.now() - started).to.be.below(5000);
      expect(['accepted', 'submitted', 'executed']).to.include(body.operation.status);
    });

    it('answers not_found for an operation of nobody and validation_failed for a bad status', async () => {
      const missing = await call('agent_operations_wait_for_status', { operation_id: '00000000-0000-4000-8000-000000000000', timeout_seconds: 1 });
      expect(missing.isError).to.equal(true);
      expect(JSON.parse((missing.content[0] as { text: string }).text).error.code).to.equal('not_found');
      const bad = await call('agent_operations_wait_for_status', { operation_id: '00000000-0000-4000-8000-000000000000', terminal_statuses: ['done'] });
      expect(JSON.parse((bad.content[0] as { text: string }).text).error.code).to.equal('validation_failed');
    });
  });

  describe('mcp_subscribe', () => {
    const eventsOf = (operationId: string) => notifications.filter((n) => n.method === 'notifications/agent_api/event' && n.params?.operation_id === operationId);
    const waitFor = async (check: () => boolean, ms = 10_000) => {
      for (const deadline = Date.now() + ms; !check() && Date.now() < deadline;) await sleep(50);
      return check();
    };

    it('delivers the agent events on the session stream as notifications/agent_api/event, then stops after mcp_unsubscribe', async () => {
      const subscribed = await call('mcp_subscribe', { event_types: ['payment.executed'] });
      expect(subscribed.structuredContent).to.deep.include({ ok: true, session_id: transport.sessionId, event_types: ['payment.executed'] });

      const id = await pay();
      expect(await waitFor(() => eventsOf(id).length > 0), 'event notification').to.equal(true);
      const event = eventsOf(id)[0]!.params!;
      expect(event).to.include({ type: 'payment.executed', agent_id: agent.agentId, wallet_id: agent.walletId, operation_id: id });
      expect(event).to.have.keys(['id', 'type', 'created_at', 'agent_id', 'wallet_id', 'operation_id', 'resource', 'data']);
      // The same envelope as the webhook outbox row.
      const row = await server.db('events').where({ id: event.id }).first('payload');
      expect(JSON.parse(row.payload)).to.deep.equal(event);

      const unsubscribed = await call('mcp_unsubscribe', {});
      expect(unsubscribed.structuredContent).to.deep.include({ event_types: [] });
      const next = await pay();
      await call('agent_operations_wait_for_status', { operation_id: next, terminal_statuses: ['executed'], timeout_seconds: 20 });
      await sleep(600);
      expect(eventsOf(next)).to.have.length(0);
    });

    it('needs a session: a stateless call is refused', async () => {
      const res = await postMcp(
        server,
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'mcp_subscribe', arguments: { event_types: ['payment.executed'] } } },
        { authorization: `Bearer ${token}` },
      );
      expect(res.status).to.equal(200);
      const result = (res.body as { result: CallToolResult }).result;
      expect(result.isError).to.equal(true);
      expect(JSON.parse((result.content[0] as { text: string }).text).error.code).to.equal('validation_failed');
    });
  });

  describe('sessions', () => {
    /** A raw session: initialize, then the initialized notification (which confirms it). */
    async function rawSession(bearer: string): Promise<string> {
      const init = await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` });
      expect(init.status, JSON.stringify(init.body)).to.equal(200);
      const id = init.headers.get('mcp-session-id');
      expect(id).to.match(/^[0-9a-f-]{36}$/);
      const ack = await postMcp(server, initialized, { authorization: `Bearer ${bearer}`, 'mcp-session-id': id! });
      expect(ack.status).to.equal(202);
      return id!;
    }
    const rawCall = (bearer: string, sessionId: string, name: string, args: Record<string, unknown>, id = 2) =>
      postMcp(server, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, { authorization: `Bearer ${bearer}`, 'mcp-session-id': sessionId });
    const openStream = (bearer: string, sessionId: string, lastEventId?: string) =>
      fetch(`${server.baseUrl}/mcp`, {
        headers: { authorization: `Bearer ${bearer}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      });
    const payOverHttp = async () => {
      const res = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: RECIPIENT, asset: 'USDC', amount: '1.25' } });
      expect(res.status, res.text).to.equal(200);
      return (res.body as { operation_id: string }).operation_id;
    };
    const settled = async (operationId: string) => {
      for (let i = 0; i < 200; i += 1) {
        const row = await server.db('operations').where({ id: operationId }).first('status');
        if (row?.status === 'executed') return;
        await sleep(50);
      }
      throw new Error(`operation ${operationId} did not settle`);
    };

    it('gives a session id on initialize, serves it, and answers 404 to an unknown id or another grant', async () => {
      const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const id = await rawSession(bearer);
      const listed = await postMcp(server, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { authorization: `Bearer ${bearer}`, 'mcp-session-id': id });
      expect(listed.status).to.equal(200);
      expect(listed.headers.get('mcp-session-id')).to.equal(id);
      expect((await postMcp(server, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { authorization: `Bearer ${bearer}`, 'mcp-session-id': '00000000-0000-4000-8000-000000000000' })).status).to.equal(
        404,
      );
      const other = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      expect((await postMcp(server, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, { authorization: `Bearer ${other}`, 'mcp-session-id': id })).status).to.equal(404);
    });

    it('opens an SSE stream on GET and resumes it with Last-Event-ID after a reconnect', async () => {
      const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const id = await rawSession(bearer);
      const sub = await rawCall(bearer, id, 'mcp_subscribe', { event_types: ['payment.executed'] });
      expect((sub.body as { result: CallToolResult }).result.isError).to.not.equal(true);

      const stream = await openStream(bearer, id);
      expect(stream.status).to.equal(200);
      expect(stream.headers.get('content-type')).to.match(/^text\/event-stream/);
      const first = await payOverHttp();
      const seen = await readSse(stream, (events) => events.some((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id === first));
      const firstEvent = seen.find((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id === first)!;
      expect(firstEvent, 'first event on the live stream').to.not.equal(undefined);
      expect((firstEvent.data as { method: string }).method).to.equal('notifications/agent_api/event');
      expect(firstEvent.id).to.be.a('string');

      // Disconnected: the next event is kept for the session and replayed after the cursor.
      const second = await payOverHttp();
      await settled(second);
      await sleep(500);
      const resumed = await openStream(bearer, id, firstEvent.id);
      expect(resumed.status).to.equal(200);
      const replayed = await readSse(resumed, (events) => events.some((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id === second));
      const ops = replayed.map((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id);
      expect(ops).to.include(second);
      expect(ops).to.not.include(first);
    });

    it('stops sending events once the grant is revoked, and closes the open stream', async () => {
      const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const id = await rawSession(bearer);
      expect((await rawCall(bearer, id, 'mcp_subscribe', { event_types: ['payment.executed'] })).status).to.equal(200);
      const stream = await openStream(bearer, id);
      expect(stream.status).to.equal(200);
      const grantId = (JSON.parse(Buffer.from(bearer.split('.')[1]!, 'base64url').toString('utf8')) as { gid: string }).gid;
      await server.db('oauth_grants').where({ id: grantId }).update({ revoked_at: server.clock.now(), revoked_reason: 'test' });
      await sleep(1100);
      const op = await payOverHttp();
      const seen = await readSse(stream, (events) => events.some((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id === op), 4000);
      expect(seen.map((e) => (e.data as { params?: { operation_id?: string } }).params?.operation_id)).to.not.include(op);
      expect(seen.closed, 'the stream was closed').to.equal(true);
      expect((await openStream(bearer, id)).status).to.equal(401);
    });

    it('ends the session on DELETE', async () => {
      const { client: mine, transport: t } = await connectSession(server, await mintAccessToken(server, agent, { scopes: ['agent:read'] }));
      const id = t.sessionId!;
      expect(id).to.be.a('string');
      await t.terminateSession();
      await mine.close();
      const after = await postMcp(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { authorization: `Bearer ${token}`, 'mcp-session-id': id });
      expect(after.status).to.equal(404);
    });

    it(`answers 429 with the error envelope past ${CAP} sessions of one grant, and makes room after a DELETE`, async () => {
      const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      const ids: string[] = [];
      for (let i = 0; i < CAP; i += 1) ids.push(await rawSession(bearer));
      const refused = await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` });
      expect(refused.status).to.equal(429);
      expect(refused.body).to.deep.include({ ok: false });
      expect((refused.body as { error: { code: string; details: Record<string, number> } }).error).to.deep.include({ code: 'rate_limited', details: { limit_count: CAP, attempted_count: CAP + 1 } });
      expect(Number(refused.headers.get('retry-after'))).to.be.at.least(1);

      const del = await fetch(`${server.baseUrl}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${bearer}`, 'mcp-session-id': ids[0]! } });
      expect(del.status).to.equal(200);
      expect((await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` })).status).to.equal(200);
    });

    it('keeps stateless use working: unconfirmed sessions make room, and POSTs without a session are served', async () => {
      const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
      for (let i = 0; i < CAP + 2; i += 1) expect((await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` })).status).to.equal(200);
      const res = await postMcp(server, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'agent_account_get', arguments: {} } }, { authorization: `Bearer ${bearer}` });
      expect(res.status).to.equal(200);
      expect(res.headers.get('mcp-session-id')).to.equal(null);
      const result = (res.body as { result: CallToolResult }).result;
      expect(result.isError).to.not.equal(true);
      expect(result.structuredContent).to.have.property('ok', true);
    });

    it('refuses header keys at /mcp', async () => {
      const res = await postMcp(server, initialize(), agent.headers);
      expect(res.status).to.equal(401);
      expect((res.body as { error: { code: string } }).error.code).to.equal('invalid_token');
    });
  });

  describe('MCP Inspector CLI', () => {
    it('lists the tools with exit 0 and no warnings, also under --strict', async () => {
      const bin = 'node_modules/.bin/mcp-inspector';
      for (const strict of [false, true]) {
        const args = [bin, '--cli', `${server.baseUrl}/mcp`, '--method', 'tools/list', '--header', `Authorization: Bearer ${token}`, ...(strict ? ['--strict'] : [])];
        const { stdout, stderr } = await run(process.execPath, args, { encoding: 'utf8', timeout: 45_000, maxBuffer: 64 * 1024 * 1024 });
        expect(stderr, `stderr${strict ? ' (--strict)' : ''}`).to.equal('');
        expect(stdout).to.not.match(/warn/i);
        const names = (JSON.parse(stdout) as { tools: { name: string }[] }).tools.map((t) => t.name);
        expect(names).to.have.length(tools.size);
        expect(names).to.include.members(['agent_balances_cash_list', 'agent_borrow_collateral_add_create', 'agent_account_get']);
      }
    });
  });

  describe('outputSchema coverage', () => {
    it('checked the structuredContent of every tool called above against its outputSchema', () => {
      expect(validated.size).to.be.at.least(25);
      expect([...validated]).to.include.members(['agent_payments_create', 'agent_operations_wait_for_status', 'mcp_subscribe', 'mcp_unsubscribe', 'agent_balances_cash_list']);
    });
  });
});

describe('MCP sessions: idle expiry', function () {
  this.timeout(30_000);
  let server: TestServer;
  before(async () => {
    server = await startMcpTestServer({ env: { MCP_SESSION_IDLE_MS: '1000' } });
  });
  after(() => server?.close());

  it('closes a session with no request and no stream for MCP_SESSION_IDLE_MS', async () => {
    const agent = await server.createAgent({ name: 'idle' });
    const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
    const init = await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` });
    const id = init.headers.get('mcp-session-id')!;
    const list = () => postMcp(server, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { authorization: `Bearer ${bearer}`, 'mcp-session-id': id });
    expect((await list()).status).to.equal(200);
    await sleep(600);
    expect((await list()).status, 'a request resets the idle clock').to.equal(200);
    await sleep(2200);
    expect((await list()).status).to.equal(404);
  });

  it('ends sessions and their open streams on shutdown (endMcpSessions, before the HTTP server closes)', async () => {
    const agent = await server.createAgent({ name: 'shutdown' });
    const bearer = await mintAccessToken(server, agent, { scopes: ['agent:read'] });
    const init = await postMcp(server, initialize(), { authorization: `Bearer ${bearer}` });
    const id = init.headers.get('mcp-session-id')!;
    const stream = await fetch(`${server.baseUrl}/mcp`, { headers: { authorization: `Bearer ${bearer}`, accept: 'text/event-stream', 'mcp-session-id': id } });
    expect(stream.status).to.equal(200);
    const reading = readSse(stream, () => false, 5000);
    await server.built.endMcpSessions();
    expect((await reading).closed).to.equal(true);
    expect((await postMcp(server, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { authorization: `Bearer ${bearer}`, 'mcp-session-id': id })).status).to.equal(404);
  });
});
