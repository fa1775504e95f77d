// ERC-4626 share accounting for earn vaults, with the virtual offset against the inflation attack,
// lazy interest accrual from a configured APY and per-share reward accumulation. Pure bigint maths.
import { mulDiv } from '../money.js';

/**
 * Sources:
 * - EIP-4626 (https://eips.ethereum.org/EIPS/eip-4626): "previewDeposit/previewRedeem round down,
 *   previewMint/previewWithdraw round up" so the vault never gives away value to the caller.
 * - OpenZeppelin Contracts v5 `token/ERC20/extensions/ERC4626.sol`:
 *     _convertToShares(a, r) = a.mulDiv(totalSupply + 10**_decimalsOffset(), totalAssets + 1, r)
 *     _convertToAssets(s, r) = s.mulDiv(totalAssets + 1, totalSupply + 10**_decimalsOffset(), r)
 *   The virtual shares (10**offset) and the virtual asset (+1) make a first-depositor donation
 *   attack cost the attacker more than it can steal, and give a 1:10**offset price in an empty vault.
 */
export type Rounding = 'down' | 'up';

export interface VaultState {
  /** totalAssets(): principal plus accrued interest, in asset base units. */
  totalAssets: bigint;
  /** totalSupply() of vault shares. */
  totalShares: bigint;
  /** _decimalsOffset(): shares carry this many more decimals than the asset. */
  decimalsOffset: number;
}

const virtualShares = (v: VaultState): bigint => v.totalShares + 10n ** BigInt(v.decimalsOffset);
const virtualAssets = (v: VaultState): bigint => v.totalAssets + 1n;

export function convertToShares(v: VaultState, assets: bigint, rounding: Rounding): bigint {
  return mulDiv(assets, virtualShares(v), virtualAssets(v), rounding);
}

export function convertToAssets(v: VaultState, shares: bigint, rounding: Rounding): bigint {
  return mulDiv(shares, virtualAssets(v), virtualShares(v), rounding);
}

/** Shares minted for depositing `assets`: rounded down (EIP-4626 previewDeposit). */
export const previewDeposit = (v: VaultState, assets: bigint): bigint => convertToShares(v, assets, 'down');
/** Assets needed to mint `shares`: rounded up (previewMint). */
export const previewMint = (v: VaultState, shares: bigint): bigint => convertToAssets(v, shares, 'up');
/** Shares burned to withdraw exactly `assets`: rounded up (previewWithdraw). */
export const previewWithdraw = (v: VaultState, assets: bigint): bigint => convertToShares(v, assets, 'up');
/** Assets paid out for redeeming `shares`: rounded down (previewRedeem). */
export const previewRedeem = (v: VaultState, shares: bigint): bigint => convertToAssets(v, shares, 'down');

/** maxDeposit with a capacity cap (null = unlimited): what still fits below the cap. */
export function maxDeposit(v: VaultState, capacity: bigint | null): bigint | null {
  if (capacity === null) return null;
  return capacity > v.totalAssets ? capacity - v.totalAssets : 0n;
}

/** The state after a deposit of `assets` minting `shares`. */
export const afterDeposit = (v: VaultState, assets: bigint, shares: bigint): VaultState => ({
  ...v,
  totalAssets: v.totalAssets + assets,
  totalShares: v.totalShares + shares,
});

/** The state after a withdrawal paying `assets` and burning `shares`. */
export function afterWithdraw(v: VaultState, assets: bigint, shares: bigint): VaultState {
  if (assets > v.totalAssets || shares > v.totalShares) throw new RangeError('withdrawal exceeds the vault');
  return { ...v, totalAssets: v.totalAssets - assets, totalShares: v.totalShares - shares };
}

// ---------------------------------------------------------------------------------------------
// Interest: a rising share price. totalAssets grows with time, totalSupply does not.

export const RAY = 10n ** 27n;
export const SECONDS_PER_YEAR = 365n * 24n * 3600n;
export const BPS = 10_000n;

/**
 * ln(1 + apy) in RAY, i.e. the continuously compounded annual rate equivalent to the configured
 * APY, so that a whole year of accrual yields exactly (to RAY precision) the advertised APY:
 * e^(ln(1+apy)) = 1 + apy. Series: ln(1+x) = 2·atanh(y) = 2·(y + y³/3 + y⁵/5 + …), y = x/(2+x),
 * which converges fast for every x ≥ 0 (y < 1). Truncation rounds down (against the depositor).
 */
export function continuousRateRayFromApyBps(apyBps: bigint): bigint {
  if (apyBps < 0n) throw new RangeError('negative APY');
  if (apyBps === 0n) return 0n;
  // y = x / (2 + x) with x = apyBps / 10000  =>  y = apyBps / (20000 + apyBps)
  const y = (apyBps * RAY) / (2n * BPS + apyBps);
  const y2 = (y * y) / RAY;
  let term = y;
  let sum = 0n;
  for (let k = 1n; term > 0n; k += 2n) {
    sum += term / k;
    term = (term * y2) / RAY;
  }
  return 2n * sum;
}

/**
 * Growth factor (RAY) over `seconds` at a continuously compounded annual rate `rateRay`:
 * e^(rate·t/YEAR), by the Taylor series to RAY precision (every term rounded down, so accrued
 * interest never exceeds the exact value). Aave v3 MathUtils.calculateCompoundedInterest is the
 * three-term truncation of the same expansion; we sum until the terms vanish so that accrual is
 * path-independent in practice (touching the vault more often does not change the yield).
 */
export function growthFactorRay(rateRay: bigint, seconds: bigint): bigint {
  if (seconds <= 0n || rateRay === 0n) return RAY;
  const x = (rateRay * seconds) / SECONDS_PER_YEAR; // exponent in RAY
  let term = RAY;
  let sum = RAY;
  for (let k = 1n; term > 0n; k += 1n) {
    term = (term * x) / (RAY * k);
    sum += term;
  }
  return sum;
}

/** totalAssets after `seconds` of interest at `apyBps`: rounded down (the vault never over-credits). */
export function accrueTotalAssets(totalAssets: bigint, apyBps: bigint, seconds: bigint): bigint {
  const factor = growthFactorRay(continuousRateRayFromApyBps(apyBps), seconds);
  return mulDiv(totalAssets, factor, RAY, 'down');
}

// ---------------------------------------------------------------------------------------------
// Rewards per share (Synthetix StakingRewards.sol / MasterChef):
//   rewardPerToken += rate · dt / totalSupply;  earned = balance · (rewardPerToken − paid) + rewards.
// Our rate is configured per share already (reward units per share per year, RAY), so the
// accumulator does not depend on totalSupply and each position's checkpoint settles lazily.

/** The accumulator's increase over `seconds` for a per-share yearly rate (RAY), rounded down. */
export const rewardPerShareDelta = (ratePerShareYearRay: bigint, seconds: bigint): bigint => (seconds <= 0n ? 0n : (ratePerShareYearRay * seconds) / SECONDS_PER_YEAR);

/** Rewards earned by `shares` since `checkpointRay`, rounded down. */
export const earnedRewards = (shares: bigint, accRay: bigint, checkpointRay: bigint): bigint => (accRay <= checkpointRay ? 0n : mulDiv(shares, accRay - checkpointRay, RAY, 'down'));
