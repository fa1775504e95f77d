// Batch settlement (issue 31): a batch leaves exactly the records one-at-a-time settlement leaves, and four settlers
// racing a stream of payments between the same wallets in both directions never deadlock, settle nothing twice,
// keep every journal balanced and fan each event out once per endpoint.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { buildCore } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import type { Knex } from '../../src/db/knex.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createSettlementLoop } from '../../src/services/ledger/settlement-loop.js';
import { createWorker } from '../../src/worker.js';
import { createTestAgent } from '../support/agents.js';
import { createTestCore, type TestCore } from '../support/core.js';
import { testEnv } from '../setup.js';
import { addr, assertBooksBalance, MASTER_KEY } from './factory.js';

/** The 60 s; SETTLEMENT_DEADLOCK_SECONDS shortens it for a quick local run (the suite runs the 60 s). */
const STREAM_SECONDS = Number(process.env.SETTLEMENT_DEADLOCK_SECONDS || 60);

interface Agent {
  agentId: string;
  walletId: string;
  address: string;
}

async function agentOf(core: TestCore, fund: Record<string, string>): Promise<Agent> {
  const a = await createTestAgent({ db: core.db, agents: core.services.agents, ledger: core.services.ledger }, { name: 'batch settlement agent', policy: 'all', fund });
  const wallet = await core.db('wallets').where({ id: a.walletId }).first('address');
  return { agentId: a.agentId, walletId: a.walletId, address: wallet.address as string };
}

async function settleUntilIdle(core: TestCore): Promise<void> {
  for (let i = 0; i < 1000; i++) if ((await core.services.ledger.operations.settleDue(core.db)) === 0) return;
  throw new Error('settlement did not go idle');
}

/** What settlement wrote for an operation, without ids and times (compared across the two ways of settling). */
async function recordsOf(db: Knex, opId: string, names: Map<string, string>) {
  const name = (s: string | null) => (s === null ? null : [...names].reduce((acc, [id, n]) => acc.split(id).join(n), s));
  const op = await db('operations').where({ id: opId }).first();
  const journal = (await db('journal_entries').where({ operation_id: opId }).orderBy('id').select('account', 'wallet_id', 'asset_symbol', 'amount', 'entry_type')).map((j) => ({
    ...j,
    account: name(j.account),
    wallet_id: name(j.wallet_id),
  }));
  const activity = (
    await db('activity').where({ operation_id: opId }).select('type', 'status', 'direction', 'asset_symbol', 'amount', 'amount_usd_e8', 'counterparty', 'description', 'wallet_id')
  ).map((a) => ({ ...a, wallet_id: name(a.wallet_id), counterparty: name(a.counterparty), description: name(a.description) }));
  const events = (await db('events').where({ operation_id: opId }).select('type', 'payload')).map((e) => {
    const data = JSON.parse(e.payload).data as { operation: Record<string, unknown> };
    const { id: _id, created_at: _c, submitted_at: s, executed_at: x, failed_at: f, human_message: h, idempotency_key_hash: _k, resource: _r, ...operation } = data.operation;
    return { type: e.type, operation: { ...operation, human_message: name(h as string), submitted: s !== null, executed: x !== null, failed: f !== null } };
  });
  const holds = await db('holds').where({ operation_id: opId }).orderBy('created_at').select('status', 'amount');
  return {
    status: op.status,
    error_code: op.error_code,
    error_message: name(op.error_message),
    tx_hash: op.tx_hash !== null,
    details: JSON.parse(name(JSON.stringify(op.details))!.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'ID')),
    submitted: op.submitted_at !== null,
    journal,
    activity: activity.sort((a, b) => a.type.localeCompare(b.type)),
    events,
    holds,
  };
}

