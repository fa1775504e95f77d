// Issue 28, acceptance 1: a replay of the live policy reproduces every live decision, code and deciding key, in order.
// Random histories of payments, one-off payments, crypto withdrawals and conversions at random amounts, times, payees
// and assets run through the services under a random policy; the replay of that same policy must agree exactly.
import { expect } from 'chai';
import fc from 'fast-check';
import { isRefusal } from '../../src/lib/refusal.js';
import { createDefiHarness, type DefiHarness } from '../defi/helpers.js';
import { addr } from '../ledger/factory.js';

const PAYEES = [addr(0xa1), addr(0xa2), addr(0xa3), addr(0xbad)];
const TYPES = ['payment', 'one_off_payment.create', 'withdrawal.crypto', 'conversion'] as const;
const usdString = (cents: number) => (cents / 100).toFixed(2);

const policyArb = fc.record(
  {
    operation_types: fc.oneof({ arbitrary: fc.constant('all' as const), weight: 3 }, { arbitrary: fc.subarray([...TYPES], { minLength: 1 }), weight: 1 }),
    per_tx_usd: fc.integer({ min: 100, max: 6000 }).map(usdString),
    per_period_usd: fc.integer({ min: 1000, max: 30000 }).map(usdString),
    period: fc.constantFrom('day', 'week', 'month'),
    lifetime_usd: fc.integer({ min: 5000, max: 80000 }).map(usdString),
    max_txs_per_period: fc.integer({ min: 1, max: 8 }),
    allowed_assets: fc.oneof(fc.constant('all' as const), fc.subarray(['USDC', 'WETH'], { minLength: 1 })),
    allowed_recipients: fc.subarray(PAYEES, { minLength: 2 }),
    max_slippage_bps: fc.integer({ min: 10, max: 300 }),
    // Hightop's keys (issue 26): the cooldown (2 s blocks) and the conversion count read the same history.
    tx_cooldown_blocks: fc.integer({ min: 1, max: 1800 }),
    max_swaps_per_period: fc.integer({ min: 1, max: 4 }),
  },
  { requiredKeys: ['operation_types', 'period'] },
);

const actionArb = fc.record({
  kind: fc.constantFrom(...TYPES),
  asset: fc.constantFrom('USDC', 'WETH'),
  /** Cents of USDC, or millionths of WETH. */
  amount: fc.integer({ min: 1, max: 4000 }),
  payee: fc.integer({ min: 0, max: PAYEES.length - 1 }),
  slippageBps: fc.integer({ min: 1, max: 500 }),
  /** Seconds to the next write: up to four days. */
  gap: fc.integer({ min: 1, max: 4 * 86_400 }),
  settle: fc.boolean(),
});

describe('policy replay (property, acceptance 1)', () => {
  let h: DefiHarness;
  before(async () => {
    h = await createDefiHarness();
  });
  after(async () => h.close());

  it('reproduces every live decision, code and deciding key, in commit order, for random histories under a random policy', async function () {
    this.timeout(180_000);
    await h.ledger.ledger.setFailingAddress(h.db, addr(0xbad), true);
    let runs = 0;
    const stats: string[] = [];
    await fc.assert(
      fc.asyncProperty(policyArb, fc.array(actionArb, { minLength: 1, maxLength: 20 }), async (policy, actions) => {
        runs++;
        const who = await h.newAgent({ funds: { USDC: '100000', WETH: '100' } });
        // A confirmed trusted destination for the withdrawals, under an allow-all policy, before the replay's start.
        const dest = await h.ledger.destinations.add(h.db, who.agentId, { kind: 'crypto', chain: 'base', address: PAYEES[runs % 3]!, label: 'Cold', timelockSeconds: 0 });
        await h.ledger.destinations.act(h.db, { ...who }, dest.destination_id, 'confirm');
        await h.ledger.policy.set(h.db, who.agentId, policy);
        h.clock.advance(1000);
        const since = h.clock.now();
        const outcomes: { allowed: boolean; code: string | null }[] = [];
        for (const [i, a] of actions.entries()) {
          const amount = a.asset === 'USDC' ? usdString(a.amount) : (a.amount / 1_000_000).toFixed(6);
          const key = `r${runs}-${i}`;
          let result: unknown;
          try {
            if (a.kind === 'payment') result = await h.ledger.payments.createPayment(h.db, who, { to: PAYEES[a.payee]!, asset: a.asset, amount }, key);
            else if (a.kind === 'one_off_payment.create') result = await h.ledger.payments.createOneOffPayment(h.db, who, { to: PAYEES[a.payee]!, asset: a.asset, amount }, key);
            else if (a.kind === 'withdrawal.crypto') result = await h.ledger.withdrawals.createCryptoWithdrawal(h.db, who, { destination_id: dest.destination_id, asset: a.asset, amount }, key);
            else {
              const to = a.asset === 'USDC' ? 'WETH' : 'USDC';
              const q = await h.defi.conversions.quote(h.db, who, { from_asset: a.asset, to_asset: to, amount, slippage_percent: a.slippageBps / 100 });
              result = await h.ledger.operations.get(h.db, who.agentId, (await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, key)).operation_id);
            }
          } catch (err) {
            // A refused conversion quote (a dry run) or a write refused before its decision records no operation.
            const code = (err as { code?: string; details?: { operation_id?: string } }).code;
            if (!(err as { details?: { operation_id?: string } }).details?.operation_id) {
              h.clock.advance(a.gap * 1000);
              continue;
            }
            result = { refusal: { code } };
          }
          outcomes.push(isRefusal(result as never) ? { allowed: false, code: (result as { refusal: { code: string } }).refusal.code } : { allowed: true, code: null });
          if (a.settle) {
            while ((await h.ledger.operations.settleDue(h.db)) > 0);
          }
          h.clock.advance(a.gap * 1000);
        }
        const replay = await h.ledger.policy.replay(h.db, who.agentId, { policy, since });
        const stored = await h.db('operations').where({ agent_id: who.agentId }).where('created_at', '>=', since).orderBy('policy_seq').select('id', 'status', 'error_code');
        expect(replay.operations.map((o) => o.operation_id)).to.deep.equal(stored.map((o) => o.id));
        expect(replay.operations.map((o) => ({ allowed: o.recorded.allowed, code: o.recorded.code }))).to.deep.equal(outcomes);
        for (const o of replay.operations) {
          expect(o.exact).to.equal(true);
          expect(o.candidate, `operation ${o.operation_id}`).to.deep.equal(o.recorded);
        }
        stats.push(...outcomes.map((o) => o.code ?? 'allowed'));
        expect(replay.counts).to.include({ operations: outcomes.length, unchanged: outcomes.length, newly_refused: 0, newly_allowed: 0 });
      }),
      { numRuns: 40 },
    );
    // The histories reached both outcomes and the caps' arithmetic, not only the allow-lists.
    expect(stats).to.include.members(['allowed', 'limit_exceeded']);
  });
});
