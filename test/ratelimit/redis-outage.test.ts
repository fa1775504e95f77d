// Redis going silent (a partition, not a refusal): writes answer 503 with Retry-After within 5 s,
// reads fall back to the in-process limiter, and both recover when Redis answers again.
import { expect } from 'chai';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { testEnv } from '../setup.js';

describe('rate limiting when Redis goes silent', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    const redisUrl = new URL(testEnv.redisUrl);
    proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    server = await startTestServer({ env: { REDIS_URL: proxy.rewrite(testEnv.redisUrl) } });
    agent = await server.createAgent();
  });
  after(async () => {
    await proxy.setMode('pass');
    await server.close();
    await proxy.close();
  });

  const write = () => server.request('POST', '/v1/agent/webhooks', { agent, idempotencyKey: newKey(), body: { url: 'https://example.com/hook', event_types: ['payment.executed'] } });

  it('refuses writes with 503 within 5 s and serves reads, then recovers when Redis answers again', async function () {
    this.timeout(40_000);
    expect((await server.request('GET', '/v1/agent/self', { agent })).status).to.equal(200);
    await proxy.setMode('blackhole');
    const started = Date.now();
    const refused = await write();
    expect(Date.now() - started, 'write latency').to.be.below(5_000);
    expect(refused.status, refused.text).to.equal(503);
    expect(refused.body.error.code).to.equal('service_unavailable');
    expect(Number(refused.headers.get('retry-after'))).to.be.at.least(1);
    const readStarted = Date.now();
    const read = await server.request('GET', '/v1/agent/self', { agent });
    expect(Date.now() - readStarted, 'read latency').to.be.below(5_000);
    expect(read.status, read.text).to.equal(200);
    await proxy.setMode('pass');
    const deadline = Date.now() + 20_000;
    let last = await write();
    while (last.status === 503 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      last = await write();
    }
    expect(last.status, last.text).to.be.below(500);
  });
});
