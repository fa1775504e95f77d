// Hand-computed vectors for the DeFi maths: ERC-4626, Aave v3, constant-product AMM, oracle pricing.
import { expect } from 'chai';
import * as v from '../../src/lib/defi/erc4626.js';
import * as aave from '../../src/lib/defi/aave.js';
import * as amm from '../../src/lib/defi/amm.js';
import * as pricing from '../../src/lib/defi/pricing.js';

const E18 = 10n ** 18n;
const E8 = 10n ** 8n;
const E6 = 10n ** 6n;
const YEAR = v.SECONDS_PER_YEAR;

describe('erc4626', () => {
  it('mints 10^offset shares per asset unit in an empty vault', () => {
    const empty = { totalAssets: 0n, totalShares: 0n, decimalsOffset: 6 };
    expect(v.previewDeposit(empty, 100n)).to.equal(100_000_000n);
    expect(v.previewDeposit({ ...empty, decimalsOffset: 0 }, 100n)).to.equal(100n);
  });

  it('rounds deposit and redeem down, mint and withdraw up', () => {
    // A = 1000, S = 900, offset 0: shares = 10·901/1001 = 9.001; assets = 9·1001/901 = 9.998
    const vault = { totalAssets: 1000n, totalShares: 900n, decimalsOffset: 0 };
    expect(v.previewDeposit(vault, 10n)).to.equal(9n);
    expect(v.previewWithdraw(vault, 10n)).to.equal(10n);
    expect(v.previewRedeem(vault, 9n)).to.equal(9n);
    expect(v.previewMint(vault, 9n)).to.equal(10n);
  });

  it('keeps 18-decimal vectors exact above 2^64', () => {
    // A = 5e18 + 3, S = 4e18: 1e18·(4e18+1)/(5e18+4) = 0.7999…e18; 1e18·(5e18+4)/(4e18+1) = 1.2499…e18 + ε
    const vault = { totalAssets: 5n * E18 + 3n, totalShares: 4n * E18, decimalsOffset: 0 };
    expect(v.previewDeposit(vault, E18)).to.equal(799_999_999_999_999_999n);
    expect(v.previewWithdraw(vault, E18)).to.equal(800_000_000_000_000_000n);
    expect(v.previewRedeem(vault, E18)).to.equal(1_250_000_000_000_000_000n);
    expect(v.previewMint(vault, E18)).to.equal(1_250_000_000_000_000_001n);
  });

  it('makes a first-depositor donation attack lose money when the offset is 6', () => {
    // Attacker deposits 1 wei (1e6 shares), donates 1e18; the victim then deposits 1e18.
    let vault = { totalAssets: 0n, totalShares: 0n, decimalsOffset: 6 };
    const attackerShares = v.previewDeposit(vault, 1n);
    vault = v.afterDeposit(vault, 1n, attackerShares);
    vault = { ...vault, totalAssets: vault.totalAssets + E18 };
    const victimShares = v.previewDeposit(vault, E18);
    expect(victimShares).to.equal(1_999_999n);
    vault = v.afterDeposit(vault, E18, victimShares);
    expect(v.previewRedeem(vault, victimShares)).to.equal(999_999_749_999_937_500n);
    expect(v.previewRedeem(vault, attackerShares)).to.equal(500_000_125_000_031_250n);
  });

  it('caps deposits at the capacity left', () => {
    const vault = { totalAssets: 700n, totalShares: 700n, decimalsOffset: 0 };
    expect(v.maxDeposit(vault, 1000n)).to.equal(300n);
    expect(v.maxDeposit(vault, 500n)).to.equal(0n);
    expect(v.maxDeposit(vault, null)).to.equal(null);
  });

  it('refuses a withdrawal larger than the vault', () => {
    expect(() => v.afterWithdraw({ totalAssets: 5n, totalShares: 5n, decimalsOffset: 0 }, 6n, 1n)).to.throw(RangeError);
  });

  it('derives ln(1 + APY) so that one year yields the APY, rounded down', () => {
    // ln(1.05) = 0.048790164169432003065374404223…
    expect(v.continuousRateRayFromApyBps(500n) / 10n ** 9n).to.equal(48_790_164_169_432_003n);
    const after = v.accrueTotalAssets(1_000_000_000n, 500n, YEAR);
    expect(after <= 1_050_000_000n && after >= 1_049_999_999n, String(after)).to.equal(true);
    // 18 decimals: 1000 WETH at 100 % APY for a year doubles, never more.
    const doubled = v.accrueTotalAssets(1000n * E18, 10_000n, YEAR);
    expect(doubled <= 2000n * E18 && doubled >= 2000n * E18 - 10n ** 6n).to.equal(true);
  });

  it('accrues nothing at zero APY or zero elapsed time', () => {
    expect(v.accrueTotalAssets(123_456n, 0n, YEAR)).to.equal(123_456n);
    expect(v.accrueTotalAssets(123_456n, 500n, 0n)).to.equal(123_456n);
  });

  it('accrues rewards per share and rounds earned rewards down', () => {
    // 0.5 reward units per share per year (RAY): half a year -> 0.25 per share.
    const rate = v.RAY / 2n;
    const acc = v.rewardPerShareDelta(rate, YEAR / 2n);
    expect(acc).to.equal(v.RAY / 4n);
    expect(v.earnedRewards(10n, acc, 0n)).to.equal(2n); // 2.5 -> 2
    expect(v.earnedRewards(10n, acc, acc)).to.equal(0n);
  });
});

