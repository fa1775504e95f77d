// MCP sessions across API replicas (issue 30 item 7): two apps on the same Postgres and Redis, no sticky routing. A session
// opened on A is served by B, its subscription relays on whichever holds the stream, and a GET on B with Last-Event-ID
// replays what A sent; DELETE on one ends it on both.
import { expect } from 'chai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createDemoAgent, newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { mintAccessToken, postMcp, readSse, startMcpTestServer } from './helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const RECIPIENT = '0x1111111111111111111111111111111111111111';
const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'replica-test', version: '1.0.0' } } };
type Sse = { id?: string; data: unknown };
const operationOf = (e: Sse) => (e.data as { params?: { operation_id?: string } }).params?.operation_id;

describe('MCP sessions across replicas', function () {
  this.timeout(60_000);
  let a: TestServer;
  let b: TestServer;
  let agent: TestAgent;
  let bearer: string;

  before(async () => {
    a = await startMcpTestServer({ worker: true, env: { SETTLEMENT_DELAY_MS: '200', MCP_EVENT_POLL_MS: '100' } });
    // B is another replica of the same deployment: one BASE_URL (token audience), one database, one Redis prefix.
    b = await startTestServer({ env: { BASE_URL: a.config.baseUrl, REDIS_PREFIX: a.config.redisPrefix, MCP_EVENT_POLL_MS: '100' } });
    agent = await createDemoAgent(a);
    bearer = await mintAccessToken(a, agent, { scopes: [...ALL_SCOPES] });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  const post = (server: TestServer, body: unknown, sessionId?: string) => postMcp(server, body, { authorization: `Bearer ${bearer}`, ...(sessionId ? { 'mcp-session-id': sessionId } : {}) });
  const tool = async (server: TestServer, sessionId: string, name: string, args: Record<string, unknown>) => {
    const res = await post(server, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: args } }, sessionId);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.headers.get('mcp-session-id')).to.equal(sessionId);
    const result = (res.body as { result: CallToolResult }).result;
    expect(result.isError, JSON.stringify(result)).to.not.equal(true);
    return result.structuredContent as Record<string, unknown>;
  };
  const stream = (server: TestServer, sessionId: string, lastEventId?: string) =>
    fetch(`${server.baseUrl}/mcp`, {
      headers: { authorization: `Bearer ${bearer}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    });
  const pay = async () => {
    const res = await a.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: RECIPIENT, asset: 'USDC', amount: '1.25' } });
    expect(res.status, res.text).to.equal(200);
    return (res.body as { operation_id: string }).operation_id;
  };

  it('serves a session opened on A from B, resumes A’s events on B with Last-Event-ID, and ends it on both', async () => {
    const init = await post(a, initialize);
    expect(init.status).to.equal(200);
    const id = init.headers.get('mcp-session-id')!;
    expect((await post(a, { jsonrpc: '2.0', method: 'notifications/initialized' }, id)).status).to.equal(202);

    // B never saw the initialize: it rebuilds the session from Redis and serves a tool call and the subscription.
    const listed = await post(b, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, id);
    expect(listed.status).to.equal(200);
    expect((listed.body as { result: { tools: unknown[] } }).result.tools.length).to.be.greaterThan(10);
    expect(await tool(b, id, 'mcp_subscribe', { event_types: ['payment.executed'] })).to.deep.include({ session_id: id, event_types: ['payment.executed'] });

    // The stream opened on A relays the subscription made on B; both events are sent (and stored) on A.
    const first = await pay();
    const second = await pay();
    const onA = await readSse(await stream(a, id), (events) => [first, second].every((op) => events.some((e) => operationOf(e) === op)), 15_000);
    const firstEvent = onA.find((e) => operationOf(e) === first);
    expect(firstEvent?.id, 'first event on A').to.be.a('string');
    expect(
      onA.some((e) => operationOf(e) === second),
      'second event on A',
    ).to.equal(true);

    // The client lost the second one: B replays it from the shared history, after the cursor only.
    const resumed = await stream(b, id, firstEvent!.id);
    expect(resumed.status).to.equal(200);
    const third = await pay();
    const onB = await readSse(resumed, (events) => [second, third].every((op) => events.some((e) => operationOf(e) === op)), 15_000);
    const ops = onB.map(operationOf);
    expect(ops, 'replayed from A’s history').to.include(second);
    expect(ops, 'relayed live on B').to.include(third);
    expect(ops).to.not.include(first);

    // DELETE on B ends it for A too.
    const del = await fetch(`${b.baseUrl}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${bearer}`, 'mcp-session-id': id } });
    expect(del.status).to.equal(200);
    await sleep(50);
    expect((await post(a, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, id)).status).to.equal(404);
  });

  it('counts a grant’s sessions across replicas for the cap', async () => {
    const grant = await mintAccessToken(a, agent, { scopes: ['agent:read'] });
    const open = async (server: TestServer) => postMcp(server, initialize, { authorization: `Bearer ${grant}` });
    const ids: string[] = [];
    for (let i = 0; i < 8; i += 1) {
      const res = await open(i % 2 ? b : a);
      expect(res.status).to.equal(200);
      ids.push(res.headers.get('mcp-session-id')!);
      // Confirmed sessions are never evicted to make room.
      expect((await postMcp(i % 2 ? a : b, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { authorization: `Bearer ${grant}`, 'mcp-session-id': ids[i]! })).status).to.equal(200);
    }
    const refused = await open(b);
    expect(refused.status).to.equal(429);
    expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
  });
});
