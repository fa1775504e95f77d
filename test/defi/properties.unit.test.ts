// fast-check properties of the DeFi maths: no value leaks to the user, share price rises with time,
// accepted positions stay within their LTV limit, AMM and oracle conversions never over-pay.
import { expect } from 'chai';
import fc from 'fast-check';
import * as v from '../../src/lib/defi/erc4626.js';
import * as aave from '../../src/lib/defi/aave.js';
import * as amm from '../../src/lib/defi/amm.js';
import * as pricing from '../../src/lib/defi/pricing.js';

const E8 = 10n ** 8n;
const amount = (max: bigint) => fc.bigInt({ min: 1n, max });
const vaultArb = fc
  .record({ totalAssets: fc.bigInt({ min: 0n, max: 10n ** 30n }), sharesPerAsset: fc.bigInt({ min: 1n, max: 10n ** 6n }), decimalsOffset: fc.constantFrom(0, 6, 12) })
  .map(({ totalAssets, sharesPerAsset, decimalsOffset }) => ({ totalAssets, totalShares: totalAssets * sharesPerAsset, decimalsOffset }));
const apyBps = fc.bigInt({ min: 0n, max: 50_000n });
const seconds = fc.bigInt({ min: 0n, max: 10n * v.SECONDS_PER_YEAR });