describe('aave', () => {
  const weth = (amount: bigint, price = 3000n * E8): aave.CollateralInput => ({ amount, decimals: 18, priceE8: price, ltvBps: 8050n, liquidationThresholdBps: 8300n });
  const usdcDebt = (amount: bigint): aave.DebtInput => ({ amount, decimals: 6, priceE8: E8 });

  it('computes collateral, debt, LTV, health factor and available borrows for 10 WETH against 15000 USDC', () => {
    const data = aave.calculateAccountData([weth(10n * E18)], [usdcDebt(15_000n * E6)]);
    expect(data.totalCollateralUsd).to.equal(30_000n * E8);
    expect(data.totalDebtUsd).to.equal(15_000n * E8);
    expect(data.avgLtvBps).to.equal(8050n);
    expect(data.avgLiquidationThresholdBps).to.equal(8300n);
    expect(data.healthFactorWad).to.equal(1_660_000_000_000_000_000n);
    expect(data.currentLtvWad).to.equal(E18 / 2n);
    expect(data.availableBorrowsUsd).to.equal(9_150n * E8);
  });

  it('weights LTV and threshold by collateral value and rounds them down', () => {
    const btc: aave.CollateralInput = { amount: 10_000_000n, decimals: 8, priceE8: 100_000n * E8, ltvBps: 7300n, liquidationThresholdBps: 7800n };
    // WETH $30000 @ 8050/8300, cbBTC 0.1 = $10000 @ 7300/7800: (3·8050 + 7300)/4 = 7862.5 -> 7862
    const data = aave.calculateAccountData([weth(10n * E18), btc], []);
    expect(data.totalCollateralUsd).to.equal(40_000n * E8);
    expect(data.avgLtvBps).to.equal(7862n);
    expect(data.avgLiquidationThresholdBps).to.equal(8175n);
    expect(data.healthFactorWad).to.equal(aave.MAX_HEALTH_FACTOR);
    expect(data.currentLtvWad).to.equal(0n);
  });

  it('values collateral down and debt up', () => {
    // 1 wei of WETH at $3000 is 3e-15 USD: collateral 0, debt 1 unit of 1e-8 USD.
    expect(aave.valueUsd(1n, 3000n * E8, 18, 'down')).to.equal(0n);
    expect(aave.valueUsd(1n, 3000n * E8, 18, 'up')).to.equal(1n);
  });

  it('rounds the health factor down and the LTV up', () => {
    // C·LT = 100·8000 / 3 -> HF = 2.666…; LTV = 3/100
    expect(aave.healthFactor(100n, 8000n, 30n)).to.equal(2_666_666_666_666_666_666n);
    expect(aave.currentLtv(300n, 7n)).to.equal(23_333_333_333_333_334n);
  });

  it('finds the liquidation price of a single collateral', () => {
    // P = D·10000·1e18 / (10e18·8300) = 15000·1e8 / 8.3 = 1807.22891566… -> rounded up
    const price = aave.liquidationPrice([weth(10n * E18)], 0, 15_000n * E8);
    expect(price).to.equal(180_722_891_567n);
    // At that price, HF is >= 1; one unit below, it is < 1.
    const at = aave.calculateAccountData([weth(10n * E18, price!)], [usdcDebt(15_000n * E6)]);
    const below = aave.calculateAccountData([weth(10n * E18, price! - 1n)], [usdcDebt(15_000n * E6)]);
    expect(at.healthFactorWad >= E18).to.equal(true);
    expect(below.healthFactorWad < E18).to.equal(true);
    expect(aave.liquidationPrice([weth(10n * E18)], 0, 0n)).to.equal(null);
  });

  it('compounds the borrow index as Aave MathUtils and rounds debt up', () => {
    // 10 % APR for a year: 1 + 0.1 + 0.005 + r³/6 (Aave truncates base^3 per second to an integer
    // of RAY, which gives 0.000162 instead of 0.000167), below e^0.1 = 1.1051709.
    const index = aave.accrueIndex(aave.RAY, 1000n, YEAR);
    expect(index).to.equal(1_105_162_042_821_782_412_575_504_000n);
    expect(index < 1_105_170_918n * 10n ** 18n).to.equal(true);
    expect(aave.accrueIndex(aave.RAY, 1000n, 0n)).to.equal(aave.RAY);
    // 100 units at index 1.5: scaled 66.67 -> 67 on borrow, owed 67·1.5 = 100.5 -> 101
    const idx = (aave.RAY * 3n) / 2n;
    expect(aave.scaledForBorrow(100n, idx)).to.equal(67n);
    expect(aave.scaledForRepay(100n, idx)).to.equal(66n);
    expect(aave.debtOf(67n, idx)).to.equal(101n);
  });

  it('solves the deleverage sale and cash repayment for a target LTV', () => {
    // C 10000, D 6000, t 50 %: X = (6000 − 5000)/(1 − 0.5) = 2000. With a 1 % fee the closed form
    // gives 2040.8 -> 2041, but the whole-unit fee ceil(20.41) = 21 leaves (6000 − 2020)/7959 > 50 %;
    // 2042 repays 2021: 3979/7958 = 50 %.
    expect(aave.collateralToSellForTarget(10_000n, 6000n, 5000n, 0n)).to.equal(2000n);
    expect(aave.collateralToSellForTarget(10_000n, 6000n, 5000n, 100n)).to.equal(2042n);
    expect(aave.collateralToSellForTarget(10_000n, 4000n, 5000n, 100n)).to.equal(0n);
    expect(aave.collateralToSellForTarget(10_000n, 9990n, 9950n, 100n)).to.equal(null);
    expect(aave.repayForTarget(10_000n, 6000n, 5000n)).to.equal(1000n);
    expect(aave.repayForTarget(10_000n, 4000n, 5000n)).to.equal(0n);
  });

  it('turns ratios into bps rounding down and refuses out-of-range ratios', () => {
    expect(aave.ratioToBps(0.5)).to.equal(5000n);
    expect(aave.ratioToBps(0.12345)).to.equal(1234n);
    expect(aave.ratioToBps(0.07)).to.equal(700n);
    expect(() => aave.ratioToBps(1)).to.throw(RangeError);
  });

  it('binds the LTV limit to the smallest of the market and the caps', () => {
    expect(aave.ltvLimitBps(8050n, 5000n, null)).to.equal(5000n);
    expect(aave.ltvLimitBps(8050n, undefined, 9000n)).to.equal(8050n);
    const check = aave.checkPosition([weth(10n * E18)], [usdcDebt(15_000n * E6)], 5000n);
    expect(check.ok).to.equal(true);
    expect(aave.checkPosition([weth(10n * E18)], [usdcDebt(15_000n * E6 + 1n)], 5000n).ok).to.equal(false);
  });
});

