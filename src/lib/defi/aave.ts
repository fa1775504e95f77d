// Borrow maths after Aave v3: collateral value, average LTV and liquidation threshold, health
// factor, available borrows, debt index accrual, liquidation price and the deleverage solver.
import { mulDiv } from '../money.js';

/**
 * Sources (aave/aave-v3-core):
 * - logic/GenericLogic.sol `calculateUserAccountData`: per reserve
 *     value_i = amount_i · price_i / 10^decimals_i   (base currency = USD with 8 decimals)
 *     avgLtv = Σ value_i·ltv_i / C,  avgLiquidationThreshold = Σ value_i·lt_i / C
 *     healthFactor = (C · avgLT / 10000).wadDiv(D)   (type(uint256).max when D = 0)
 * - logic/GenericLogic.sol `calculateAvailableBorrows`:
 *     available = max(0, C · avgLtv / 10000 − D)
 * - math/MathUtils.sol `calculateCompoundedInterest` (variable borrow index):
 *     1 + r·t + t(t−1)r²/2 + t(t−1)(t−2)r³/6, r = rate per second; debt = scaledDebt · index.
 * Aave rounds half-up in WadRayMath/PercentageMath; here every rounding goes against the user:
 * collateral value down, debt up, LTV up, health factor down, available borrows down.
 */
export const WAD = 10n ** 18n;
export const RAY = 10n ** 27n;
export const BPS = 10_000n;
export const SECONDS_PER_YEAR = 365n * 24n * 3600n;
/** Prices and USD values carry 8 decimals, as Aave's base currency. */
export const USD_DECIMALS = 8;
export const MAX_HEALTH_FACTOR = 2n ** 256n - 1n;

export type Rounding = 'down' | 'up';

/** value = amount · price / 10^decimals, in USD with 8 decimals. */
export const valueUsd = (amount: bigint, priceE8: bigint, decimals: number, rounding: Rounding): bigint => mulDiv(amount, priceE8, 10n ** BigInt(decimals), rounding);

/** amount = usd · 10^decimals / price: the asset units worth `usdE8`. */
export const amountForUsd = (usdE8: bigint, priceE8: bigint, decimals: number, rounding: Rounding): bigint => mulDiv(usdE8, 10n ** BigInt(decimals), priceE8, rounding);

export interface CollateralInput {
  amount: bigint;
  decimals: number;
  priceE8: bigint;
  ltvBps: bigint;
  liquidationThresholdBps: bigint;
}

export interface DebtInput {
  amount: bigint;
  decimals: number;
  priceE8: bigint;
}

export interface AccountData {
  totalCollateralUsd: bigint;
  totalDebtUsd: bigint;
  /** Weighted average max LTV of the collateral (bps), rounded down. */
  avgLtvBps: bigint;
  /** Weighted average liquidation threshold (bps), rounded down. */
  avgLiquidationThresholdBps: bigint;
  /** WAD; MAX_HEALTH_FACTOR when there is no debt. Rounded down. */
  healthFactorWad: bigint;
  /** Current LTV = D / C in WAD, rounded up; 0 without debt; MAX when debt without collateral. */
  currentLtvWad: bigint;
  availableBorrowsUsd: bigint;
}

/** GenericLogic.calculateUserAccountData, against-the-user rounding. */
export function calculateAccountData(collaterals: CollateralInput[], debts: DebtInput[]): AccountData {
  let totalCollateralUsd = 0n;
  let weightedLtv = 0n;
  let weightedLt = 0n;
  for (const c of collaterals) {
    const v = valueUsd(c.amount, c.priceE8, c.decimals, 'down');
    totalCollateralUsd += v;
    weightedLtv += v * c.ltvBps;
    weightedLt += v * c.liquidationThresholdBps;
  }
  let totalDebtUsd = 0n;
  for (const d of debts) totalDebtUsd += valueUsd(d.amount, d.priceE8, d.decimals, 'up');
  const avgLtvBps = totalCollateralUsd === 0n ? 0n : weightedLtv / totalCollateralUsd;
  const avgLiquidationThresholdBps = totalCollateralUsd === 0n ? 0n : weightedLt / totalCollateralUsd;
  return {
    totalCollateralUsd,
    totalDebtUsd,
    avgLtvBps,
    avgLiquidationThresholdBps,
    healthFactorWad: healthFactor(totalCollateralUsd, avgLiquidationThresholdBps, totalDebtUsd),
    currentLtvWad: currentLtv(totalCollateralUsd, totalDebtUsd),
    availableBorrowsUsd: availableBorrows(totalCollateralUsd, avgLtvBps, totalDebtUsd),
  };
}