describe('defi properties', () => {
  it('never returns more than deposited plus the accrued interest on deposit then withdraw', () => {
    fc.assert(
      fc.property(vaultArb, amount(10n ** 30n), apyBps, seconds, (vault, deposit, apy, dt) => {
        const shares = v.previewDeposit(vault, deposit);
        const afterDeposit = v.afterDeposit(vault, deposit, shares);
        const accrued = { ...afterDeposit, totalAssets: v.accrueTotalAssets(afterDeposit.totalAssets, apy, dt) };
        const out = v.previewRedeem(accrued, shares);
        // out ≤ deposit · (A' + 1) / (A + 1): the depositor's pro-rata share of the vault's growth.
        expect(out * (afterDeposit.totalAssets + 1n) <= deposit * (accrued.totalAssets + 1n)).to.equal(true);
        if (dt === 0n || apy === 0n) expect(out <= deposit).to.equal(true);
      }),
      { numRuns: 500 },
    );
  });

  it('never pays out more than a withdrawal of exactly `assets` burns', () => {
    fc.assert(
      fc.property(vaultArb, amount(10n ** 30n), (vault, assets) => {
        fc.pre(vault.totalShares > 0n);
        const burn = v.previewWithdraw(vault, assets);
        // Redeeming the shares burned must be worth at least the assets paid out.
        expect(v.previewRedeem(vault, burn) >= assets || v.previewMint(vault, burn) >= assets).to.equal(true);
        expect(v.convertToAssets(vault, burn, 'up') >= assets).to.equal(true);
      }),
      { numRuns: 500 },
    );
  });

  it('strictly raises the share price as the clock advances at a positive APY', () => {
    fc.assert(
      fc.property(vaultArb, fc.bigInt({ min: 1n, max: 50_000n }), fc.bigInt({ min: 1n, max: v.SECONDS_PER_YEAR }), fc.bigInt({ min: 1n, max: v.SECONDS_PER_YEAR }), (vault, apy, t1, step) => {
        // Interest below one base unit cannot move an integer vault: require A·(e^(rt) − 1) ≥ A·r·t ≥ 2 units,
        // with r = ln(1 + APY) the continuous rate the vault compounds at.
        fc.pre(vault.totalAssets * v.continuousRateRayFromApyBps(apy) * t1 >= 2n * v.RAY * v.SECONDS_PER_YEAR);
        const a1 = v.accrueTotalAssets(vault.totalAssets, apy, t1);
        const a2 = v.accrueTotalAssets(vault.totalAssets, apy, t1 + step);
        // price = (A + 1) / (S + 10^offset); S is unchanged, so the price rises iff A does.
        expect(a1 > vault.totalAssets).to.equal(true);
        expect(a2 >= a1).to.equal(true);
        const base = v.previewRedeem(vault, 10n ** 30n);
        expect(v.previewRedeem({ ...vault, totalAssets: a1 }, 10n ** 30n) > base || vault.totalShares > 10n ** 30n).to.equal(true);
      }),
      { numRuns: 2000 },
    );
  });

  const collateralArb = fc
    .record({
      amount: fc.bigInt({ min: 0n, max: 10n ** 24n }),
      decimals: fc.constantFrom(6, 8, 18),
      priceE8: fc.bigInt({ min: 1n, max: 200_000n * E8 }),
      ltvBps: fc.bigInt({ min: 0n, max: 9000n }),
    })
    .map((c) => ({ ...c, liquidationThresholdBps: c.ltvBps + 300n }));
  const debtArb = fc.record({ amount: fc.bigInt({ min: 0n, max: 10n ** 24n }), decimals: fc.constantFrom(6, 18), priceE8: fc.bigInt({ min: 1n, max: 5000n * E8 }) });

  it('keeps the LTV within the limit after any accepted borrow', () => {
    fc.assert(
      fc.property(
        fc.array(collateralArb, { minLength: 1, maxLength: 3 }),
        debtArb,
        fc.bigInt({ min: 1n, max: 10n ** 24n }),
        fc.option(fc.bigInt({ min: 0n, max: 9999n })),
        (collaterals, debt, borrow, cap) => {
          const check = aave.checkPosition(collaterals, [{ ...debt, amount: debt.amount + borrow }], cap);
          if (!check.ok) return;
          const { totalCollateralUsd, totalDebtUsd, currentLtvWad } = check.data;
          expect(totalDebtUsd * aave.BPS <= totalCollateralUsd * check.limitBps).to.equal(true);
          expect(currentLtvWad <= check.limitBps * 10n ** 14n).to.equal(true);
          if (cap !== null) expect(check.limitBps <= cap).to.equal(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('keeps the LTV within the limit after any accepted collateral removal', () => {
    fc.assert(
      fc.property(fc.array(collateralArb, { minLength: 1, maxLength: 3 }), debtArb, fc.nat(), fc.bigInt({ min: 0n, max: 10n ** 24n }), (collaterals, debt, pick, remove) => {
        const i = pick % collaterals.length;
        const after = collaterals.map((c, j) => (j === i ? { ...c, amount: c.amount > remove ? c.amount - remove : 0n } : c));
        const check = aave.checkPosition(after, [debt]);
        if (!check.ok) return;
        expect(check.data.totalDebtUsd === 0n || check.data.currentLtvWad <= check.data.avgLtvBps * 10n ** 14n).to.equal(true);
        // And the health factor of an accepted position is at least 1 (LT > LTV).
        expect(check.data.healthFactorWad >= 10n ** 18n || check.data.totalDebtUsd === 0n).to.equal(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('reaches the deleverage target when selling collateral by the solved amount', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 20n }), fc.bigInt({ min: 1n, max: 9000n }), fc.bigInt({ min: 0n, max: 8999n }), fc.bigInt({ min: 0n, max: 300n }), (c, ltvBps, targetBps, fee) => {
        const d = (c * ltvBps) / aave.BPS;
        const x = aave.collateralToSellForTarget(c, d, targetBps, fee);
        if (x === null) return;
        expect(x <= c).to.equal(true);
        const repaid = x - aave.mulDivUp(x, fee);
        const debtAfter = d > repaid ? d - repaid : 0n;
        expect(debtAfter * aave.BPS <= (c - x) * targetBps || debtAfter === 0n).to.equal(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('never lets a constant-product swap lower k or return more than the inverse asks', () => {
    fc.assert(
      fc.property(amount(10n ** 27n), amount(10n ** 27n), amount(10n ** 27n), fc.bigInt({ min: 0n, max: 1000n }), (amountIn, rIn, rOut, fee) => {
        const out = amm.getAmountOut(amountIn, rIn, rOut, fee);
        expect((rIn + amountIn) * (rOut - out) >= rIn * rOut).to.equal(true);
        if (out > 0n) expect(amm.getAmountIn(out, rIn, rOut, fee) <= amountIn).to.equal(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('never converts at the feed to more than the exact value and keeps the minimum below the expected output', () => {
    const asset = fc.record({ symbol: fc.constant('X'), decimals: fc.constantFrom(6, 8, 18), priceE8: fc.bigInt({ min: 1n, max: 10n ** 14n }) });
    fc.assert(
      fc.property(amount(10n ** 27n), asset, asset, fc.bigInt({ min: 0n, max: 1000n }), fc.bigInt({ min: 0n, max: 10_000n }), (amountIn, from, to, fee, slip) => {
        const q = pricing.convertAtPrice(amountIn, from, to, fee);
        // grossOut · p_out · 10^dec_in ≤ in · p_in · 10^dec_out (exact value, cross-multiplied)
        expect(q.grossOut * to.priceE8 * 10n ** BigInt(from.decimals) <= amountIn * from.priceE8 * 10n ** BigInt(to.decimals)).to.equal(true);
        expect(q.fee * aave.BPS >= q.grossOut * fee).to.equal(true);
        expect(amm.minAmountOut(q.netOut, slip) <= q.netOut).to.equal(true);
      }),
      { numRuns: 1000 },
    );
  });
});
