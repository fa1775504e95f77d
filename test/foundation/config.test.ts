// Configuration (contract §15) and the health endpoints, including Redis unreachable.
import { expect } from 'chai';
import { ConfigError, listenUrl, loadConfig } from '../../src/config.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const PROD_OK = {
  NODE_ENV: 'production',
  BASE_URL: 'https://api.example.com',
  DATABASE_URL: 'postgres://u@db.example.com/agent',
  REDIS_URL: 'redis://cache.example.com:6379',
  MASTER_KEY: 'k'.repeat(40),
  SMTP_URL: 'smtp://mail.example.com:587',
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env, () => {});
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  expect.fail('loadConfig accepted an invalid environment');
}

describe('loadConfig', () => {
  it('lists every problem in one ConfigError when several variables are bad', () => {
    const problems = problemsOf({ PORT: 'eighty', RUN_WORKER: 'maybe', DATABASE_URL: 'mysql://x/y', LOG_LEVEL: 'loud', NODE_ENV: 'staging', MASTER_KEY: 'short' });
    expect(problems).to.have.length(6);
    for (const name of ['PORT', 'RUN_WORKER', 'DATABASE_URL', 'LOG_LEVEL', 'NODE_ENV', 'MASTER_KEY']) {
      expect(
        problems.some((p) => p.startsWith(name)),
        `a problem naming ${name}`,
      ).to.equal(true);
    }
    // The message lists them all too (it is what the server prints before exiting).
    try {
      loadConfig({ PORT: 'eighty', RUN_WORKER: 'maybe' }, () => {});
    } catch (err) {
      expect((err as Error).message)
        .to.contain('PORT')
        .and.to.contain('RUN_WORKER');
    }
  });

  it('treats empty and blank strings as unset', () => {
    const warnings: string[] = [];
    const config = loadConfig({ PORT: '', DATABASE_URL: '', REDIS_URL: '  ', MASTER_KEY: '', RUN_WORKER: '', LOG_LEVEL: '', NODE_ENV: '', SMTP_URL: '' }, (m) => warnings.push(m));
    expect(config.port).to.equal(3000);
    expect(config.databaseUrl).to.equal(null);
    expect(config.redisUrl).to.equal(null);
    expect(config.runWorker).to.equal(true);
    expect(config.nodeEnv).to.equal('development');
    expect(config.smtpUrl).to.equal(null);
    expect(warnings.some((w) => w.includes('MASTER_KEY'))).to.equal(true);
  });

  it('accepts a complete production environment and freezes the result', () => {
    const config = loadConfig(PROD_OK, () => expect.fail('no warning expected in a complete production environment'));
    expect(config.nodeEnv).to.equal('production');
    expect(config.validateResponses).to.equal(false);
    expect(Object.isFrozen(config)).to.equal(true);
  });

  it('refuses to start in production without secrets or stores', () => {
    const problems = problemsOf({ NODE_ENV: 'production', MASTER_KEY: '', DATABASE_URL: '' });
    for (const name of ['MASTER_KEY', 'DATABASE_URL', 'REDIS_URL', 'BASE_URL']) {
      expect(
        problems.some((p) => p.startsWith(name)),
        `a problem naming ${name}`,
      ).to.equal(true);
    }
  });

  it('refuses to start in production without SMTP_URL, and keeps codes in the log in development', () => {
    const { SMTP_URL: _smtp, ...withoutSmtp } = PROD_OK;
    const problems = problemsOf(withoutSmtp);
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^SMTP_URL is required in production/);
    const development = loadConfig({ MASTER_KEY: 'k'.repeat(40) }, () => {});
    expect(development.smtpUrl).to.equal(null);
  });

  it('defaults BASE_URL to the address the server prints for HOST and PORT', () => {
    expect(loadConfig({ MASTER_KEY: 'k'.repeat(40) }, () => {}).baseUrl).to.equal('http://127.0.0.1:3000');
    expect(loadConfig({ MASTER_KEY: 'k'.repeat(40), HOST: '::1', PORT: '4000' }, () => {}).baseUrl).to.equal('http://[::1]:4000');
    expect(loadConfig({ MASTER_KEY: 'k'.repeat(40), HOST: '0.0.0.0' }, () => {}).baseUrl).to.equal('http://localhost:3000');
    expect(listenUrl('127.0.0.1', 3000)).to.equal('http://127.0.0.1:3000');
    expect(loadConfig({ ...PROD_OK }, () => {}).baseUrl).to.equal('https://api.example.com');
  });

  it('bounds every database wait by default (a request fails within 5 s) and checks the bounds given', () => {
    const { db } = loadConfig(PROD_OK, () => {});
    expect(db).to.deep.equal({ connectTimeoutMs: 5_000, acquireTimeoutMs: 4_000, statementTimeoutMs: 3_000, queryTimeoutMs: 3_500 });
    expect(Math.max(db.acquireTimeoutMs, db.queryTimeoutMs)).to.be.below(5_000);
    expect(loadConfig({ ...PROD_OK, DB_STATEMENT_TIMEOUT_MS: '0', DB_QUERY_TIMEOUT_MS: '0' }, () => {}).db).to.include({ statementTimeoutMs: 0, queryTimeoutMs: 0 });
    const problems = problemsOf({ ...PROD_OK, DB_STATEMENT_TIMEOUT_MS: '5000', DB_QUERY_TIMEOUT_MS: '4000', DB_ACQUIRE_TIMEOUT_MS: 'soon' });
    expect(problems).to.have.length(2);
    expect(problems.join('\n')).to.include('DB_QUERY_TIMEOUT_MS must exceed DB_STATEMENT_TIMEOUT_MS').and.include('DB_ACQUIRE_TIMEOUT_MS');
  });

  it('refuses UNSAFE_ALLOW_LOOPBACK_TARGETS in production and only warns in development', () => {
    const problems = problemsOf({ ...PROD_OK, UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' });
    expect(problems).to.have.length(1);
    expect(problems[0]).to.contain('UNSAFE_ALLOW_LOOPBACK_TARGETS');
    const warnings: string[] = [];
    const config = loadConfig({ UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true', MASTER_KEY: 'k'.repeat(40) }, (m) => warnings.push(m));
    expect(config.unsafeAllowLoopbackTargets).to.equal(true);
    expect(warnings.some((w) => w.includes('UNSAFE_ALLOW_LOOPBACK_TARGETS'))).to.equal(true);
  });
});

describe('getHealth and getReadiness', () => {
  describe('with Postgres and Redis up', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer();
    });
    after(async () => {
      await server?.close();
    });

    it('answers /healthz 200 and /readyz 200 with both checks ok', async () => {
      const health = await server.request('GET', '/healthz');
      expect(health.status).to.equal(200);
      expect(health.body).to.deep.equal({ status: 'ok' });
      const ready = await server.request('GET', '/readyz');
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.equal({ status: 'ready', checks: { database: 'ok', redis: 'ok' } });
    });
  });

  describe('with Redis unreachable', () => {
    let server: TestServer;
    before(async function () {
      this.timeout(30_000);
      server = await startTestServer({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
    });
    after(async () => {
      await server?.close();
    });

    it('answers /readyz 503 naming redis down while /healthz stays 200', async () => {
      const ready = await server.request('GET', '/readyz');
      expect(ready.status).to.equal(503);
      expect(ready.body).to.deep.equal({ status: 'unavailable', checks: { database: 'ok', redis: 'down' } });
      expect((await server.request('GET', '/healthz')).status).to.equal(200);
    });

    it('refuses writes with 503 service_unavailable and Retry-After, without hanging', async () => {
      const agent = await server.createAgent();
      const started = Date.now();
      const res = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url: 'https://example.com/hook', event_types: ['payment.executed'] }, idempotencyKey: 'redis-down-1' });
      expect(res.status).to.equal(503);
      expect(res.body.ok).to.equal(false);
      expect(res.body.error.code).to.equal('service_unavailable');
      expect(Number(res.headers.get('retry-after'))).to.be.at.least(1);
      expect(Date.now() - started).to.be.below(5_000);
      const simulate = await server.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: {} } });
      expect(simulate.status).to.equal(503);
      expect(simulate.body.error.code).to.equal('service_unavailable');
    });

    it('serves reads from the in-process limiter, still enforcing the limit', async () => {
      const agent = await server.createAgent();
      await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'read', limit: 3, burst: 3, windowSeconds: 60 });
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await server.request('GET', '/v1/agent/self', { agent });
        statuses.push(res.status);
        if (i === 0) {
          expect(res.body.agent.id).to.equal(agent.agentId);
          expect(res.headers.get('x-ratelimit-limit')).to.equal('3');
        }
      }
      expect(statuses).to.deep.equal([200, 200, 200, 429, 429]);
    });
  });
});
