// Assets, protocols, prices, materialised balances, the append-only journal, holds and the simulated chain's failing addresses.
import type { Schema } from '../../lib/contract.js';
import { rows, type Db } from '../knex.js';
import { prepared, sql, type Sql } from '../sql.js';

export interface AssetRow {
  symbol: string;
  name: string;
  chain: Schema<'Chain'>;
  chain_id: number;
  contract_address: string | null;
  decimals: number;
  category: Schema<'Asset'>['category'];
  eip712_name: string | null;
  eip712_version: string | null;
}

export interface ProtocolRow {
  id: string;
  name: string;
  kinds: Schema<'Protocol'>['kinds'];
  asset_symbols: string[];
  chain: Schema<'Chain'>;
}

export interface PriceRow {
  asset_symbol: string;
  usd_e8: string;
  observed_at: Date | null;
  source: string;
}

export interface BalanceRow {
  wallet_id: string;
  asset_symbol: string;
  available: string;
  held: string;
  updated_at: Date;
}

export interface JournalEntryInput {
  account: string;
  wallet_id: string | null;
  asset_symbol: string;
  amount: bigint;
  entry_type: string;
}

export interface HoldRow {
  id: string;
  operation_id: string | null;
  wallet_id: string;
  asset_symbol: string;
  amount: string;
  status: 'held' | 'captured' | 'released';
  created_at: Date;
  resolved_at: Date | null;
}

export async function listAssets(db: Db, page?: { after?: string; limit: number }): Promise<AssetRow[]> {
  const q = db('assets').orderBy('symbol', 'asc');
  if (page?.after) q.where('symbol', '>', page.after);
  if (page) q.limit(page.limit);
  return q;
}

export async function findAsset(db: Db, symbol: string): Promise<AssetRow | undefined> {
  return db('assets').where({ symbol }).first();
}

export async function listProtocols(db: Db, page: { after?: string; limit: number }): Promise<ProtocolRow[]> {
  const q = db('protocols').orderBy('id', 'asc').limit(page.limit);
  if (page.after) q.where('id', '>', page.after);
  return q;
}

export async function findProtocol(db: Db, id: string): Promise<ProtocolRow | undefined> {
  return db('protocols').where({ id }).first();
}

export async function findPrice(db: Db, symbol: string): Promise<PriceRow | undefined> {
  return db('prices').where({ asset_symbol: symbol }).first();
}

/** Every price of the feed, by asset (one statement; the table holds one row per asset). */
export async function listPrices(db: Db): Promise<Map<string, PriceRow>> {
  const rows: PriceRow[] = await db('prices').select('*');
  return new Map(rows.map((r) => [r.asset_symbol, r]));
}

/**
 * The agent's wallet (id, address) and its balance rows, each with its asset's decimals, category and price (null
 * without one), in one statement; undefined when the agent has no wallet.
 */
export async function findWalletWithPricedBalances(
  db: Db,
  agentId: string,
): Promise<{ id: string; address: string | null; balances: { asset_symbol: string; available: string; held: string; decimals: number; category: string; usd_e8: string | null }[] } | undefined> {
  const rows: { wallet_id: string; address: string | null; asset_symbol: string | null; available: string; held: string; decimals: number; category: string; usd_e8: string | null }[] = await db(
    'wallets as w',
  )
    .leftJoin('balances as b', 'b.wallet_id', 'w.id')
    .leftJoin('assets as a', 'a.symbol', 'b.asset_symbol')
    .leftJoin('prices as p', 'p.asset_symbol', 'b.asset_symbol')
    .where('w.agent_id', agentId)
    .orderBy('b.asset_symbol', 'asc')
    .select('w.id as wallet_id', 'w.address', 'b.asset_symbol', 'b.available', 'b.held', 'a.decimals', 'a.category', 'p.usd_e8');
  if (rows.length === 0) return undefined;
  const balances = rows.filter((r) => r.asset_symbol !== null).map(({ wallet_id: _w, address: _a, ...b }) => ({ ...b, asset_symbol: b.asset_symbol! }));
  return { id: rows[0]!.wallet_id, address: rows[0]!.address, balances };
}

/**
 * One statement for a wallet's balance list: its balance rows by asset, and the price of every asset (those it does
 * not hold are listed at zero and still valued).
 */
