// What every money-moving write of the ledger area reads from its body: the amount (or its USD value). The
// document bounds the other fields (note, slippage, delays); services keep only the rules it cannot state.
import type { Db } from '../../db/knex.js';
import type { AssetRow } from '../../db/repositories/ledger.repository.js';
import { parseAmount } from '../../lib/money.js';
import { USD_DECIMALS, type AmountFields, type LedgerService } from './ledger.js';

/** Exactly one of `amount` / `amount_usd` (contract §1), as base units of `asset` plus its USD value. */
export async function resolveMoney(db: Db, ledger: LedgerService, asset: AssetRow, body: AmountFields): Promise<{ amount: bigint; usdE8: bigint }> {
  const amount = (await ledger.resolveAmount(db, asset, body)) as bigint;
  // A USD amount is its own USD value; an asset amount is valued at the feed, rounded up as it counts toward caps.
  const usdE8 = body.amount_usd != null ? parseAmount(body.amount_usd, USD_DECIMALS) : await ledger.usdValue(db, asset, amount, 'up');
  return { amount, usdE8 };
}

/** `0x1234…abcd`, as human messages show an address. */
export const shortAddress = (address: string) => `${address.slice(0, 6)}…${address.slice(-4)}`;
