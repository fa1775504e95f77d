import { expect } from 'chai';
import { ApiError } from '../../src/lib/errors.js';
import { createLogger } from '../../src/lib/logger.js';
import { createSettlementLoop } from '../../src/services/ledger/settlement-loop.js';
import { createWorker } from '../../src/worker.js';
import { addr, assertBooksBalance, createLedgerFixture, makeAgent, settleAll, type LedgerFixture } from './factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);

describe('settlement loop', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('executes every accepted operation exactly once with two workers running', async function () {
    this.timeout(60_000);
    const agents = await Promise.all(Array.from({ length: 4 }, () => makeAgent(f, { fund: { USDC: '100' } })));
    const ids: string[] = [];
    for (let i = 0; i < 120; i++) {
      const agent = agents[i % 4]!;
      ids.push((await f.area.payments.createPayment(f.db, agent, { to: addr(5000 + i), asset: 'USDC', amount: '0.5' }, null)).operation_id);
    }
    const log = createLogger('silent');
    const second = await createLedgerFixture();
    const workers = [
      createWorker({ loops: [createSettlementLoop({ db: f.db, ledger: f.area, log, idleMs: 10 })], log }),
      createWorker({ loops: [createSettlementLoop({ db: second.db, ledger: second.area, log, idleMs: 10 })], log }),
    ];
    second.clock.set(f.clock.now());
    workers.forEach((w) => w.start());
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const left = await f.db('operations').whereIn('id', ids).whereNot('status', 'executed').count('* as n').first();
      if (Number(left?.n) === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.all(workers.map((w) => w.stop()));
    await second.close();
    const statuses = await f.db('operations').whereIn('id', ids).select('status');
    expect(statuses.every((s) => s.status === 'executed')).to.equal(true);
    const captures = await f.db('journal_entries').whereIn('operation_id', ids).where({ entry_type: 'payment' }).where('amount', '<', 0).select('operation_id');
    expect(captures).to.have.length(120);
    expect(new Set(captures.map((c) => c.operation_id)).size).to.equal(120);
    const events = await f.db('events').whereIn('operation_id', ids).select('operation_id', 'type');
    expect(events).to.have.length(120);
    expect(new Set(events.map((e) => e.operation_id)).size).to.equal(120);
    for (const a of agents) expect(await f.area.ledger.balance(f.db, a.walletId, 'USDC')).to.deep.equal({ available: 85_000_000n, held: 0n });
    await assertBooksBalance(
      f.db,
      agents.map((a) => a.walletId),
    );
  });

  it('shows accepted, then submitted, then executed when a settlement delay is configured', async () => {
    const slow = await createLedgerFixture({ settlementDelayMs: 5_000 });
    try {
      const agent = await makeAgent(slow, { fund: { USDC: '5' } });
      const res = await slow.area.payments.createPayment(slow.db, agent, { to: addr(9), asset: 'USDC', amount: '1' }, 'delay');
      expect((await slow.area.operations.get(slow.db, agent.agentId, res.operation_id)).status).to.equal('accepted');
      await settleAll(slow);
      const submitted = await slow.area.operations.get(slow.db, agent.agentId, res.operation_id, { include: ['onchain'] });
      expect(submitted.status).to.equal('submitted');
      expect(submitted.onchain?.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      slow.clock.advance(5_000);
      await settleAll(slow);
      const done = await slow.area.operations.get(slow.db, agent.agentId, res.operation_id);
      expect(done.status).to.equal('executed');
      expect(new Date(done.executed_at!).getTime() - new Date(done.submitted_at!).getTime()).to.equal(5_000);
    } finally {
      await slow.close();
    }
  });
});

describe('one-off payments', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  async function oneOff(agent: { agentId: string; walletId: string }, body: Record<string, unknown> = {}) {
    const res = await f.area.payments.createOneOffPayment(f.db, agent, { to: addr(0x0ff), asset: 'USDC', amount: '3', unlock_delay_seconds: 60, expires_in_seconds: 3600, ...body }, null);
    return res;
  }

  it('holds at creation, writes one_off_payment.created, refuses an early claim and moves money on claim', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    const res = await oneOff(agent);
    expect(res.resource.type).to.equal('one_off_payment');
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 7_000_000n, held: 3_000_000n });
    expect((await f.db('events').where({ operation_id: res.operation_id })).map((e) => e.type)).to.deep.equal(['one_off_payment.created']);
    await settleAll(f);
    expect((await f.area.operations.get(f.db, agent.agentId, res.operation_id)).status).to.equal('executed');
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 7_000_000n, held: 3_000_000n });
    expect(codeOf(await f.area.payments.claimOneOff(f.db, res.resource.id).catch((e: unknown) => e))).to.equal('time_delay_not_reached');
    f.clock.advance(60_000);
    const claimed = await f.area.payments.claimOneOff(f.db, res.resource.id);
    expect(claimed.status).to.equal('claimed');
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 7_000_000n, held: 0n });
    expect(codeOf(await f.area.payments.claimOneOff(f.db, res.resource.id).catch((e: unknown) => e))).to.equal('invalid_state_transition');
    expect(codeOf(await f.area.payments.cancelOneOff(f.db, res.resource.id).catch((e: unknown) => e))).to.equal('invalid_state_transition');
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('returns the funds when the owner cancels', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    const res = await oneOff(agent);
    await f.area.payments.cancelOneOff(f.db, res.operation_id);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 10_000_000n, held: 0n });
    f.clock.advance(120_000);
    expect(codeOf(await f.area.payments.claimOneOff(f.db, res.resource.id).catch((e: unknown) => e))).to.equal('invalid_state_transition');
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('releases the hold at expiry through the settlement loop', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    const res = await oneOff(agent);
    await settleAll(f);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 7_000_000n, held: 3_000_000n });
    f.clock.advance(3600_000);
    await settleAll(f);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 10_000_000n, held: 0n });
    expect((await f.db('one_off_payments').where({ id: res.resource.id }).first()).status).to.equal('expired');
    const activity = await f.db('activity').where({ operation_id: res.operation_id }).orderBy('created_at');
    expect(activity.map((a) => a.type)).to.include('one_off_payment.expire');
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('refuses expiry not after the unlock delay', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    expect(codeOf(await oneOff(agent, { unlock_delay_seconds: 3600, expires_in_seconds: 3600 }).catch((e: unknown) => e))).to.equal('validation_failed');
  });
});
