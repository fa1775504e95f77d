// Prices from the pools (issue 16): on a chain with the development DeFi bootstrap, the worker records the USD price of
// every asset paired with USDC from that pair's time-weighted price (Uniswap v2 cumulative prices), observed_at now.
// The prices table and its staleness rule stay as they are: when the loop stops, `price_stale` follows.
import type { Dex } from '../../chain/dex.js';
import type { Db } from '../../db/knex.js';
import { upsertPrice } from '../../db/repositories/ledger.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { LedgerService } from '../ledger/ledger.js';

/** The window a time-weighted pool price spans at most before its start observation rolls forward. */
export const POOL_TWAP_WINDOW_SECONDS = 600;

/** One observation pass; returns the prices it recorded. */
export function createPoolPriceRecorder(deps: { db: Db; dex: Dex; ledger: LedgerService; clock: Clock }): () => Promise<{ symbol: string; usdE8: bigint; source: string }[]> {
  const { db, dex, ledger, clock } = deps;
  return async () => {
    const usdc = await ledger.price(db, 'USDC');
    const decimals = Object.fromEntries([...(await ledger.assets(db)).values()].map((a) => [a.symbol, a.decimals]));
    const prices = await dex.observePrices(db, usdc.usdE8, POOL_TWAP_WINDOW_SECONDS, decimals);
    for (const p of prices) await upsertPrice(db, { asset_symbol: p.symbol, usd_e8: p.usdE8, observed_at: clock.now(), source: p.source });
    return prices;
  };
}
