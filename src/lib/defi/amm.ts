// Constant-product AMM maths (Uniswap v2) and the slippage floor of a quote. Pure bigint.
import { mulDiv } from '../money.js';

/**
 * Source: Uniswap/v2-periphery `contracts/libraries/UniswapV2Library.sol`.
 *   getAmountOut: amountInWithFee = in·(10000 − fee); out = amountInWithFee·R_out / (R_in·10000 + amountInWithFee)
 *   getAmountIn:  in = ⌈R_in·out·10000 / ((R_out − out)·(10000 − fee))⌉
 * (Uniswap hard-codes fee = 30 bps with 1000ths; bps here.) Division floors the output and the
 * required input is rounded up: both against the trader. Uniswap writes the input as `… / … + 1`,
 * which over-asks by one unit when the division is exact; the true ceiling keeps the inverse exact:
 * getAmountIn(getAmountOut(x)) ≤ x. The pool invariant k = R_in·R_out never decreases.
 */
export const BPS = 10_000n;

export function getAmountOut(amountIn: bigint, reserveIn: bigint, reserveOut: bigint, feeBps: bigint): bigint {
  if (amountIn <= 0n) throw new RangeError('insufficient input amount');
  if (reserveIn <= 0n || reserveOut <= 0n) throw new RangeError('insufficient liquidity');
  const amountInWithFee = amountIn * (BPS - feeBps);
  return (amountInWithFee * reserveOut) / (reserveIn * BPS + amountInWithFee);
}

export function getAmountIn(amountOut: bigint, reserveIn: bigint, reserveOut: bigint, feeBps: bigint): bigint {
  if (amountOut <= 0n) throw new RangeError('insufficient output amount');
  if (reserveIn <= 0n || reserveOut <= amountOut) throw new RangeError('insufficient liquidity');
  return mulDiv(reserveIn * amountOut, BPS, (reserveOut - amountOut) * (BPS - feeBps), 'up');
}

/**
 * Minimum accepted output for a slippage tolerance: floor(expected · (10000 − s) / 10000).
 * (Uniswap's interface divides by 1 + s instead, which is slightly more generous; the floor of the
 * linear form is the stricter of the two and is what an agent's `max_slippage_bps` reads as.)
 */
export function minAmountOut(expectedOut: bigint, slippageBps: bigint): bigint {
  if (slippageBps < 0n || slippageBps > BPS) throw new RangeError('slippage out of range');
  return mulDiv(expectedOut, BPS - slippageBps, BPS, 'down');
}

/** Price impact of a trade in bps against the pool's spot price R_out/R_in, rounded up. */
export function priceImpactBps(amountIn: bigint, amountOut: bigint, reserveIn: bigint, reserveOut: bigint): bigint {
  const spotOut = mulDiv(amountIn, reserveOut, reserveIn, 'down');
  if (spotOut === 0n || amountOut >= spotOut) return 0n;
  return mulDiv(spotOut - amountOut, BPS, spotOut, 'up');
}

/** slippage_percent (a JSON number, 1 = 1 %) as whole bps; null when it has finer precision or is out of [0, 100). */
export function slippagePercentToBps(percent: number): bigint | null {
  if (!Number.isFinite(percent) || percent < 0 || percent >= 100) return null;
  const bps = Math.round(percent * 100);
  if (Math.abs(bps - percent * 100) > 1e-6) return null;
  return BigInt(bps);
}
