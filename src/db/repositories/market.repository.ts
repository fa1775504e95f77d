// Borrow markets (one reserve per asset), collateral and scaled debt per wallet.
import { rows, type Db } from '../knex.js';
import { identifier, list, sql, type Sql } from '../sql.js';

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
  await rows(db, sql`SELECT id FROM wallets WHERE id = ${walletId} FOR NO KEY UPDATE`);
}

export async function listCollateral(db: Db, walletId: string): Promise<CollateralRow[]> {
  return db('borrow_collateral').where({ wallet_id: walletId }).where('amount', '>', 0).orderBy('asset_symbol', 'asc');
}

export async function listDebts(db: Db, walletId: string): Promise<DebtRow[]> {
  return db('borrow_debts').where({ wallet_id: walletId }).where('scaled_amount', '>', 0).orderBy('asset_symbol', 'asc');
}

/** Adds `delta` to a wallet's balance row in `table` (a constant of this module), or subtracts it guarded at zero; false when the guard refused. */
async function addGuarded(
  db: Db,
  table: 'borrow_collateral' | 'borrow_debts',
  column: 'amount' | 'scaled_amount',
  r: { wallet_id: string; agent_id: string; asset_symbol: string; delta: bigint; at: Date },
): Promise<boolean> {
  if (r.delta >= 0n) {
    const [t, c] = [identifier(table), identifier(column)];
    await rows(
      db,
      sql`INSERT INTO ${t} (wallet_id, asset_symbol, agent_id, ${c}, updated_at) VALUES (${r.wallet_id}, ${r.asset_symbol}, ${r.agent_id}, ${r.delta.toString()}, ${r.at})
       ON CONFLICT (wallet_id, asset_symbol) DO UPDATE SET ${c} = ${t}.${c} + EXCLUDED.${c}, updated_at = EXCLUDED.updated_at`,
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

export const MARKET_COLUMNS = [
  'id',
  'protocol_id',
  'asset_symbol',
  'collateral_enabled',
  'borrow_enabled',
  'ltv_bps',
  'liquidation_threshold_bps',
  'borrow_apr_bps',
  'borrow_index_ray',
  'last_accrued_at',
  'created_at',
] as const satisfies readonly (keyof MarketRow)[];

/** A wallet's collateral and debt rows, each with its asset's price (null without one) and market (null without one). */
export interface PricedHoldings {
  collateral: { asset_symbol: string; amount: string; usd_e8: string | null; market: MarketRow | null }[];
  debts: { asset_symbol: string; scaled_amount: string; usd_e8: string | null; market: MarketRow | null }[];
}

/**
 * `listCollateral` and `listDebts` with their prices and markets in one statement: the borrow reads value only what
 * the wallet holds, so one round trip replaces the market list, the two holdings lists and a price per asset.
 */
export async function listPricedHoldings(db: Db, walletId: string): Promise<PricedHoldings> {
  return toPricedHoldings(await rows(db, sql`${pricedHoldings(walletId)} ORDER BY kind, asset_symbol`));
}

/** The statement of `listPricedHoldings`, without its ORDER BY. */
const marketColumns = list(MARKET_COLUMNS.map((c) => (c === 'borrow_index_ray' ? sql`m.${identifier(c)}::text AS ${identifier(`m__${c}`)}` : sql`m.${identifier(c)} AS ${identifier(`m__${c}`)}`)));

export function pricedHoldings(walletId: string): Sql<Record<string, unknown>> {
  const market = marketColumns;
  return sql`SELECT 'collateral' AS kind, c.asset_symbol, c.amount::text AS amount, p.usd_e8::text AS usd_e8, ${market}
       FROM borrow_collateral c LEFT JOIN prices p ON p.asset_symbol = c.asset_symbol LEFT JOIN borrow_markets m ON m.asset_symbol = c.asset_symbol
      WHERE c.wallet_id = ${walletId} AND c.amount > 0
     UNION ALL
     SELECT 'debt', d.asset_symbol, d.scaled_amount::text, p.usd_e8::text, ${market}
       FROM borrow_debts d LEFT JOIN prices p ON p.asset_symbol = d.asset_symbol LEFT JOIN borrow_markets m ON m.asset_symbol = d.asset_symbol
      WHERE d.wallet_id = ${walletId} AND d.scaled_amount > 0`;
}

/** Rows of `pricedHoldings`, in order, as PricedHoldings. */
export function toPricedHoldings(rows: Record<string, unknown>[]): PricedHoldings {
  const out: PricedHoldings = { collateral: [], debts: [] };
  for (const r of rows as (Record<string, unknown> & { kind: 'collateral' | 'debt'; asset_symbol: string; amount: string; usd_e8: string | null })[]) {
    const m = r.m__id == null ? null : (Object.fromEntries(MARKET_COLUMNS.map((c) => [c, r[`m__${c}`]])) as unknown as MarketRow);
    if (r.kind === 'collateral') out.collateral.push({ asset_symbol: r.asset_symbol, amount: r.amount, usd_e8: r.usd_e8, market: m });
    else out.debts.push({ asset_symbol: r.asset_symbol, scaled_amount: r.amount, usd_e8: r.usd_e8, market: m });
  }
  return out;
}
