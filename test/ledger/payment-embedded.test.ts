// Payments on PGlite (embedded mode): the write path's statements that Postgres takes in one round trip (the policy
// lock with its usage sums, src/db/repositories/policy.repository.ts) are sent one at a time there, with the same
// answers: caps hold, the Idempotency-Key answer stored with the operation replays byte for byte.
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type BuiltApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { isEmbedded } from '../../src/db/knex.js';
import { createTestAgent } from '../support/agents.js';

describe('payments on PGlite', function () {
  this.timeout(180_000);
  let dataDir: string;
  let built: BuiltApp;
  let server: Server;
  let base: string;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-pay-embedded-'));
    built = await createApp(
      loadConfig({
        NODE_ENV: 'development',
        DATA_DIR: dataDir,
        MASTER_KEY: randomBytes(32).toString('hex'),
        AUTO_MIGRATE: 'true',
        LOG_LEVEL: 'warn',
        RUN_WORKER: 'false',
        BASE_URL: 'http://127.0.0.1:3000',
        SMTP_URL: 'smtp://127.0.0.1:2525',
      }),
    );
    server = createServer(built.listener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await built?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('accepts payments up to the count and lifetime caps, refuses the next, and replays an answer byte for byte', async () => {
    expect(isEmbedded(built.db), 'the app runs on PGlite').to.equal(true);
    const agent = await createTestAgent(
      { db: built.db, agents: built.services.agents, ledger: built.services.ledger },
      { policy: { operation_types: ['payment'], allowed_recipients: 'all', max_txs_per_period: 3, lifetime_usd: '100' }, fund: { USDC: '10' } },
    );
    const headers = { 'x-agent-id': agent.agentId, 'x-api-key': agent.apiKey, 'content-type': 'application/json' };
    const pay = async (key: string, amount = '1') => {
      const res = await fetch(`${base}/v1/agent/payments`, {
        method: 'POST',
        headers: { ...headers, 'idempotency-key': key },
        body: JSON.stringify({ to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount }),
      });
      return { status: res.status, text: await res.text(), replayed: res.headers.get('x-idempotency-replayed') };
    };
    const first = await pay('k-1');
    expect(first.status, first.text).to.equal(200);
    const replay = await pay('k-1');
    expect(replay.text).to.equal(first.text);
    expect(replay.replayed).to.equal('true');
    expect((await pay('k-short', '50')).text).to.contain('insufficient_funds');
    expect((await pay(randomUUID())).status).to.equal(200);
    expect((await pay(randomUUID())).status).to.equal(200);
    const fourth = await pay(randomUUID());
    expect(fourth.status).to.equal(403);
    expect(fourth.text).to.contain('max_txs_per_period');
  });
});
