// Price-feed conversion between assets: USD values, the gross and net output of a conversion with
// a fee, and the human-readable rate. Prices are USD with 8 decimals per whole unit (Aave oracles).
import { formatAmount, mulDiv } from '../money.js';

export const USD_DECIMALS = 8;
export const BPS = 10_000n;

export interface PricedAsset {
  symbol: string;
  decimals: number;
  priceE8: bigint;
}

/** USD value (8 decimals) of `amount` base units; `down` for what the user holds, `up` for what they owe. */
export const toUsd = (amount: bigint, asset: PricedAsset, rounding: 'down' | 'up' = 'down'): bigint => mulDiv(amount, asset.priceE8, 10n ** BigInt(asset.decimals), rounding);

/** Base units worth `usdE8`, rounded down (an `amount_usd` request never spends more than asked). */
export const fromUsd = (usdE8: bigint, asset: PricedAsset, rounding: 'down' | 'up' = 'down'): bigint => mulDiv(usdE8, 10n ** BigInt(asset.decimals), asset.priceE8, rounding);

export interface ConversionQuoteMaths {
  /** out before the fee: in · p_in · 10^dec_out / (p_out · 10^dec_in), rounded down. */
  grossOut: bigint;
  /** ceil(grossOut · fee / 10000). */
  fee: bigint;
  /** grossOut − fee. */
  netOut: bigint;
}

/**
 * Oracle conversion, one multiplication and one division so no precision is lost to an
 * intermediate USD value: out = in · p_in · 10^dec_out / (p_out · 10^dec_in). The output is
 * rounded down and the fee (charged in the output asset) rounded up: both against the user.
 */
export function convertAtPrice(amountIn: bigint, from: PricedAsset, to: PricedAsset, feeBps: bigint): ConversionQuoteMaths {
  if (from.priceE8 <= 0n || to.priceE8 <= 0n) throw new RangeError('price must be positive');
  const grossOut = mulDiv(amountIn * from.priceE8, 10n ** BigInt(to.decimals), to.priceE8 * 10n ** BigInt(from.decimals), 'down');
  const fee = mulDiv(grossOut, feeBps, BPS, 'up');
  return { grossOut, fee, netOut: grossOut - fee };
}

/** Input needed for at least `amountOut` net of the fee: the inverse of convertAtPrice, rounded up. */
export function inputForOutput(amountOut: bigint, from: PricedAsset, to: PricedAsset, feeBps: bigint): bigint {
  const gross = mulDiv(amountOut, BPS, BPS - feeBps, 'up');
  let input = mulDiv(gross * to.priceE8, 10n ** BigInt(from.decimals), from.priceE8 * 10n ** BigInt(to.decimals), 'up');
  // Rounding of the forward direction may still fall one unit short: step up until it does not.
  while (convertAtPrice(input, from, to, feeBps).netOut < amountOut) input += 1n;
  return input;
}

/** "1 WETH = 3000.5 USDC": the fee-inclusive rate per whole `from` unit, with the output's decimals. */
export function humanRate(amountIn: bigint, netOut: bigint, from: Pick<PricedAsset, 'symbol' | 'decimals'>, to: Pick<PricedAsset, 'symbol' | 'decimals'>): string {
  if (amountIn === 0n) return `1 ${from.symbol} = 0 ${to.symbol}`;
  const perUnit = mulDiv(netOut, 10n ** BigInt(from.decimals), amountIn, 'down');
  return `1 ${from.symbol} = ${formatAmount(perUnit, to.decimals)} ${to.symbol}`;
}

/** USD 8-decimal value as a decimal string for `_usd` fields. */
export const formatUsd = (usdE8: bigint): string => formatAmount(usdE8, USD_DECIMALS);

/** Whether a price observed at `observedAt` is too old at `now`. */
export const isStale = (observedAt: Date, now: Date, maxAgeMs: number): boolean => now.getTime() - observedAt.getTime() > maxAgeMs;
