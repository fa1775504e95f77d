// /v1/agent is handed to the API's own app before the site's routes are walked (apiFirst in src/http/http-server.ts),
// with metrics and tracing on or off. It must answer byte for byte as the site's own mount does: the same requests go
// to a server taking the direct way and to one with METRICS_PORT set listening with the site alone (Express's router),
// and status, body and headers are compared with only the values that differ per request (request id, dates,
// rate-limit figures) masked.
import { expect } from 'chai';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiFirst } from '../../src/http/http-server.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

const VARYING = new Set(['x-request-id', 'date', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'keep-alive', 'connection']);

interface Seen {
  status: number;
  headers: [string, string][];
  text: string;
}

describe('the /v1/agent entry without the router', () => {
  let direct: TestServer;
  let routed: TestServer;
  let a: TestAgent;
  let b: TestAgent;

  before(async () => {
    direct = await startTestServer();
    routed = await startTestServer({ env: { METRICS_PORT: '0' } });
    // The site alone, as a listener: /v1/agent through Express's router and the site's mount.
    routed.server.removeAllListeners('request');
    routed.server.on('request', routed.built.app);
    a = await direct.createAgent({ fund: { USDC: '100' } });
    b = await routed.createAgent({ fund: { USDC: '100' } });
  });
  after(async () => {
    await direct?.close();
    await routed?.close();
  });

  /** One raw request (node fetch keeps the header order the server wrote), ids of the agent masked. */
  async function send(server: TestServer, agent: TestAgent | null, method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Seen> {
    const headers: Record<string, string> = { ...(agent?.headers ?? {}), ...(init.headers ?? {}) };
    const res = await fetch(`${server.baseUrl}${path}`, { method, headers, body: init.body });
    // Ids, addresses and times are each server's own.
    const mask = (s: string) =>
      s
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
        .replace(/0x[0-9a-fA-F]{40}/g, '<address>')
        .replace(/wal_[0-9a-f]+/g, '<wallet>')
        .replace(/"next_cursor":"[^"]+"/g, '"next_cursor":"<cursor>"')
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>');
    const text = mask(await res.text());
    return { status: res.status, headers: [...res.headers.entries()].filter(([k]) => !VARYING.has(k)).map(([k, v]) => [k, mask(v)]), text };
  }

  const cases: { name: string; method: string; path: string; auth: boolean; headers?: Record<string, string>; body?: unknown }[] = [
    { name: 'GET /self', method: 'GET', path: '/v1/agent/self', auth: true },
    { name: 'GET /balances', method: 'GET', path: '/v1/agent/balances', auth: true },
    { name: 'GET /balances?limit=2', method: 'GET', path: '/v1/agent/balances?limit=2', auth: true },
    { name: 'a bad query', method: 'GET', path: '/v1/agent/balances?limit=0', auth: true },
    { name: 'no credentials', method: 'GET', path: '/v1/agent/self', auth: false },
    { name: 'unknown route', method: 'GET', path: '/v1/agent/nope', auth: true },
    { name: 'the mount itself', method: 'GET', path: '/v1/agent', auth: true },
    { name: 'the mount with a query', method: 'GET', path: '/v1/agent?x=1', auth: true },
    { name: 'method not allowed', method: 'DELETE', path: '/v1/agent/self', auth: true },
    { name: 'HEAD', method: 'HEAD', path: '/v1/agent/self', auth: true },
    { name: 'If-None-Match: *', method: 'GET', path: '/v1/agent/self', auth: true, headers: { 'if-none-match': '*' } },
    { name: 'the public document', method: 'GET', path: '/v1/agent/openapi.json', auth: false },
    { name: 'malformed JSON', method: 'POST', path: '/v1/agent/payments', auth: true, headers: { 'content-type': 'application/json', 'idempotency-key': 'k-malformed' }, body: '{"to":' },
    {
      name: 'a refused payment',
      method: 'POST',
      path: '/v1/agent/payments',
      auth: true,
      headers: { 'content-type': 'application/json' },
      body: { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1000' },
    },
  ];

  for (const c of cases) {
    it(`answers ${c.name} as Express's router does`, async () => {
      const body = c.body === undefined ? undefined : typeof c.body === 'string' ? c.body : JSON.stringify(c.body);
      const headers = { ...(c.headers ?? {}), ...(c.method === 'POST' && !c.headers?.['idempotency-key'] ? { 'idempotency-key': newKey() } : {}) };
      const [x, y] = await Promise.all([send(direct, c.auth ? a : null, c.method, c.path, { headers, body }), send(routed, c.auth ? b : null, c.method, c.path, { headers, body })]);
      expect(x).to.deep.equal(y);
    });
  }

  it("writes JSON as Express's res.json does: its Content-Type and the byte length", async () => {
    const self = await fetch(`${direct.baseUrl}/v1/agent/self`, { headers: { ...a.headers, 'x-note': 'ü' } });
    const fallback = await fetch(`${direct.baseUrl}/nope`);
    const text = await self.text();
    expect(self.headers.get('content-type')).to.equal(fallback.headers.get('content-type')).and.equal('application/json; charset=utf-8');
    expect(self.headers.get('content-length')).to.equal(String(Buffer.byteLength(text)));
  });

  it('takes the direct way with metrics and tracing on too: /v1/agent to the API app, other spellings to the site', () => {
    expect(direct.built.listener.name).to.equal('apiFirstListener');
    // With METRICS_PORT set the app listens the same way (this test then swapped in the site alone).
    expect(routed.built.listener.name).to.equal('apiFirstListener');
    const seen: string[] = [];
    const listener = apiFirst(
      (req) => seen.push(`api ${req.url}`),
      (req) => seen.push(`site ${req.url}`),
    );
    for (const url of ['/v1/agent', '/v1/agent/self', '/v1/agent?x=1', '/V1/AGENT/self', '/v1/agentx', '/healthz']) listener({ url } as IncomingMessage, {} as ServerResponse);
    expect(seen).to.deep.equal(['api /v1/agent', 'api /v1/agent/self', 'api /v1/agent?x=1', 'site /V1/AGENT/self', 'site /v1/agentx', 'site /healthz']);
  });

  it('leaves other spellings of the mount to Express, answering as before', async () => {
    for (const path of ['/V1/AGENT/self', '/v1/agent//self', '/v1/agentx']) {
      const [x, y] = await Promise.all([send(direct, a, 'GET', path), send(routed, b, 'GET', path)]);
      expect(x, path).to.deep.equal(y);
    }
  });
});