describe('batch settlement', () => {
  it('leaves exactly the records one-at-a-time settlement leaves (payments to a wallet and out, a refused one, withdrawals, a one-off payment)', async function () {
    this.timeout(120_000);
    const run = async (batchSize: string) => {
      // The same instant for both runs: messages and details carry times.
      const core = await createTestCore({ clock: createFakeClock('2026-03-02T10:00:00.000Z'), env: { MASTER_KEY, SETTLEMENT_DELAY_MS: '0', SETTLEMENT_BATCH_SIZE: batchSize } });
      try {
        const [payer, payee] = [await agentOf(core, { USDC: '100', ETH: '1' }), await agentOf(core, { USDC: '1' })];
        const names = new Map([
          [payer.walletId, 'PAYER'],
          [payee.walletId, 'PAYEE'],
          [payer.address.toLowerCase(), 'PAYER_ADDRESS'],
          [payee.address.toLowerCase(), 'PAYEE_ADDRESS'],
          [payer.address, 'PAYER_ADDRESS'],
          [payee.address, 'PAYEE_ADDRESS'],
        ]);
        for (const [a, n] of [
          [payer.address, 'PAYER_SHORT'],
          [payee.address, 'PAYEE_SHORT'],
        ] as const)
          names.set(`${a.slice(0, 6)}…${a.slice(-4)}`, n);
        const failing = addr(0xdead);
        await core.services.ledger.ledger.setFailingAddress(core.db, failing, true);
        names.set(failing, 'FAILING');
        const { payments, withdrawals, destinations } = core.services.ledger;
        const ids: string[] = [];
        const pay = async (body: Record<string, unknown>) => {
          const res = await payments.createPayment(core.db, payer, { asset: 'USDC', amount: '1.25', ...body } as never, null);
          ids.push((res as { operation_id: string }).operation_id);
        };
        await pay({ to: payee.address });
        await pay({ to: addr(0xbeef) });
        await pay({ to: failing });
        await pay({ to: payee.address, asset: 'ETH', amount: '0.001' });
        await pay({ to: payee.address, deliver_as: 'EURC' });
        const oneOff = await payments.createOneOffPayment(core.db, payer, { to: addr(0x0ff), asset: 'USDC', amount: '2', unlock_delay_seconds: 0, expires_in_seconds: 3600 }, null);
        ids.push((oneOff as { operation_id: string }).operation_id);
        const owner = await core.db('agents').where({ id: payer.agentId }).first('owner_id');
        const method = await withdrawals.addMethod(core.db, owner.owner_id, { kind: 'bank', label: 'Checking', last4: '1234' });
        const bank = await withdrawals.createBankWithdrawal(core.db, { ...payer, ownerId: owner.owner_id }, { method_id: method.method_id, asset: 'USDC', amount: '3' } as never, null);
        ids.push((bank as { operation_id: string }).operation_id);
        const { destination_id } = await destinations.add(core.db, payer.agentId, { kind: 'crypto', chain: 'base', address: payee.address, label: 'Payee', timelockSeconds: 0 });
        await destinations.act(core.db, payer, destination_id, 'confirm');
        const crypto = await withdrawals.createCryptoWithdrawal(core.db, payer, { destination_id, asset: 'USDC', amount: '4' }, null);
        ids.push((crypto as { operation_id: string }).operation_id);
        await settleUntilIdle(core);
        const out = [];
        for (const id of ids) out.push(await recordsOf(core.db, id, names));
        // Rows written by one transaction share their xmin: how many transactions finished these operations.
        const converted = ids[4]!;
        const xmins = await core.db('operations').whereIn('id', ids).whereNot('id', converted).select(core.db.raw('xmin::text AS x'));
        return { out, transactions: new Set(xmins.map((r: { x: string }) => r.x)).size };
      } finally {
        await core.close();
      }
    };
    const { out: oneAtATime, transactions: separately } = await run('0');
    const { out: batched, transactions: together } = await run('200');
    // Seven operations finished by seven transactions one at a time, by one batch (the conversion is left to its settler).
    expect([separately, together]).to.deep.equal([7, 1]);
    expect(oneAtATime.map((r) => r.status)).to.deep.equal(['executed', 'executed', 'execution_failed', 'executed', 'executed', 'executed', 'executed', 'executed']);
    for (const [i, r] of batched.entries()) expect(r, `operation ${i}`).to.deep.equal(oneAtATime[i]);
  });

  it('settles in one batch on the embedded database (PGlite), with the same balances and events', async function () {
    this.timeout(180_000);
    const dataDir = mkdtempSync(join(tmpdir(), 'agent-api-settle-embedded-'));
    const built = await buildCore(
      loadConfig({
        NODE_ENV: 'development',
        DATA_DIR: dataDir,
        MASTER_KEY: randomBytes(32).toString('hex'),
        AUTO_MIGRATE: 'true',
        LOG_LEVEL: 'warn',
        BASE_URL: 'http://127.0.0.1:3000',
        SMTP_URL: 'smtp://127.0.0.1:2525',
      }),
    );
    try {
      const core = built as unknown as TestCore;
      const [payer, payee] = [await agentOf(core, { USDC: '50' }), await agentOf(core, { USDC: '1' })];
      await built.services.ledger.ledger.setFailingAddress(built.db, addr(0xdead), true);
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) {
        const to = i === 11 ? addr(0xdead) : i % 2 === 0 ? payee.address : addr(0xbeef);
        ids.push(((await built.services.ledger.payments.createPayment(built.db, payer, { to, asset: 'USDC', amount: '1' }, null)) as { operation_id: string }).operation_id);
      }
      await settleUntilIdle(core);
      const ops = await built.db('operations').whereIn('id', ids).select('status', built.db.raw('xmin::text AS x'));
      expect(ops.filter((o) => o.status === 'executed')).to.have.length(11);
      expect(new Set(ops.map((o: { x: string }) => o.x)).size).to.equal(1);
      expect(await built.services.ledger.ledger.balance(built.db, payer.walletId, 'USDC')).to.deep.equal({ available: 39_000_000n, held: 0n });
      expect(await built.services.ledger.ledger.balance(built.db, payee.walletId, 'USDC')).to.deep.equal({ available: 7_000_000n, held: 0n });
      expect((await built.db('events').whereIn('operation_id', ids).select('type')).map((e) => e.type).sort()).to.deep.equal([...Array(11).fill('payment.executed'), 'payment.execution_failed']);
      await assertBooksBalance(built.db, [payer.walletId, payee.walletId]);
    } finally {
      await built.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it(`four settlers and ${STREAM_SECONDS} s of payments both ways between the same wallets: no deadlock, nothing settled twice, every journal balanced, each event once per endpoint`, async function () {
    this.timeout((STREAM_SECONDS + 240) * 1000);
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    const core = await createTestCore({ log, env: { MASTER_KEY, SETTLEMENT_DELAY_MS: '0', DATABASE_POOL_MAX: '40' } });
    const deadlocksBefore = await deadlockCount(core.db);
    const settlers = Array.from({ length: 4 }, () => createWorker({ loops: [createSettlementLoop({ db: core.db, ledger: core.services.ledger, log, idleMs: 5 })], log }));
    let closed = false;
    try {
      const agents = await Promise.all(Array.from({ length: 4 }, () => agentOf(core, { USDC: '1000000' })));
      const subscribed = new Map<string, number>();
      for (const a of agents) {
        await core.services.webhooks.create(core.db, a, { url: 'https://example.com/hook', event_types: ['payment.executed', 'payment.execution_failed'] });
        subscribed.set(a.agentId, 1);
      }
      await core.services.webhooks.create(core.db, agents[0]!, { url: 'https://example.com/second-hook', event_types: ['payment.executed'] });
      subscribed.set(agents[0]!.agentId, 2);
      settlers.forEach((s) => s.start());

      // Eight payers: each agent pays each of the three others in turn, so every pair of wallets moves money both ways.
      const ids: string[] = [];
      const refused: unknown[] = [];
      const stopAt = Date.now() + STREAM_SECONDS * 1000;
      await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          for (let n = 0; Date.now() < stopAt; n++) {
            const payer = agents[i % 4]!;
            const payee = agents[(i + 1 + (n % 3)) % 4]!;
            try {
              const res = await core.services.ledger.payments.createPayment(core.db, payer, { to: payee.address, asset: 'USDC', amount: '0.01' }, null);
              ids.push((res as { operation_id: string }).operation_id);
            } catch (err) {
              refused.push(err);
            }
          }
        }),
      );
      expect(refused.map(String)).to.deep.equal([]);
      const deadline = Date.now() + 180_000;
      for (;;) {
        const open = await core.db('operations').whereIn('status', ['accepted', 'submitted']).count<{ n: string }[]>('* as n');
        if (Number(open[0]!.n) === 0) break;
        if (Date.now() > deadline) throw new Error(`${open[0]!.n} operations still open 180 s after the stream`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await Promise.all(settlers.map((s) => s.stop()));
      expect(ids.length).to.be.greaterThan(100);

      // Settled once: every payment executed, its one hold captured by exactly one journal entry, one receipt, one event.
      const statuses = await core.db('operations').whereIn('id', ids).select('status').count<{ status: string; count: string }[]>('* as count').groupBy('status');
      expect(statuses.map((s) => [s.status, Number(s.count)])).to.deep.equal([['executed', ids.length]]);
      const twice = await core.db.raw(
        `SELECT o.id,
           (SELECT count(*) FROM journal_entries j WHERE j.operation_id = o.id AND j.entry_type = 'payment' AND j.amount < 0) AS captures,
           (SELECT count(*) FROM holds h WHERE h.operation_id = o.id AND h.status = 'captured') AS captured,
           (SELECT count(*) FROM activity a WHERE a.operation_id = o.id AND a.type = 'payment') AS terminal,
           (SELECT count(*) FROM activity a WHERE a.operation_id = o.id AND a.type = 'payment.received') AS received,
           (SELECT count(*) FROM events e WHERE e.operation_id = o.id) AS events
         FROM operations o WHERE o.id = ANY(?::uuid[])`,
        [ids],
      );
      const notOnce = (twice.rows as Record<string, string | number>[]).filter((r) => [r.captures, r.captured, r.terminal, r.received, r.events].some((n) => Number(n) !== 1));
      expect(notOnce).to.deep.equal([]);
      // Settled in batches (rows one transaction wrote share its xmin), not one at a time.
      const transactions = new Set((await core.db('operations').whereIn('id', ids).select(core.db.raw('xmin::text AS x'))).map((r: { x: string }) => r.x)).size;
      expect(transactions).to.be.below(ids.length / 2);

      // Every journal entry sums to zero per asset, and each wallet's balances equal its journal.
      const unbalanced = await core.db.raw('SELECT journal_id, asset_symbol, sum(amount) AS total FROM journal_entries GROUP BY journal_id, asset_symbol HAVING sum(amount) <> 0');
      expect(unbalanced.rows).to.deep.equal([]);
      await assertBooksBalance(
        core.db,
        agents.map((a) => a.walletId),
      );
      for (const a of agents) expect((await core.services.ledger.ledger.balance(core.db, a.walletId, 'USDC')).held).to.equal(0n);

      // Each event once per subscribed endpoint of its agent.
      const fanout = await core.db.raw(
        `SELECT e.id, e.agent_id, count(d.id)::int AS deliveries, count(DISTINCT d.endpoint_id)::int AS endpoints
         FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id WHERE e.operation_id = ANY(?::uuid[]) GROUP BY e.id, e.agent_id`,
        [ids],
      );
      const wrong = (fanout.rows as { agent_id: string; deliveries: number; endpoints: number }[]).filter((r) => r.deliveries !== subscribed.get(r.agent_id) || r.endpoints !== r.deliveries);
      expect(fanout.rows).to.have.length(ids.length);
      expect(wrong).to.deep.equal([]);

      // No deadlock: none logged by a settler, none counted by Postgres (its counter is flushed when the backends end).
      expect(lines.filter((l) => /deadlock|failed/i.test(l))).to.deep.equal([]);
      await core.close();
      closed = true;
      await new Promise((r) => setTimeout(r, 1500));
      expect(await deadlockCount()).to.equal(deadlocksBefore);
    } finally {
      await Promise.all(settlers.map((s) => s.stop()));
      if (!closed) await core.close();
    }
  });
});

/** Deadlocks Postgres has detected in this file's database (pg_stat_database), read on a connection of its own. */
async function deadlockCount(_db?: Knex): Promise<number> {
  const client = new pg.Client({ connectionString: testEnv.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()');
    return Number(rows[0].deadlocks);
  } finally {
    await client.end();
  }
}
