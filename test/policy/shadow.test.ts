// Issue 28, acceptance 3: a stricter shadow policy records exactly the differing decisions of a 100-way concurrent
// write race (none lost, none doubled) and never changes an outcome; a failing shadow changes nothing; promotion.
import { expect } from 'chai';
import { ApiError } from '../../src/lib/errors.js';
import { addr, createLedgerFixture, makeAgent, type LedgerFixture } from '../ledger/factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);
const E8 = 100_000_000n;

describe('shadow policy', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture({ poolMax: 40 });
  });
  after(async () => f.close());

  it('records every differing decision of 100 concurrent payments exactly once, and accepts all 100', async function () {
    this.timeout(60_000);
    const live = { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_period_usd: '100000', period: 'day' };
    const agent = await makeAgent(f, { policy: live, fund: { USDC: '1000' } });
    // Stricter: 5 USD a payment, 150 USD a day (the live lock's period sums serve it); the lifetime cap needs its own read.
    const shadow = { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_tx_usd: '5', per_period_usd: '150', lifetime_usd: '200', period: 'day' };
    await f.area.policy.setShadow(f.db, agent.agentId, shadow);
    const amounts = Array.from({ length: 100 }, (_, i) => (i % 10) + 1);
    const results = await Promise.all(
      amounts.map((n, i) => f.area.payments.createPayment(f.db, agent, { to: addr(0x100 + i), asset: 'USDC', amount: String(n) }, `race-${i}`).then((r) => r.status, codeOf)),
    );
    expect(results.filter((r) => r === 'accepted')).to.have.length(100);

    // What the shadow must have decided for each write, in lock order, against the live usage before it.
    const ops = await f.db('operations').where({ agent_id: agent.agentId }).orderBy('policy_seq').select('id', 'amount_usd_e8', 'status');
    expect(ops).to.have.length(100);
    let used = 0n;
    const expected = new Map<string, string>();
    for (const op of ops) {
      const v = BigInt(op.amount_usd_e8);
      if (v > 5n * E8) expected.set(op.id, 'per_tx_usd');
      else if (used + v > 150n * E8) expected.set(op.id, 'per_period_usd');
      else if (used + v > 200n * E8) expected.set(op.id, 'lifetime_usd');
      used += v;
    }
    const rows = await f.db('shadow_decisions').where({ agent_id: agent.agentId });
    expect(rows).to.have.length(expected.size);
    expect(new Map(rows.map((r) => [r.operation_id, r.shadow_key]))).to.deep.equal(expected);
    expect(rows.every((r) => r.live_allowed === true && r.shadow_allowed === false && r.shadow_code === 'limit_exceeded')).to.equal(true);

    // Listed newest first, paged without loss or repetition.
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await f.area.policy.shadowDecisions(f.db, agent.agentId, { cursor, limit: 7 });
      seen.push(...page.decisions.map((d) => d.operation_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(seen).to.have.length(expected.size);
    expect(new Set(seen)).to.deep.equal(new Set(expected.keys()));
  });

  it('records a shadow that would allow what the live policy refuses, and never lets it through', async () => {
    const agent = await makeAgent(f, { policy: { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '10' }, fund: { USDC: '100' } });
    await f.area.policy.setShadow(f.db, agent.agentId, { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '50' });
    expect(await f.area.payments.createPayment(f.db, agent, { to: addr(0x55), asset: 'USDC', amount: '20' }, 'loose').catch(codeOf)).to.equal('limit_exceeded');
    const [d] = (await f.area.policy.shadowDecisions(f.db, agent.agentId, { limit: 10 })).decisions;
    expect(d).to.deep.include({ operation_type: 'payment', asset: 'USDC', amount_usd: '20' });
    expect(d!.live).to.deep.equal({ allowed: false, code: 'limit_exceeded', key: 'per_tx_usd' });
    expect(d!.shadow).to.deep.equal({ allowed: true, code: null, key: null, message: null });
  });

  it('leaves the write untouched when the shadow evaluation fails', async () => {
    const agent = await makeAgent(f, { policy: 'all', fund: { USDC: '100' } });
    await f.area.policy.setShadow(f.db, agent.agentId, { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '1' });
    // A stored shadow that no longer parses (an unknown key): the evaluation throws inside its savepoint.
    await f
      .db('agent_policies')
      .where({ agent_id: agent.agentId })
      .update({ shadow_policy: JSON.stringify({ operation_types: 'all', surprise: 1 }) });
    const res = await f.area.payments.createPayment(f.db, agent, { to: addr(0x56), asset: 'USDC', amount: '3' }, 'broken-shadow');
    expect(res.status).to.equal('accepted');
    expect(await f.db('shadow_decisions').where({ agent_id: agent.agentId })).to.have.length(0);
    expect(await f.db('operations').where({ agent_id: agent.agentId, status: 'accepted' })).to.have.length(1);
  });

  it('promotes the shadow to live in one action, and refuses a shadow without a live policy', async () => {
    const none = await makeAgent(f, { policy: null });
    expect(await f.area.policy.setShadow(f.db, none.agentId, { operation_types: 'all', allowed_recipients: 'all' }).catch(codeOf)).to.equal('invalid_state_transition');
    expect(await f.area.policy.promoteShadow(f.db, none.agentId).catch(codeOf)).to.equal('not_found');

    const agent = await makeAgent(f, { policy: 'all', fund: { USDC: '100' } });
    await f.area.policy.setShadow(f.db, agent.agentId, { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '2' });
    expect(await f.area.policy.getShadow(f.db, agent.agentId)).to.include({ per_tx_usd: 200_000_000n });
    const promoted = await f.area.policy.promoteShadow(f.db, agent.agentId);
    expect(promoted.per_tx_usd).to.equal(200_000_000n);
    expect(await f.area.policy.getShadow(f.db, agent.agentId)).to.equal(null);
    expect(await f.area.payments.createPayment(f.db, agent, { to: addr(0x57), asset: 'USDC', amount: '3' }, 'after-promote').catch(codeOf)).to.equal('limit_exceeded');
    expect(await f.area.policy.dropShadow(f.db, agent.agentId)).to.equal(false);
  });
});
