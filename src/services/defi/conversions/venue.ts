// Where a conversion settles on a chain with pools (evm mode, development bootstrap): a route through the pools read
// at their current reserves, or, for an agent account's ETH (issue 30), the WETH contract in the same lane call.
import type { Db } from '../../../db/knex.js';
import { findWalletByAgent } from '../../../db/repositories/agent.repository.js';
import type { QuoteRoute } from '../../../db/repositories/quote.repository.js';
import type { Dex, DexQuote } from '../../../chain/dex.js';
import type { Address } from '../../../chain/port.js';
import { getAmountOut } from '../../../lib/defi/amm.js';
import type { OwnerRef } from '../../ledger/operations.js';

/** The protocol id of an account's ETH <-> WETH conversion (the WETH contract, 1:1, no fee). */
export const WRAP_PROTOCOL = 'weth';

export type ChainVenue =
  | { kind: 'wrap'; weth: Address; unwrap: boolean }
  /** `wrapInput`: the account's ETH is wrapped before the swap; `unwrapOutput`: the swap's WETH is unwrapped after it. */
  | { kind: 'route'; quote: DexQuote; wrapInput: boolean; unwrapOutput: boolean };

/**
 * The on-chain venue of `from -> to` for `amount`, or null (the simulated venue at the price feed). An agent
 * account's ETH is wrapped and unwrapped through WETH in the same relayed lane call (AgentAccount.wrapEth, batch):
 * ETH <-> WETH is the wrap alone, ETH -> X the WETH -> X route after it, X -> ETH the X -> WETH route with its whole
 * output unwrapped. A key wallet's ETH has no route (no pool trades ETH itself).
 */
export async function chainVenue(db: Db, dex: Dex, who: OwnerRef, from: string, to: string, amount: bigint): Promise<ChainVenue | null> {
  const account = (from === 'ETH' || to === 'ETH') && (await findWalletByAgent(db, who.agentId))?.custody === 'account';
  const pool = (symbol: string) => (account && symbol === 'ETH' ? 'WETH' : symbol);
  if (account && pool(from) === pool(to)) {
    const weth = (await dex.contracts(db))?.tokens.WETH;
    return weth ? { kind: 'wrap', weth, unwrap: from === 'WETH' } : null;
  }
  const quote = await dex.quote(db, pool(from), pool(to), amount);
  return quote ? { kind: 'route', quote, wrapInput: pool(from) !== from, unwrapOutput: pool(to) !== to } : null;
}

/** The policy's protocol fact of a conversion: the WETH contract is allowed with ETH and WETH, as on chain (custody). */
export const policyProtocol = (protocolId: string): string | undefined => (protocolId === WRAP_PROTOCOL ? undefined : protocolId);

/** The output a route would give without the pairs' fee (the fee of a quote = this minus its expected output). */
export const outWithoutFee = (q: DexQuote): bigint => q.legs.reduce((amount, leg) => (amount > 0n ? getAmountOut(amount, leg.reserveIn, leg.reserveOut, 0n) : 0n), q.legs[0]!.amountIn);

export const routeOf = (q: DexQuote): QuoteRoute => ({
  router: q.router,
  block: q.block.toString(),
  legs: q.legs.map((l) => ({
    pair: l.pair,
    from_asset: l.fromSymbol,
    to_asset: l.toSymbol,
    token_in: l.tokenIn,
    token_out: l.tokenOut,
    reserve_in: l.reserveIn.toString(),
    reserve_out: l.reserveOut.toString(),
    amount_in: l.amountIn.toString(),
    amount_out: l.amountOut.toString(),
  })),
});