export async function listBalancesWithPrices(db: Db, walletId: string): Promise<[Map<string, Pick<BalanceRow, 'available' | 'held'>>, Map<string, string>, Map<string, string>]> {
  // Fixed SQL (no builder to compile per request): /balances is the hottest read.
  const found = await rows(
    db,
    prepared(
      sql<{
        symbol: string;
        available: string | null;
        held: string | null;
        usd_e8: string | null;
        deficit: string | null;
      }>`SELECT a.symbol, b.available, b.held, p.usd_e8, d.amount AS deficit FROM assets a
       LEFT JOIN balances b ON b.asset_symbol = a.symbol AND b.wallet_id = ${walletId} LEFT JOIN prices p ON p.asset_symbol = a.symbol
       LEFT JOIN wallet_deficits d ON d.asset_symbol = a.symbol AND d.wallet_id = ${walletId}`,
      'agentapi_balances_with_prices',
    ),
  );
  const balances = new Map<string, Pick<BalanceRow, 'available' | 'held'>>();
  const prices = new Map<string, string>();
  const deficits = new Map<string, string>();
  for (const r of found) {
    if (r.deficit !== null) deficits.set(r.symbol, r.deficit);
    if (r.available !== null && r.held !== null) balances.set(r.symbol, { available: r.available, held: r.held });
    if (r.usd_e8 !== null) prices.set(r.symbol, r.usd_e8);
  }
  return [balances, prices, deficits];
}

export async function upsertPrice(db: Db, row: { asset_symbol: string; usd_e8: bigint; observed_at: Date | null; source: string }): Promise<void> {
  await db('prices')
    .insert({ ...row, usd_e8: row.usd_e8.toString() })
    .onConflict('asset_symbol')
    .merge();
}

export async function listBalances(db: Db, walletId: string, opts: { after?: string; limit?: number; category?: string } = {}): Promise<(BalanceRow & { decimals: number; category: string })[]> {
  const q = db('balances as b').join('assets as a', 'a.symbol', 'b.asset_symbol').where('b.wallet_id', walletId).orderBy('b.asset_symbol', 'asc').select('b.*', 'a.decimals', 'a.category');
  if (opts.category) q.where('a.category', opts.category);
  if (opts.after) q.where('b.asset_symbol', '>', opts.after);
  if (opts.limit) q.limit(opts.limit);
  return q;
}

export async function findBalance(db: Db, walletId: string, asset: string): Promise<BalanceRow | undefined> {
  return db('balances').where({ wallet_id: walletId, asset_symbol: asset }).first();
}

/** Adds signed deltas to one balance row (creating it at zero); the CHECK constraints refuse a negative result. */
export async function applyBalanceDelta(db: Db, walletId: string, asset: string, available: bigint, held: bigint, at: Date): Promise<void> {
  await rows(
    db,
    sql`INSERT INTO balances (wallet_id, asset_symbol, available, held, updated_at) VALUES (${walletId}, ${asset}, ${available.toString()}, ${held.toString()}, ${at})
     ON CONFLICT (wallet_id, asset_symbol) DO UPDATE
       SET available = balances.available + EXCLUDED.available, held = balances.held + EXCLUDED.held, updated_at = EXCLUDED.updated_at`,
  );
}

/**
 * Locks the wallet's balance rows of `assets` (created at zero when missing) in asset order, the order ledger postings
 * take them in: an earn write takes them before any vault row (vault.repository's lock order).
 */
export async function lockBalanceRows(db: Db, walletId: string, assets: string[], at: Date): Promise<void> {
  const sorted = [...new Set(assets)].sort();
  if (sorted.length === 0) return;
  await db.raw(
    `INSERT INTO balances (wallet_id, asset_symbol, available, held, updated_at)
     SELECT ?, a.symbol, 0, 0, ? FROM jsonb_array_elements_text(?::jsonb) WITH ORDINALITY AS a(symbol, n) ORDER BY a.n
     ON CONFLICT (wallet_id, asset_symbol) DO UPDATE SET updated_at = balances.updated_at`,
    [walletId, at, JSON.stringify(sorted)],
  );
}

/** Applies deltas where at least one is negative, only if neither column goes below zero; false when refused. */
export async function applyGuardedDelta(db: Db, walletId: string, asset: string, available: bigint, held: bigint, at: Date): Promise<boolean> {
  const updated = await rows(
    db,
    sql`UPDATE balances SET available = available + ${available.toString()}::numeric, held = held + ${held.toString()}::numeric, updated_at = ${at}
     WHERE wallet_id = ${walletId} AND asset_symbol = ${asset} AND available + ${available.toString()}::numeric >= 0 AND held + ${held.toString()}::numeric >= 0
     RETURNING 1`,
  );
  return updated.length === 1;
}

