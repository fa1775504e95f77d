// Earn on PGlite (embedded mode): the deposit's one-statement mint (vault, position, operation details and event) and
// the balance-row locks taken before a vault row run there as on Postgres.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type BuiltApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { isEmbedded } from '../../src/db/knex.js';
import { isRefusal } from '../../src/lib/refusal.js';
import { createTestAgent } from '../support/agents.js';

describe('earn on PGlite', function () {
  this.timeout(180_000);
  let dataDir: string;
  let built: BuiltApp;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-earn-embedded-'));
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
  });
  after(async () => {
    await built?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('mints a deposit into its position, its operation and its event, and withdraws it all', async () => {
    expect(isEmbedded(built.db), 'the app runs on PGlite').to.equal(true);
    const { db, services } = built;
    const agent = await createTestAgent({ db, agents: services.agents, ledger: services.ledger }, { policy: 'all', fund: { USDC: '100' }, fundVia: 'deposit' });
    const who = { agentId: agent.agentId, walletId: agent.walletId };
    const vault = await services.defi.earn.addVault(db, { name: 'embedded vault', protocol: 'morpho', asset: 'USDC', apyBps: 500, capacity: null, rewardAsset: 'USDC', rewardBps: 100 });
    const deposits = [];
    for (const amount of ['10', '2.5']) {
      const r = await services.defi.earn.deposit(db, who, { asset: 'USDC', vault_id: vault.vault_id, amount }, `embedded-${amount}`);
      if (isRefusal(r)) throw new Error('refused');
      deposits.push(r);
    }
    const ops = await db('operations')
      .whereIn(
        'id',
        deposits.map((d) => d.operation_id),
      )
      .orderBy('created_at');
    expect(ops.map((o) => o.details.shares)).to.deep.equal(['10000000000000', '2500000000000']);
    const events = await db('events')
      .whereIn(
        'operation_id',
        deposits.map((d) => d.operation_id),
      )
      .where({ type: 'earn.deposit.executed' });
    expect(events.map((e) => JSON.parse(e.payload).data.operation.status)).to.deep.equal(['executed', 'executed']);
    const position = await db('earn_positions').where({ wallet_id: who.walletId, vault_id: vault.vault_id }).first();
    expect([position.shares, position.principal]).to.deep.equal(['12500000000000', '12500000']);
    const out = await services.defi.earn.withdraw(db, who, { position_id: position.id, withdraw_all: true }, 'embedded-out');
    expect(isRefusal(out)).to.equal(false);
    expect((await services.ledger.ledger.balance(db, who.walletId, 'USDC')).available).to.equal(100_000_000n);
  });
});
