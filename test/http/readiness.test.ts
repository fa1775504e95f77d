// getReadiness: one entry per named dependency check, 503 naming what is down, and 503 `draining` after SIGTERM.
import { expect } from 'chai';
import { startTestServer } from '../helpers/server.js';

describe('getReadiness', () => {
  it('answers 503 draining once the process starts draining, with checks still reported, while /healthz stays 200', async () => {
    const server = await startTestServer();
    try {
      expect((await server.request('GET', '/readyz')).status).to.equal(200);
      server.built.startDraining();
      const ready = await server.request('GET', '/readyz');
      expect(ready.status).to.equal(503);
      expect(ready.body).to.deep.equal({ status: 'draining', checks: { database: 'ok', redis: 'ok' } });
      expect((await server.request('GET', '/healthz')).status).to.equal(200);
    } finally {
      await server.close();
    }
  });

  it('answers 503 naming the database and Redis down when neither is reachable, within the check timeout', async function () {
    this.timeout(30_000);
    const server = await startTestServer({ env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      const started = Date.now();
      const ready = await server.request('GET', '/readyz');
      expect(ready.status).to.equal(503);
      expect(ready.body).to.deep.equal({ status: 'unavailable', checks: { database: 'down', redis: 'down' } });
      // Checks run concurrently under one 2 s timeout each.
      expect(Date.now() - started).to.be.below(5_000);
    } finally {
      await server.close();
    }
  });
});