describe('amm', () => {
  it('prices a constant-product swap like UniswapV2Library', () => {
    // 1000·9970·1e6 / (1e6·1e4 + 9 970 000) = 996.006 -> 996; input for 996: 999.99 -> 999 + 1
    expect(amm.getAmountOut(1000n, E6, E6, 30n)).to.equal(996n);
    expect(amm.getAmountIn(996n, E6, E6, 30n)).to.equal(1000n);
    // Exact division: Uniswap's `/ … + 1` would ask 2 for what 1 bought; the ceiling asks 1.
    const reserveOut = 201709539152217880739827800n;
    const bought = amm.getAmountOut(1n, 19n, reserveOut, 0n);
    expect(bought).to.equal(reserveOut / 20n);
    expect(amm.getAmountIn(bought, 19n, reserveOut, 0n)).to.equal(1n);
    expect(() => amm.getAmountIn(E6, E6, E6, 30n)).to.throw(RangeError);
    expect(() => amm.getAmountOut(0n, E6, E6, 30n)).to.throw(RangeError);
  });

  it('floors the slippage minimum', () => {
    expect(amm.minAmountOut(1_000_000n, 50n)).to.equal(995_000n);
    expect(amm.minAmountOut(999_999n, 50n)).to.equal(994_999n);
    expect(amm.minAmountOut(999_999n, 0n)).to.equal(999_999n);
  });

  it('measures price impact against the spot price', () => {
    // spot 1000, out 996 -> 40 bps
    expect(amm.priceImpactBps(1000n, 996n, E6, E6)).to.equal(40n);
  });

  it('reads slippage_percent as whole bps only', () => {
    expect(amm.slippagePercentToBps(0.5)).to.equal(50n);
    expect(amm.slippagePercentToBps(1)).to.equal(100n);
    expect(amm.slippagePercentToBps(0.001)).to.equal(null);
    expect(amm.slippagePercentToBps(100)).to.equal(null);
    expect(amm.slippagePercentToBps(-1)).to.equal(null);
  });
});

