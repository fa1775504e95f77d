// Postgres outages (issue 10 items 1 and 2): refused, reset, terminated and silently dropped
// connections answer 503 service_unavailable with Retry-After within the configured bounds, and the
// pool recovers on its own. A TCP proxy stands in for the network; the shared Postgres is untouched.
import { expect } from 'chai';
import pg from 'pg';
import { isDatabaseUnavailable } from '../../src/db/unavailable.js';
import { toApiError } from '../../src/http/error-mapping.js';
import { startTestServer, newKey, type TestAgent, type TestServer } from '../helpers/server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { testEnv } from '../setup.js';

describe('database outage', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    const pgUrl = new URL(testEnv.databaseUrl);
    proxy = await startTcpProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
    server = await startTestServer({ env: { DATABASE_URL: proxy.rewrite(testEnv.databaseUrl) } });
    agent = await server.createAgent();
  });
  afterEach(() => proxy.setMode('pass'));
  after(async () => {
    await proxy.setMode('pass');
    await server.close();
    await proxy.close();
  });

  /** One read and one write, timed. */
  const probe = async () => {
    const started = Date.now();
    const read = await server.request('GET', '/v1/agent/self', { agent });
    const readMs = Date.now() - started;
    const write = await server.request('POST', '/v1/agent/webhooks', { agent, idempotencyKey: newKey(), body: { url: 'https://example.com/hook', event_types: ['payment.executed'] } });
    return { read, write, readMs, writeMs: Date.now() - started - readMs };
  };

  const expectUnavailable = (res: Awaited<ReturnType<TestServer['request']>>) => {
    expect(res.status, res.text).to.equal(503);
    expect(res.body.error.code).to.equal('service_unavailable');
    expect(Number(res.headers.get('retry-after'))).to.be.at.least(1);
    expect(res.headers.get('x-request-id')).to.be.a('string');
  };

  const waitForRecovery = async () => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const res = await server.request('GET', '/v1/agent/self', { agent });
      if (res.status === 200) return;
      if (Date.now() > deadline) throw new Error(`no recovery: ${res.status} ${res.text}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  for (const [mode, condition] of [
    ['refuse', 'Postgres refuses connections'],
    ['reset', 'connections are reset'],
  ] as const) {
    it(`answers 503 service_unavailable with Retry-After to reads and writes when ${condition}`, async () => {
      expect((await server.request('GET', '/v1/agent/self', { agent })).status).to.equal(200);
      await proxy.setMode(mode);
      const { read, write } = await probe();
      expectUnavailable(read);
      expectUnavailable(write);
      await proxy.setMode('pass');
      await waitForRecovery();
    });
  }

  it('fails within 5 s with 503 when the network silently drops packets, and recovers without a restart', async function () {
    this.timeout(40_000);
    // A pooled connection exists (it goes silent mid-request), then new connections hang in their handshake.
    expect((await server.request('GET', '/v1/agent/self', { agent })).status).to.equal(200);
    await proxy.setMode('blackhole');
    for (let i = 0; i < 2; i++) {
      const { read, write, readMs, writeMs } = await probe();
      expectUnavailable(read);
      expectUnavailable(write);
      expect(readMs, 'read latency').to.be.below(5_000);
      expect(writeMs, 'write latency').to.be.below(5_000);
    }
    await proxy.setMode('pass');
    await waitForRecovery();
    const write = await server.request('POST', '/v1/agent/webhooks', { agent, idempotencyKey: newKey(), body: { url: 'https://example.com/hook', event_types: ['payment.executed'] } });
    expect(write.status, write.text).to.be.oneOf([200, 201]);
  });

  it('classifies a connection the server terminates (57P01) as unavailable, answered 503', async () => {
    const victim = new pg.Client({ connectionString: testEnv.databaseUrl, application_name: `outage-${newKey()}` });
    victim.on('error', () => undefined);
    await victim.connect();
    const admin = new pg.Client({ connectionString: testEnv.databaseUrl });
    await admin.connect();
    try {
      const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const running = victim.query('SELECT pg_sleep(30)').then(
        () => null,
        (err: unknown) => err,
      );
      await new Promise((r) => setTimeout(r, 100));
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      const err = (await running) as { code?: string } | null;
      expect(err?.code).to.equal('57P01');
      expect(isDatabaseUnavailable(err)).to.equal(true);
      expect(toApiError(err)?.status).to.equal(503);
      // A query error is not an outage.
      const syntax = await admin.query('SELEC 1').then(
        () => null,
        (e: unknown) => e,
      );
      expect(isDatabaseUnavailable(syntax)).to.equal(false);
      expect(toApiError(syntax)).to.equal(null);
    } finally {
      await victim.end().catch(() => undefined);
      await admin.end();
    }
  });
});
