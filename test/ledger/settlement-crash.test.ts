// Issue 31, acceptance 2: the worker process (scripts/worker.ts, what `npm run worker` runs) is SIGKILLed in the middle
// of a settlement batch ten times; afterwards every operation is terminal exactly once: one terminal transition, its
// holds resolved once, one journal entry moving each, one terminal activity row and one event, the books balanced.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';
import { cloneTemplateDatabase } from '../setup.js';
import { createTestAgent } from '../support/agents.js';
import { createTestCore, type TestCore } from '../support/core.js';
import { addr, assertBooksBalance, MASTER_KEY } from './factory.js';

const KILLS = 10;
const PER_ROUND = 240;

describe('batch settlement: crash safety', function () {
  this.timeout(600_000);
  let database: Awaited<ReturnType<typeof cloneTemplateDatabase>>;
  let core: TestCore;
  let worker: ChildProcess | null = null;

  before(async () => {
    database = await cloneTemplateDatabase('settlecrash');
    core = await createTestCore({ env: { MASTER_KEY, DATABASE_URL: database.url, SETTLEMENT_DELAY_MS: '0' } });
  });
  after(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
    await core?.close();
    await database?.drop();
  });

  /** The worker process with small batches (many batches per round, so a kill lands inside one). */
  function startWorker(): ChildProcess {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv({ DATABASE_URL: database.url, MASTER_KEY, SETTLEMENT_DELAY_MS: '0', SETTLEMENT_BATCH_SIZE: '20' }) };
    return spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts'], { cwd: repoRoot, env, stdio: ['ignore', 'ignore', 'inherit'] });
  }

  it(`ends every operation terminal exactly once across ${KILLS} SIGKILLs of the worker mid-batch`, async () => {
    const agents: { agentId: string; walletId: string; address: string }[] = [];
    for (let i = 0; i < 4; i++) {
      const a = await createTestAgent({ db: core.db, agents: core.services.agents, ledger: core.services.ledger }, { name: `crash ${i}`, policy: 'all', fund: { USDC: '100000' } });
      const { address } = await core.db('wallets').where({ id: a.walletId }).first('address');
      agents.push({ ...a, address: address as string });
    }
    const failing = addr(0xdead);
    await core.services.ledger.ledger.setFailingAddress(core.db, failing, true);
    const { payments } = core.services.ledger;
    const ids: string[] = [];
    const monitor = new pg.Client({ connectionString: database.url });
    await monitor.connect();
    try {
      for (let round = 0; round < KILLS; round++) {
        // A backlog: payments to the other agents, out of the ledger, to a failing address, and one-off payments.
        await Promise.all(
          Array.from({ length: 8 }, async (_, lane) => {
            for (let n = lane; n < PER_ROUND; n += 8) {
              const payer = agents[n % 4]!;
              const kind = n % 10;
              const res =
                kind === 9
                  ? await payments.createOneOffPayment(core.db, payer, { to: addr(0x0ff), asset: 'USDC', amount: '0.02', unlock_delay_seconds: 0, expires_in_seconds: 3600 }, null)
                  : await payments.createPayment(
                      core.db,
                      payer,
                      { to: kind === 8 ? failing : kind === 7 ? addr(0xbeef) : agents[(n + 1 + (n % 3)) % 4]!.address, asset: 'USDC', amount: '0.01' },
                      null,
                    );
              ids.push((res as { operation_id: string }).operation_id);
            }
          }),
        );
        worker = startWorker();
        // Mid-batch: a backend of the worker inside a transaction, running (or between) the batch's statements.
        const deadline = Date.now() + 120_000;
        for (;;) {
          const { rows } = await monitor.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND xact_start IS NOT NULL AND state IN ('active', 'idle in transaction')
               AND (query LIKE '%FROM holds h WHERE h.operation_id%' OR query LIKE '%UPDATE operations o SET%' OR query LIKE '%UPDATE holds h SET%'
                 OR query LIKE '%INSERT INTO journal_entries (journal_id%' OR query LIKE '%INSERT INTO activity (id%' OR query LIKE '%INSERT INTO events (id%' OR query LIKE '%INSERT INTO balances%' OR query LIKE '%WITH locked AS MATERIALIZED%')`,
          );
          if (rows[0].n > 0) break;
          if (Date.now() > deadline) throw new Error(`round ${round}: no settlement batch seen in flight within 120 s`);
          if (worker.exitCode !== null) throw new Error(`round ${round}: the worker exited with ${worker.exitCode}`);
        }
        worker.kill('SIGKILL');
        await once(worker, 'exit');
        worker = null;
      }
      const { rows: left } = await monitor.query(`SELECT count(*)::int AS n FROM operations WHERE status IN ('accepted', 'submitted')`);
      // The kills left work behind (otherwise no batch was interrupted with work queued).
      expect(left[0].n).to.be.greaterThan(0);

      worker = startWorker();
      const deadline = Date.now() + 240_000;
      for (;;) {
        const { rows } = await monitor.query(`SELECT count(*)::int AS n FROM operations WHERE status IN ('accepted', 'submitted')`);
        if (rows[0].n === 0) break;
        if (Date.now() > deadline) throw new Error(`${rows[0].n} operations still open 240 s after the last kill`);
        await new Promise((r) => setTimeout(r, 100));
      }
      worker.kill('SIGTERM');
      await once(worker, 'exit');
      worker = null;
    } finally {
      await monitor.end();
    }

    expect(ids).to.have.length(KILLS * PER_ROUND);
    const ops = await core.db('operations').whereIn('id', ids).select('id', 'type', 'status', 'to_address');
    const expected = (o: { type: string; to_address: string }) => (o.type === 'payment' && o.to_address.toLowerCase() === failing ? 'execution_failed' : 'executed');
    expect(ops.filter((o) => o.status !== expected(o))).to.deep.equal([]);
    const counts = await core.db.raw(
      `SELECT o.id, o.type, o.status,
         (SELECT count(*)::int FROM activity a WHERE a.operation_id = o.id AND a.type = o.type) AS terminal_activity,
         (SELECT count(*)::int FROM events e WHERE e.operation_id = o.id) AS events,
         (SELECT count(*)::int FROM holds h WHERE h.operation_id = o.id) AS holds,
         (SELECT count(*)::int FROM holds h WHERE h.operation_id = o.id AND h.status = CASE WHEN o.type = 'one_off_payment.create' THEN 'held' WHEN o.status = 'executed' THEN 'captured' ELSE 'released' END) AS holds_resolved,
         (SELECT count(DISTINCT journal_id)::int FROM journal_entries j WHERE j.operation_id = o.id AND j.entry_type <> 'hold') AS settlement_journals
       FROM operations o WHERE o.id = ANY(?::uuid[])`,
      [ids],
    );
    const wrong = (counts.rows as { type: string; status: string; terminal_activity: number; events: number; holds: number; holds_resolved: number; settlement_journals: number }[]).filter((r) => {
      const oneOff = r.type === 'one_off_payment.create';
      // A one-off payment announces one_off_payment.created at acceptance and nothing at settlement; its escrow stays held.
      return r.terminal_activity !== 1 || r.events !== 1 || r.holds !== 1 || r.holds_resolved !== 1 || r.settlement_journals !== (oneOff ? 0 : 1);
    });
    expect(wrong).to.deep.equal([]);
    const unbalanced = await core.db.raw('SELECT journal_id, asset_symbol FROM journal_entries GROUP BY journal_id, asset_symbol HAVING sum(amount) <> 0');
    expect(unbalanced.rows).to.deep.equal([]);
    await assertBooksBalance(
      core.db,
      agents.map((a) => a.walletId),
    );
  });
});
