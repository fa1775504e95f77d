// Issue 28, acceptance 2: tightening a cap in a replay refuses what the cap's arithmetic says, and the refused
// payment leaves the usage later payments see (hand-computed). Also: the replay writes nothing, and its bounds.
import { expect } from 'chai';
import { readOnlyTransaction } from '../../src/db/knex.js';
import { ApiError } from '../../src/lib/errors.js';
import { addr, createLedgerFixture, makeAgent, type LedgerFixture } from '../ledger/factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);

describe('replay (policy replay)', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('refuses what a tightened daily cap must, and the refusal lets a later payment of the same day through', async () => {
    // Live: USDC payments with a generous cap. History (USDC at 1 USD), all accepted:
    //   day 1  10:00  60   10:10  50   10:20  30        day 2  09:00  80
    const agent = await makeAgent(f, { policy: { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_period_usd: '1000', period: 'day' }, fund: { USDC: '1000' } });
    f.clock.set(new Date('2026-03-10T10:00:00.000Z'));
    const since = f.clock.now();
    const pay = async (amount: string) => {
      const r = await f.area.payments.createPayment(f.db, agent, { to: addr(0x77), asset: 'USDC', amount }, `hand-${amount}-${f.clock.now().getTime()}`);
      f.clock.advance(10 * 60_000);
      return r.operation_id;
    };
    const ids = [await pay('60'), await pay('50'), await pay('30')];
    f.clock.set(new Date('2026-03-11T09:00:00.000Z'));
    ids.push(await pay('80'));
    const before = await f.db('operations').count({ n: '*' }).first();

    // Candidate: a daily cap of 100.
    //   60: used 0, 0 + 60 <= 100            allowed  (used 60)
    //   50: used 60, 60 + 50 = 110 > 100     refused: limit_exceeded by per_period_usd (does not count)
    //   30: used 60 (not 110), 90 <= 100     allowed  (under the recorded usage, 110 + 30 would be refused)
    //   80: the next day, used 0             allowed
    const replay = await f.area.policy.replay(f.db, agent.agentId, {
      policy: { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_period_usd: '100', period: 'day' },
      since,
    });
    expect(replay.operations.map((o) => o.operation_id)).to.deep.equal(ids);
    expect(replay.operations.map((o) => o.candidate)).to.deep.equal([
      { allowed: true, code: null, key: null },
      { allowed: false, code: 'limit_exceeded', key: 'per_period_usd' },
      { allowed: true, code: null, key: null },
      { allowed: true, code: null, key: null },
    ]);
    expect(replay.operations.every((o) => o.recorded.allowed)).to.equal(true);
    expect(replay.operations.map((o) => o.change)).to.deep.equal(['unchanged', 'newly_refused', 'unchanged', 'unchanged']);
    expect(replay.operations.map((o) => o.usage.period_usd)).to.deep.equal(['0', '60', '60', '0']);
    expect(replay.operations.map((o) => o.usage.period_txs)).to.deep.equal([0, 1, 1, 0]);
    expect(replay.counts).to.deep.equal({ operations: 4, unchanged: 3, newly_refused: 1, newly_allowed: 0 });
    expect(replay.periods).to.deep.equal([
      { start: '2026-03-10T00:00:00.000Z', recorded_usd: '140', candidate_usd: '90', cap_usd: '100' },
      { start: '2026-03-11T00:00:00.000Z', recorded_usd: '80', candidate_usd: '80', cap_usd: '100' },
    ]);
    expect(replay.days.map((d) => [d.date, d.recorded_usd, d.candidate_usd])).to.deep.equal([
      ['2026-03-10', '140', '90'],
      ['2026-03-11', '80', '80'],
    ]);

    // Approvals (issue 27) in a candidate: over 55 USD the owner approves; the allowed ones say so.
    const approving = await f.area.policy.replay(f.db, agent.agentId, { policy: { operation_types: ['payment'], allowed_recipients: 'all', approval_threshold_usd: '55' }, since });
    expect(approving.operations.map((o) => [o.candidate.allowed, o.candidate.approval_required ?? false])).to.deep.equal([
      [true, true],
      [true, false],
      [true, false],
      [true, true],
    ]);
    // approve_new_payees: only the first payment to the payee would have waited.
    const firstPayee = await f.area.policy.replay(f.db, agent.agentId, { policy: { operation_types: ['payment'], allowed_recipients: 'all', approve_new_payees: true }, since });
    expect(firstPayee.operations.map((o) => o.candidate.approval_required ?? false)).to.deep.equal([true, false, false, false]);

    // A count cap of 2 a day and a lifetime cap of 150: 60 ok; 50 would make 110 <= 150 ok (2 txs);
    // 30: the count cap (2 used) refuses; 80: next day, lifetime 110 + 80 > 150 refuses.
    const counted = await f.area.policy.replay(f.db, agent.agentId, {
      policy: { operation_types: ['payment'], allowed_recipients: 'all', max_txs_per_period: 2, lifetime_usd: '150', period: 'day' },
      since,
    });
    expect(counted.operations.map((o) => o.candidate.key)).to.deep.equal([null, null, 'max_txs_per_period', 'lifetime_usd']);
    expect(counted.operations[3]!.usage.lifetime_usd).to.equal('110');

    // Loosening a refusal: a policy the history refused is newly allowed by a candidate.
    f.clock.advance(60_000);
    const since2 = f.clock.now();
    await f.area.payments.createPayment(f.db, agent, { to: addr(0x77), asset: 'USDC', amount: '1' }, 'small');
    const refused = await f.area.payments.createPayment(f.db, agent, { to: addr(0x78), asset: 'USDC', amount: '2000' }, 'too-big').catch(codeOf);
    expect(refused).to.equal('limit_exceeded');
    const loose = await f.area.policy.replay(f.db, agent.agentId, { policy: { operation_types: 'all', allowed_recipients: 'all' }, since: since2 });
    expect(loose.operations.map((o) => o.change)).to.deep.equal(['unchanged', 'newly_allowed']);
    expect(loose.operations[1]!.recorded).to.deep.equal({ allowed: false, code: 'limit_exceeded', key: 'per_period_usd' });

    // The replay wrote nothing.
    expect((await f.db('operations').count({ n: '*' }).first())!.n).to.equal(Number(before!.n) + 2);
  });

  it('answers validation_failed for a since more than 90 days back or in the future, and for an invalid policy', async () => {
    const agent = await makeAgent(f);
    const now = f.clock.now().getTime();
    const replay = (policy: unknown, since: Date) => f.area.policy.replay(f.db, agent.agentId, { policy, since }).catch(codeOf);
    expect(await replay({ operation_types: 'all', allowed_recipients: 'all' }, new Date(now - 91 * 86_400_000))).to.equal('validation_failed');
    expect(await replay({ operation_types: 'all', allowed_recipients: 'all' }, new Date(now + 60_000))).to.equal('validation_failed');
    expect(await replay({ operation_types: 'all', per_tx_usd: 5 }, new Date(now - 86_400_000))).to.equal('validation_failed');
    expect((await f.area.policy.replay(f.db, agent.agentId, { policy: { operation_types: 'all', allowed_recipients: 'all' }, since: new Date(now - 90 * 86_400_000) })).counts.operations).to.equal(0);
  });

  it('runs in a transaction where Postgres refuses any write', async () => {
    const err = await readOnlyTransaction(f.db, (trx) => trx('owners').update({ email: 'x' }).where({ id: '00000000-0000-0000-0000-000000000000' })).catch((e: unknown) => e);
    expect(String(err)).to.match(/read-only transaction/);
  });
});