export interface HoldInput {
  id: string;
  journalId: string;
  operationId: string | null;
  walletId: string;
  asset: string;
  amount: bigint;
  availableAccount: string;
  heldAccount: string;
}

/**
 * A hold as three data-modifying CTEs for one statement: `reserved` moves `amount` from available to held only
 * if enough is available (no row when not), `hold` inserts the hold row and `journal` its two legs (available -,
 * held +), both only when `reserved` has its row. A fragment, for placeHold and for the statement that accepts an
 * operation with its hold (sql/accept-payment.ts).
 */
export function holdCtes(hold: HoldInput, at: Date): Sql<never> {
  const amount = hold.amount.toString();
  return sql`reserved AS (
       UPDATE balances SET available = available - CAST(${amount} AS numeric), held = held + CAST(${amount} AS numeric), updated_at = ${at}
       WHERE wallet_id = ${hold.walletId} AND asset_symbol = ${hold.asset} AND available >= CAST(${amount} AS numeric)
       RETURNING wallet_id
     ), hold AS (
       INSERT INTO holds (id, operation_id, wallet_id, asset_symbol, amount, status, created_at)
       SELECT CAST(${hold.id} AS uuid), CAST(${hold.operationId} AS uuid), wallet_id, ${hold.asset}, CAST(${amount} AS numeric), 'held', ${at} FROM reserved
     ), journal AS (
       INSERT INTO journal_entries (journal_id, operation_id, account, wallet_id, asset_symbol, amount, entry_type, created_at)
       SELECT CAST(${hold.journalId} AS uuid), CAST(${hold.operationId} AS uuid), leg.account, reserved.wallet_id, ${hold.asset}, leg.amount, 'hold', ${at}
       FROM reserved CROSS JOIN (VALUES (1, ${hold.availableAccount}, -CAST(${amount} AS numeric)), (2, ${hold.heldAccount}, CAST(${amount} AS numeric))) AS leg(n, account, amount)
       ORDER BY leg.n
     )`;
}

/**
 * A hold in one statement (holdCtes): false when the balance is short (nothing is written). One round trip
 * instead of three (docs/perf/issue-12-performance.md "Performance: payments").
 */
export async function placeHold(db: Db, hold: HoldInput, at: Date): Promise<boolean> {
  const [row] = await rows(db, sql<{ reserved: number }>`WITH ${holdCtes(hold, at)} SELECT count(*)::int AS reserved FROM reserved`);
  return Number(row?.reserved ?? 0) === 1;
}

export async function insertJournal(db: Db, journalId: string, operationId: string | null, entries: JournalEntryInput[], at: Date): Promise<void> {
  await db('journal_entries').insert(
    entries.map((e) => ({
      journal_id: journalId,
      operation_id: operationId,
      account: e.account,
      wallet_id: e.wallet_id,
      asset_symbol: e.asset_symbol,
      amount: e.amount.toString(),
      entry_type: e.entry_type,
      created_at: at,
    })),
  );
}

/** Guarded transition of a hold out of `held`; returns the row when this caller won it. */
export async function resolveHold(db: Db, holdId: string, to: 'captured' | 'released', at: Date): Promise<HoldRow | undefined> {
  const [row] = await db('holds').where({ id: holdId, status: 'held' }).update({ status: to, resolved_at: at }).returning('*');
  return row;
}

export async function findHeldByOperation(db: Db, operationId: string): Promise<HoldRow[]> {
  return db('holds').where({ operation_id: operationId, status: 'held' }).orderBy('created_at');
}

export async function findWalletByAddress(db: Db, address: string): Promise<{ id: string; agent_id: string } | undefined> {
  return db('wallets').whereRaw('lower(address) = lower(?)', [address]).first('id', 'agent_id');
}

export async function addFailingAddress(db: Db, address: string, at: Date): Promise<void> {
  await db('chain_failing_addresses').insert({ address: address.toLowerCase(), created_at: at }).onConflict('address').ignore();
}

export async function removeFailingAddress(db: Db, address: string): Promise<number> {
  return db('chain_failing_addresses').where({ address: address.toLowerCase() }).delete();
}

export async function isFailingAddress(db: Db, address: string): Promise<boolean> {
  return (await db('chain_failing_addresses').where({ address: address.toLowerCase() }).first()) !== undefined;
}

export async function setWalletKey(db: Db, walletId: string, address: string, sealedPrivateKey: string): Promise<number> {
  return db('wallets').where({ id: walletId }).update({ address, sealed_private_key: sealedPrivateKey });
}
