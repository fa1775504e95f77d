// Borrow markets (one reserve per asset), collateral and scaled debt per wallet.
import type { Db } from '../knex.js';

export interface MarketRow {
  id: string;
  protocol_id: string;
  asset_symbol: string;
  collateral_enabled: boolean;
  borrow_enabled: boolean;
  ltv_bps: number;
  liquidation_threshold_bps: number;
  borrow_apr_bps: number;
  borrow_index_ray: string;
  last_accrued_at: Date | null;
  created_at: Date;
}

export interface CollateralRow {
  wallet_id: string;
  asset_symbol: string;
  agent_id: string;
  amount: string;
  updated_at: Date;
}

export interface DebtRow {
  wallet_id: string;
  asset_symbol: string;
  agent_id: string;
  scaled_amount: string;
  updated_at: Date;
}

export async function insertMarket(db: Db, m: Omit<MarketRow, 'borrow_index_ray' | 'last_accrued_at'>): Promise<MarketRow> {
  const [row] = await db('borrow_markets').insert(m).returning('*');
  return row as MarketRow;
}

export async function listMarkets(db: Db): Promise<MarketRow[]> {
  return db('borrow_markets').orderBy('asset_symbol', 'asc');
}

export async function findMarketByAsset(db: Db, asset: string): Promise<MarketRow | undefined> {
  return db('borrow_markets').where({ asset_symbol: asset }).first();
}

export async function lockMarket(db: Db, asset: string): Promise<MarketRow | undefined> {
  return db('borrow_markets').where({ asset_symbol: asset }).forUpdate().first();
}

export async function updateMarketIndex(db: Db, asset: string, indexRay: bigint, at: Date): Promise<void> {
  await db('borrow_markets').where({ asset_symbol: asset }).update({ borrow_index_ray: indexRay.toString(), last_accrued_at: at });
}

/**
 * Serialises borrow writes of one wallet: a row lock on the wallet held until commit, so every LTV
 * check sees the collateral and debt the previous write left.
 */
export async function lockWallet(db: Db, walletId: string): Promise<void> {
  await db.raw('SELECT id FROM wallets WHERE id = ? FOR NO KEY UPDATE', [walletId]);
}

export async function listCollateral(db: Db, walletId: string): Promise<CollateralRow[]> {
  return db('borrow_collateral').where({ wallet_id: walletId }).where('amount', '>', 0).orderBy('asset_symbol', 'asc');
}

export async function listDebts(db: Db, walletId: string): Promise<DebtRow[]> {
  return db('borrow_debts').where({ wallet_id: walletId }).where('scaled_amount', '>', 0).orderBy('asset_symbol', 'asc');
}

/** Adds `delta` to a wallet's balance row in `table` (a constant of this module), or subtracts it guarded at zero; false when the guard refused. */
async function addGuarded(db: Db, table: 'borrow_collateral' | 'borrow_debts', column: 'amount' | 'scaled_amount', r: { wallet_id: string; agent_id: string; asset_symbol: string; delta: bigint; at: Date }): Promise<boolean> {
  if (r.delta >= 0n) {
    await db.raw(
      `INSERT INTO ?? (wallet_id, asset_symbol, agent_id, ??, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (wallet_id, asset_symbol) DO UPDATE SET ?? = ??.?? + EXCLUDED.??, updated_at = EXCLUDED.updated_at`,
      [table, column, r.wallet_id, r.asset_symbol, r.agent_id, r.delta.toString(), r.at, column, table, column, column],
    );
    return true;
  }
  const n = await db(table)
    .where({ wallet_id: r.wallet_id, asset_symbol: r.asset_symbol })
    .where(column, '>=', (-r.delta).toString())
    .update({ [column]: db.raw('?? - ?::numeric', [column, (-r.delta).toString()]), updated_at: r.at });
  return n === 1;
}

/** Adds (or subtracts, guarded at zero) collateral; false when the guard refused. */
export async function addCollateral(db: Db, r: { wallet_id: string; agent_id: string; asset_symbol: string; delta: bigint; at: Date }): Promise<boolean> {
  return addGuarded(db, 'borrow_collateral', 'amount', r);
}

/** Adds (or subtracts, guarded at zero) scaled debt; false when the guard refused. */
export async function addScaledDebt(db: Db, r: { wallet_id: string; agent_id: string; asset_symbol: string; delta: bigint; at: Date }): Promise<boolean> {
  return addGuarded(db, 'borrow_debts', 'scaled_amount', r);
}
