// Embedded mode (`npm start` with no DATABASE_URL/REDIS_URL): PGlite under DATA_DIR, a demo agent printed once.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKnex, migrateLatest } from '../../src/db/knex.js';
import { startServerProcess, type ServerProcess } from '../helpers/process.js';

const DEMO_LINE = /^demo agent: x-agent-id=([0-9a-f-]{36}) x-api-key=(\S+)$/;

describe('embedded mode', function () {
  this.timeout(240_000);
  let dataDir: string;
  let current: ServerProcess | null = null;
  const env = () => ({ DATABASE_URL: undefined, REDIS_URL: undefined, REDIS_PREFIX: undefined, MASTER_KEY: undefined, DATA_DIR: dataDir, NODE_ENV: 'development', LOG_LEVEL: 'warn' });

  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-embedded-'));
  });
  after(async () => {
    await current?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('boots on PGlite, prints the demo credentials once, and keeps them across a restart', async () => {
    current = await startServerProcess(env(), { timeoutMs: 90_000 });
    const demoLines = current.stdoutLines.filter((l) => l.startsWith('demo agent:'));
    expect(demoLines, current.stdoutLines.join('\n')).to.have.length(1);
    const [, agentId, apiKey] = DEMO_LINE.exec(demoLines[0]!) ?? [];
    expect(agentId, demoLines[0]).to.be.a('string');
    const headers = { 'x-agent-id': agentId!, 'x-api-key': apiKey! };

    const first = await fetch(`${current.baseUrl}/v1/agent/self`, { headers });
    const firstBody = (await first.json()) as { ok: boolean; agent: { id: string; name: string } };
    expect(first.status, JSON.stringify(firstBody)).to.equal(200);
    expect(firstBody.agent.id).to.equal(agentId);
    // The in-process limiter stands in for Redis.
    expect(first.headers.get('x-ratelimit-limit')).to.equal('600');
    const ready = await fetch(`${current.baseUrl}/readyz`);
    expect(ready.status).to.equal(200);
    expect(await ready.json()).to.deep.equal({ status: 'ready', checks: { database: 'ok' } });
    const wrongKey = await fetch(`${current.baseUrl}/v1/agent/self`, { headers: { ...headers, 'x-api-key': `${apiKey}x` } });
    expect(wrongKey.status).to.equal(401);
    await wrongKey.body?.cancel();
    expect(current.stderr()).to.contain('MASTER_KEY is not set');

    expect(await current.stop()).to.equal(0);
    current = null;

    current = await startServerProcess(env(), { timeoutMs: 90_000 });
    expect(
      current.stdoutLines.filter((l) => l.startsWith('demo agent:')),
      current.stdoutLines.join('\n'),
    ).to.have.length(0);
    const second = await fetch(`${current.baseUrl}/v1/agent/self`, { headers });
    const secondBody = (await second.json()) as { ok: boolean; agent: { id: string } };
    expect(second.status, JSON.stringify(secondBody)).to.equal(200);
    expect(secondBody.agent.id).to.equal(agentId);
    expect(await current.stop()).to.equal(0);
    current = null;
  });

  it('resolves delete() to the row count on PGlite, as on Postgres', async () => {
    const db = await createKnex({ databaseUrl: null, dataDir: join(dataDir, 'direct') });
    try {
      await migrateLatest(db);
      await db('owners').insert([
        { id: '00000000-0000-4000-8000-000000000001', email: 'one@example.com' },
        { id: '00000000-0000-4000-8000-000000000002', email: 'two@example.com' },
      ]);
      expect(await db('owners').whereIn('email', ['one@example.com', 'two@example.com']).delete()).to.equal(2);
      expect(await db('owners').where({ email: 'one@example.com' }).delete()).to.equal(0);
      expect(await db('owners').where({ email: 'none@example.com' }).update({ name: 'x' })).to.equal(0);
    } finally {
      await db.destroy();
    }
  });
});