describe('pricing', () => {
  const WETH = { symbol: 'WETH', decimals: 18, priceE8: 3000n * E8 };
  const USDC = { symbol: 'USDC', decimals: 6, priceE8: E8 };

  it('converts 1 WETH to USDC at the feed with a 30 bps fee in the output', () => {
    expect(pricing.convertAtPrice(E18, WETH, USDC, 30n)).to.deep.equal({ grossOut: 3000n * E6, fee: 9n * E6, netOut: 2991n * E6 });
    expect(pricing.humanRate(E18, 2991n * E6, WETH, USDC)).to.equal('1 WETH = 2991 USDC');
  });

  it('rounds the output down and the fee up from 6 to 18 decimals', () => {
    // 100 USDC -> 0.0333… WETH: gross 33333333333333333, fee ceil(99999999999999.999) = 1e14
    const q = pricing.convertAtPrice(100n * E6, USDC, WETH, 30n);
    expect(q.grossOut).to.equal(33_333_333_333_333_333n);
    expect(q.fee).to.equal(100_000_000_000_000n);
    expect(q.netOut).to.equal(33_233_333_333_333_333n);
  });

  it('finds the smallest input for a wanted output', () => {
    const input = pricing.inputForOutput(2991n * E6, WETH, USDC, 30n);
    expect(input).to.equal(E18);
    expect(pricing.convertAtPrice(input - 1n, WETH, USDC, 30n).netOut < 2991n * E6).to.equal(true);
  });

  it('values and un-values USD with 8 decimals', () => {
    expect(pricing.toUsd(1_500_000n, USDC)).to.equal(150_000_000n);
    expect(pricing.formatUsd(150_000_000n)).to.equal('1.5');
    expect(pricing.fromUsd(100n * E8, WETH)).to.equal(33_333_333_333_333_333n);
    expect(pricing.isStale(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-01T00:05:01Z'), 300_000)).to.equal(true);
    expect(pricing.isStale(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-01T00:05:00Z'), 300_000)).to.equal(false);
  });
});
