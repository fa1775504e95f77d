// Borrow markets on the ledger: collateral, borrowing within the LTV, interest on the debt index,
// repayment, collateral removal, deleverage, and the price feed moving the LTV.
import { expect } from 'chai';
import fc from 'fast-check';
import { createDefiHarness, errorCode, type DefiHarness } from './helpers.js';

const E6 = 10n ** 6n;
const E18 = 10n ** 18n;
const YEAR_MS = 365 * 24 * 3600 * 1000;

describe('borrow (service)', () => {
  let h: DefiHarness;
  before(async () => {
    h = await createDefiHarness();
  });
  afterEach(async () => {
    await h.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
  });
  after(async () => {
    await h.close();
  });

  /** Spends wallet funds outside the DeFi area (a balanced journal entry to an external sink). */
  const drain = (walletId: string, asset: string, amount: bigint) =>
    h.ledger.ledger.post(h.db, {
      operationId: null,
      entryType: 'test',
      postings: [
        { account: { kind: 'available', walletId }, asset, amount: -amount },
        { account: { kind: 'external', name: 'test-sink' }, asset, amount },
      ],
    });

  /** An agent with 1 WETH of collateral at $3000 and `cash` USDC in the wallet. */
  async function collateralised(cash = '0', policy?: Record<string, unknown>) {
    const who = await h.newAgent({ funds: { WETH: '1', ...(cash !== '0' ? { USDC: cash } : {}) }, policy });
    await h.defi.borrow.addCollateral(h.db, who, { asset: 'WETH', amount: '1' }, 'add');
    return who;
  }

  describe('addCollateral / getBorrowSummary', () => {
    it('values 1 WETH and a 1000 USDC debt like Aave', async () => {
      const who = await collateralised();
      expect(await h.balance(who.walletId, 'WETH')).to.equal(0n);
      const res = await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1000' }, 'b');
      expect(res.status).to.equal('executed');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(1000n * E6);
      const s = await h.defi.borrow.summary(h.db, who);
      expect(s).to.include({ collateral_value_usd: '3000', debt_usd: '1000', max_ltv: 0.805, liquidation_threshold: 0.83, available_to_borrow_usd: '1415', liquidation_price_usd: '1204.81927711' });
      expect(s.ltv).to.be.closeTo(1 / 3, 1e-8);
      expect(s.health_factor).to.be.closeTo(2.49, 1e-8);
      expect(s.collateral).to.deep.equal([{ asset_symbol: 'WETH', amount: '1', amount_usd: '3000', price_usd: '3000', max_ltv: 0.805, liquidation_threshold: 0.83 }]);
      expect(s.debts).to.deep.equal([{ asset_symbol: 'USDC', amount: '1000', amount_usd: '1000', borrow_apr: 0.05 }]);
      for (const type of ['collateral.added', 'debt.borrowed']) expect(await h.db('events').where({ agent_id: who.agentId, type })).to.have.length(1);
    });

    it('refuses collateral in an asset without a collateral market', async () => {
      const who = await h.newAgent();
      await h.db('borrow_markets').where({ asset_symbol: 'EURC' }).update({ collateral_enabled: false });
      try {
        expect(await errorCode(() => h.defi.borrow.addCollateral(h.db, who, { asset: 'EURC', amount: '1' }, 'k'))).to.equal('validation_failed');
      } finally {
        await h.db('borrow_markets').where({ asset_symbol: 'EURC' }).update({ collateral_enabled: true });
      }
    });
  });

  describe('createBorrow', () => {
    it('refuses with ltv_too_high above the market LTV and above max_ltv_after', async () => {
      const who = await collateralised();
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '2415.000001' }, 'b1'))).to.equal('ltv_too_high');
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1000', max_ltv_after: 0.3 }, 'b2'))).to.equal('ltv_too_high');
      expect((await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '2415' }, 'b3')).status).to.equal('executed');
      expect(await h.db('operations').where({ agent_id: who.agentId, type: 'debt.borrow' })).to.have.length(1);
    });

    it('records the policy max_ltv_bps refusal as ltv_too_high', async () => {
      const who = await collateralised('0', { operation_types: 'all', max_ltv_bps: 2000 });
      const code = await h.db.transaction(async (trx) => errorCode(() => h.defi.borrow.borrow(trx, who, { asset: 'USDC', amount: '700' }, 'b')));
      expect(code).to.equal('ltv_too_high');
      expect(await h.db('operations').where({ agent_id: who.agentId, type: 'debt.borrow', status: 'policy_rejected' })).to.have.length(1);
      expect((await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '600' }, 'b2')).status).to.equal('executed');
    });

    it('refuses without collateral and for an asset that cannot be borrowed', async () => {
      const who = await h.newAgent();
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1' }, 'b'))).to.equal('ltv_too_high');
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'CBBTC', amount: '1' }, 'b2'))).to.equal('validation_failed');
    });

    it('accrues interest on the debt index as the clock advances', async () => {
      const who = await collateralised();
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1000' }, 'b');
      h.clock.advance(YEAR_MS);
      const debt = (await h.defi.borrow.summary(h.db, who)).debts[0]!;
      // 5 % APR compounded per second ≈ e^0.05 = 1.05127; Aave's 3-term expansion is a hair below.
      const owed = Number(debt.amount);
      expect(owed > 1051.2 && owed < 1051.28, debt.amount).to.equal(true);
    });
  });

  describe('createRepayment', () => {
    it('repays part, then all, leaving no scaled debt', async () => {
      const who = await collateralised('100');
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1000' }, 'b');
      h.clock.advance(30 * 24 * 3600 * 1000);
      await h.defi.borrow.repay(h.db, who, { asset: 'USDC', amount: '500' }, 'r1');
      const mid = Number((await h.defi.borrow.summary(h.db, who)).debts[0]!.amount);
      expect(mid > 500 && mid < 505).to.equal(true);
      await h.defi.borrow.repay(h.db, who, { asset: 'USDC', repay_all: true }, 'r2');
      const s = await h.defi.borrow.summary(h.db, who);
      expect(s.debts).to.deep.equal([]);
      expect(s.health_factor).to.equal(null);
      const [row] = await h.db('borrow_debts').where({ wallet_id: who.walletId });
      expect(row.scaled_amount).to.equal('0');
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'debt.repaid' })).to.have.length(2);
      expect(await errorCode(() => h.defi.borrow.repay(h.db, who, { asset: 'USDC', repay_all: true }, 'r3'))).to.equal('invalid_state_transition');
    });

    it('repays from another asset only with allow_conversion, and refuses beyond the wallet', async () => {
      const who = await collateralised('0');
      await h.ledger.ledger.deposit(h.db, { walletId: who.walletId, asset: 'EURC', amount: 1000n * E6 });
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '100' }, 'b');
      expect(await errorCode(() => h.defi.borrow.repay(h.db, who, { asset: 'USDC', amount: '50', source_asset: 'EURC' }, 'r1'))).to.equal('validation_failed');
      await h.defi.borrow.repay(h.db, who, { asset: 'USDC', amount: '54', source_asset: 'EURC', allow_conversion: true }, 'r2');
      // 54 USDC at 1.08 USD/EURC with a 0.3 % fee: 54 / 1.08 / 0.997 = 50.150451… EURC
      expect(await h.balance(who.walletId, 'EURC')).to.equal(1000n * E6 - 50_150_452n);
      expect(await errorCode(() => h.defi.borrow.repay(h.db, who, { asset: 'USDC', amount: '46', source_asset: 'WETH', allow_conversion: true }, 'r3'))).to.equal('insufficient_funds');
    });
  });

  describe('removeCollateral', () => {
    it('refuses a removal past the LTV limit and allows one within it', async () => {
      const who = await collateralised();
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1200' }, 'b');
      // 1200 / 0.805 = 1490.68 USD of collateral needed: 0.5 WETH ($1500) is the most that can go.
      expect(await errorCode(() => h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.51' }, 'c1'))).to.equal('ltv_too_high');
      expect(await errorCode(() => h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.3', max_ltv_after: 0.5 }, 'c2'))).to.equal('ltv_too_high');
      await h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.5' }, 'c3');
      expect(await h.balance(who.walletId, 'WETH')).to.equal(E18 / 2n);
      expect(await errorCode(() => h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.6' }, 'c4'))).to.equal('insufficient_funds');
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'collateral.removed' })).to.have.length(1);
    });

    it('refuses removal once the price feed drops the collateral value', async () => {
      const who = await collateralised();
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '1000' }, 'b');
      expect((await h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.1' }, 'c1')).status).to.equal('executed');
      await h.ledger.ledger.setPrice(h.db, 'WETH', '1500');
      const s = await h.defi.borrow.summary(h.db, who);
      expect(s.ltv).to.be.closeTo(1000 / 1350, 1e-8);
      expect(await errorCode(() => h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: '0.1' }, 'c2'))).to.equal('ltv_too_high');
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '100' }, 'b2'))).to.equal('ltv_too_high');
    });

    it('answers price_stale for a write on a stale collateral price', async () => {
      const who = await collateralised();
      await h.ledger.ledger.setPrice(h.db, 'WETH', '3000', new Date(h.clock.now().getTime() - 2 * 3600_000));
      expect(await errorCode(() => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '10' }, 'b'))).to.equal('price_stale');
      expect((await h.defi.borrow.summary(h.db, who)).collateral_value_usd).to.equal('3000');
    });
  });

  describe('createDeleverage', () => {
    it('repays from cash first to reach the target LTV', async () => {
      const who = await collateralised('600');
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '2000' }, 'b');
      const res = await h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.5 }, 'd');
      expect(res.status).to.equal('executed');
      const s = await h.defi.borrow.summary(h.db, who);
      expect(s.debt_usd).to.equal('1500');
      expect(s.ltv).to.be.closeTo(0.5, 1e-9);
      // The debt index of the shared market has accrued in earlier tests: the debt may round up by a unit.
      expect(Number(2600n * E6 - (await h.balance(who.walletId, 'USDC'))) / 1e6).to.be.closeTo(500, 0.00001);
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'debt.deleveraged' })).to.have.length(1);
    });

    it('sells collateral when allowed and reaches the target exactly', async () => {
      const who = await collateralised();
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '2000' }, 'b');
      await drain(who.walletId, 'USDC', 2000n * E6);
      await h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.5, allow_conversion: true }, 'd');
      const s = await h.defi.borrow.summary(h.db, who);
      // X = (2000 − 1500) / (1 − 0.003 − 0.5) = 1006.04 USD of WETH sold
      expect(Number(s.collateral_value_usd)).to.be.closeTo(3000 - 1006.04, 0.01);
      expect(s.ltv <= 0.5).to.equal(true);
      expect(s.ltv).to.be.closeTo(0.5, 1e-6);
    });

    it('answers ltv_target_unreachable without funds or conversion, and moves partly with allow_partial', async () => {
      const who = await collateralised('100');
      await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '2000' }, 'b');
      await drain(who.walletId, 'USDC', 2000n * E6);
      expect(await errorCode(() => h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.2 }, 'd1'))).to.equal('ltv_target_unreachable');
      expect(await errorCode(() => h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.2, allow_conversion: true, max_repay_amount_usd: '50' }, 'd2'))).to.equal('ltv_target_unreachable');
      await h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.2, allow_partial: true }, 'd3');
      expect(Number((await h.defi.borrow.summary(h.db, who)).debt_usd)).to.be.closeTo(1900, 0.00001);
      expect(await h.balance(who.walletId, 'USDC')).to.equal(0n);
      expect(await errorCode(() => h.defi.borrow.deleverage(h.db, who, { target_ltv: 0.7 }, 'd4'))).to.equal('invalid_state_transition');
    });
  });

  it('keeps the LTV within the limit after any accepted borrow or collateral removal (property)', async () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant('borrow' as const), usd: fc.integer({ min: 1, max: 3000 }), cap: fc.option(fc.integer({ min: 1, max: 99 })) }),
      fc.record({ kind: fc.constant('remove' as const), milli: fc.integer({ min: 1, max: 1000 }), cap: fc.option(fc.integer({ min: 1, max: 99 })) }),
      fc.record({ kind: fc.constant('price' as const), usd: fc.integer({ min: 1000, max: 6000 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 6 }), async (actions) => {
        await h.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
        const who = await collateralised();
        let n = 0;
        for (const a of actions) {
          n += 1;
          if (a.kind === 'price') {
            await h.ledger.ledger.setPrice(h.db, 'WETH', String(a.usd));
            continue;
          }
          const cap = a.cap === null ? undefined : a.cap / 100;
          try {
            if (a.kind === 'borrow') await h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount_usd: String(a.usd), max_ltv_after: cap }, `p${n}`);
            else await h.defi.borrow.removeCollateral(h.db, who, { asset: 'WETH', amount: (a.milli / 1000).toString(), max_ltv_after: cap }, `p${n}`);
          } catch (err) {
            expect(['ltv_too_high', 'insufficient_funds', 'validation_failed']).to.include((err as { code?: string }).code);
            continue;
          }
          const s = await h.defi.borrow.summary(h.db, who);
          const limit = Math.min(s.max_ltv, cap ?? 1);
          expect(s.ltv <= limit + 1e-9, `${s.ltv} > ${limit}`).to.equal(true);
        }
      }),
      { numRuns: 25 },
    );
  });

  it('admits exactly the borrows that fit when ten race on one account', async () => {
    const who = await collateralised();
    // 1 WETH at $3000 with an 80.5 % LTV allows 2415 USDC: eight borrows of 300 fit, the ninth does not.
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => h.defi.borrow.borrow(h.db, who, { asset: 'USDC', amount: '300' }, `race-${i}`)));
    expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(8);
    expect(results.filter((r) => r.status === 'rejected').map((r) => ((r as PromiseRejectedResult).reason as { code: string }).code)).to.deep.equal(['ltv_too_high', 'ltv_too_high']);
    const s = await h.defi.borrow.summary(h.db, who);
    expect(Number(s.debt_usd)).to.be.closeTo(2400, 0.0001);
    expect(s.ltv <= s.max_ltv).to.equal(true);
  });
});
