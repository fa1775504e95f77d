// Wallet deficits (migration 0018): what a reversed deposit could not take back from a wallet that had spent it.
import type { Db } from '../knex.js';

export interface DeficitRow {
  wallet_id: string;
  asset_symbol: string;
  amount: string;
}

/** The wallet's available balance of `asset` under its row lock (0 when it has no row). */
export async function lockAvailable(db: Db, walletId: string, asset: string): Promise<bigint> {
  const row = (await db('balances').where({ wallet_id: walletId, asset_symbol: asset }).forUpdate().first('available')) as { available: string } | undefined;
  return BigInt(row?.available ?? 0);
}

/** The deficit of (wallet, asset) under its row lock, 0 when none. */
export async function lockDeficit(db: Db, walletId: string, asset: string): Promise<bigint> {
  const row = (await db('wallet_deficits').where({ wallet_id: walletId, asset_symbol: asset }).forUpdate().first('amount')) as { amount: string } | undefined;
  return BigInt(row?.amount ?? 0);
}

export async function addDeficit(db: Db, walletId: string, asset: string, amount: bigint, at: Date): Promise<void> {
  await db.raw(
    `INSERT INTO wallet_deficits (wallet_id, asset_symbol, amount, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (wallet_id, asset_symbol) DO UPDATE SET amount = wallet_deficits.amount + EXCLUDED.amount, updated_at = EXCLUDED.updated_at`,
    [walletId, asset, amount.toString(), at, at],
  );
}

/** Takes `amount` off the deficit (locked by the caller); the row goes once nothing is owed. */
export async function reduceDeficit(db: Db, walletId: string, asset: string, amount: bigint, at: Date): Promise<void> {
  const settled = await db('wallet_deficits').where({ wallet_id: walletId, asset_symbol: asset }).where('amount', '<=', amount.toString()).delete();
  if (settled === 0)
    await db('wallet_deficits')
      .where({ wallet_id: walletId, asset_symbol: asset })
      .update({ amount: db.raw('amount - ?', [amount.toString()]), updated_at: at });
}

/** The deficits of one wallet, or of every wallet (reconcile), by wallet and asset. */
export async function listDeficits(db: Db, walletId?: string): Promise<DeficitRow[]> {
  const q = db('wallet_deficits').orderBy(['wallet_id', 'asset_symbol']).select('wallet_id', 'asset_symbol', 'amount');
  if (walletId) q.where({ wallet_id: walletId });
  return q;
}