/** HF = (C · LT / 10000) / D in WAD, rounded down. */
export function healthFactor(collateralUsd: bigint, ltBps: bigint, debtUsd: bigint): bigint {
  if (debtUsd === 0n) return MAX_HEALTH_FACTOR;
  return mulDiv(collateralUsd * ltBps, WAD, debtUsd * BPS, 'down');
}

/** LTV = D / C in WAD, rounded up. */
export function currentLtv(collateralUsd: bigint, debtUsd: bigint): bigint {
  if (debtUsd === 0n) return 0n;
  if (collateralUsd === 0n) return MAX_HEALTH_FACTOR;
  return mulDiv(debtUsd, WAD, collateralUsd, 'up');
}

/** max(0, C · ltv / 10000 − D), rounded down. */
export function availableBorrows(collateralUsd: bigint, ltvBps: bigint, debtUsd: bigint): bigint {
  const capacity = mulDiv(collateralUsd, ltvBps, BPS, 'down');
  return capacity > debtUsd ? capacity - debtUsd : 0n;
}

/** Exact check D / C ≤ limit (cross-multiplied, no rounding): the invariant every borrow keeps. */
export function isLtvWithin(collateralUsd: bigint, debtUsd: bigint, limitBps: bigint): boolean {
  return debtUsd * BPS <= collateralUsd * limitBps;
}

/**
 * Liquidation price of one collateral asset (USD 8 decimals per whole unit) with every other
 * position held constant: the price at which HF reaches 1, i.e.
 *   Σ_{j≠i} value_j·lt_j + amount_i·P·lt_i / 10^dec_i = D · 10000
 * Rounded up (the warning price is never later than the true one). null without debt or amount;
 * 0 when the other collateral alone keeps HF ≥ 1.
 */
export function liquidationPrice(collaterals: CollateralInput[], index: number, debtUsd: bigint): bigint | null {
  const target = collaterals[index];
  if (!target || debtUsd === 0n || target.amount === 0n || target.liquidationThresholdBps === 0n) return null;
  let others = 0n;
  collaterals.forEach((c, j) => {
    if (j !== index) others += valueUsd(c.amount, c.priceE8, c.decimals, 'down') * c.liquidationThresholdBps;
  });
  const needed = debtUsd * BPS - others;
  if (needed <= 0n) return 0n;
  return mulDiv(needed, 10n ** BigInt(target.decimals), target.amount * target.liquidationThresholdBps, 'up');
}

// ---------------------------------------------------------------------------------------------
// Debt index (RAY). Borrows add scaled debt = amount / index (rounded up); repayments remove
// amount / index (rounded down); the debt owed is scaled · index (rounded up).

/** MathUtils.calculateCompoundedInterest (Aave v3.0), rounded up (interest owed never under-counted). */
export function compoundedInterestRay(aprRay: bigint, seconds: bigint): bigint {
  if (seconds <= 0n) return RAY;
  const exp = seconds;
  const expMinusOne = exp - 1n;
  const expMinusTwo = exp > 2n ? exp - 2n : 0n;
  const basePowerTwo = mulDiv(aprRay, aprRay, RAY, 'up') / (SECONDS_PER_YEAR * SECONDS_PER_YEAR);
  const basePowerThree = mulDiv(basePowerTwo, aprRay, RAY, 'up') / SECONDS_PER_YEAR;
  const secondTerm = (exp * expMinusOne * basePowerTwo) / 2n;
  const thirdTerm = (exp * expMinusOne * expMinusTwo * basePowerThree) / 6n;
  return RAY + mulDiv(aprRay, exp, SECONDS_PER_YEAR, 'up') + secondTerm + thirdTerm;
}

export const aprBpsToRay = (aprBps: bigint): bigint => (aprBps * RAY) / BPS;

/** The new borrow index after `seconds` at `aprBps`, rounded up. */
export const accrueIndex = (indexRay: bigint, aprBps: bigint, seconds: bigint): bigint => mulDiv(indexRay, compoundedInterestRay(aprBpsToRay(aprBps), seconds), RAY, 'up');

export const scaledForBorrow = (amount: bigint, indexRay: bigint): bigint => mulDiv(amount, RAY, indexRay, 'up');
export const scaledForRepay = (amount: bigint, indexRay: bigint): bigint => mulDiv(amount, RAY, indexRay, 'down');
export const debtOf = (scaled: bigint, indexRay: bigint): bigint => mulDiv(scaled, indexRay, RAY, 'up');

// ---------------------------------------------------------------------------------------------
// Deleverage.

/**
 * Cash repayment that brings LTV to at most `targetBps`: R = D − t·C/10000 (rounded up).
 * 0 when already at or below the target.
 */
export function repayForTarget(collateralUsd: bigint, debtUsd: bigint, targetBps: bigint): bigint {
  const allowed = mulDiv(collateralUsd, targetBps, BPS, 'down');
  return debtUsd > allowed ? debtUsd - allowed : 0n;
}

/**
 * Collateral value X to sell (and repay with, losing fee f) to reach LTV t:
 *   (D − X(1 − f)) / (C − X) = t   ⇒   X = (D − t·C) / ((1 − f) − t)
 * in bps: X = (D·10000 − t·C) / (10000 − f − t), rounded up. null when unreachable
 * (1 − f ≤ t: selling collateral cannot lower the LTV, or more than all collateral would be needed).
 */
export function collateralToSellForTarget(collateralUsd: bigint, debtUsd: bigint, targetBps: bigint, feeBps: bigint): bigint | null {
  const numerator = debtUsd * BPS - targetBps * collateralUsd;
  if (numerator <= 0n) return 0n;
  const denominator = BPS - feeBps - targetBps;
  if (denominator <= 0n) return null;
  let sell = mulDiv(numerator, 1n, denominator, 'up');
  // The fee is charged in whole units rounded up, so the closed form can fall a unit short: step up.
  const reaches = (x: bigint): boolean => {
    const repaid = x - mulDiv(x, feeBps, BPS, 'up');
    const debtAfter = debtUsd > repaid ? debtUsd - repaid : 0n;
    return debtAfter === 0n || debtAfter * BPS <= (collateralUsd - x) * targetBps;
  };
  while (sell <= collateralUsd && !reaches(sell)) sell += 1n;
  return sell <= collateralUsd ? sell : null;
}

/** A ratio in [0, 1) given as a JSON number, as bps rounded down (a stricter limit). */
export function ratioToBps(ratio: number): bigint {
  if (!Number.isFinite(ratio) || ratio < 0 || ratio >= 1) throw new RangeError('ratio must be in [0, 1)');
  return BigInt(Math.floor(Math.round(ratio * 1e8) / 1e4));
}

// ---------------------------------------------------------------------------------------------
// The one decision every borrow and collateral removal takes (so tests exercise the same code).

/** The binding LTV limit: the collateral's weighted max LTV, capped by the caller's or policy's limit. */
export function ltvLimitBps(avgLtvBps: bigint, ...caps: Array<bigint | null | undefined>): bigint {
  let limit = avgLtvBps;
  for (const cap of caps) if (cap !== null && cap !== undefined && cap < limit) limit = cap;
  return limit;
}

export interface PositionCheck {
  data: AccountData;
  limitBps: bigint;
  ok: boolean;
}

/** Accepts a would-be position when it has no debt or D / C ≤ limit exactly. */
export function checkPosition(collaterals: CollateralInput[], debts: DebtInput[], ...caps: Array<bigint | null | undefined>): PositionCheck {
  const data = calculateAccountData(collaterals, debts);
  const limitBps = ltvLimitBps(data.avgLtvBps, ...caps);
  const ok = data.totalDebtUsd === 0n || isLtvWithin(data.totalCollateralUsd, data.totalDebtUsd, limitBps);
  return { data, limitBps, ok };
}

/** ceil(x · bps / 10000): a fee or haircut, rounded against the user. */
export const mulDivUp = (x: bigint, bps: bigint): bigint => mulDiv(x, bps, BPS, 'up');
