// Inbound chain state (migration 0007): the deposit watcher's block cursor, credited deposits, and the reads
// reconcile needs (wallet balances, outgoing transfers the chain has mined but the ledger has not yet settled).
import type { Db } from '../knex.js';

export interface CursorRow {
  chain_id: number;
  name: string;
  block_number: number;
  block_hash: string | null;
}

export interface NewDepositRow {
  id: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  block_number: bigint;
  block_hash: string;
  wallet_id: string;
  asset_symbol: string;
  token_address: string | null;
  from_address: string;
  to_address: string;
  amount: bigint;
  credited_at: Date;
}

export interface DepositRow {
  id: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  block_number: number;
  block_hash: string;
  wallet_id: string;
  asset_symbol: string;
  to_address: string;
  from_address: string;
  amount: string;
}

export async function findCursor(db: Db, chainId: number, name: string): Promise<CursorRow | undefined> {
  return db('chain_cursors').where({ chain_id: chainId, name }).first('chain_id', 'name', 'block_number', 'block_hash');
}

/** Creates the cursor unless one exists; returns the stored one (the first writer's under a race). */
export async function insertCursorOnce(db: Db, chainId: number, name: string, blockNumber: bigint, blockHash: string | null, at: Date): Promise<CursorRow> {
  await db('chain_cursors').insert({ chain_id: chainId, name, block_number: blockNumber.toString(), block_hash: blockHash, updated_at: at }).onConflict(['chain_id', 'name']).ignore();
  return (await findCursor(db, chainId, name))!;
}

/** The cursor under its row lock (held to the end of the caller's transaction). */
export async function lockCursor(db: Db, chainId: number, name: string): Promise<CursorRow | undefined> {
  return db('chain_cursors').where({ chain_id: chainId, name }).forUpdate().first('chain_id', 'name', 'block_number', 'block_hash');
}

export async function moveCursor(db: Db, chainId: number, name: string, blockNumber: bigint, blockHash: string | null, at: Date): Promise<void> {
  await db('chain_cursors').where({ chain_id: chainId, name }).update({ block_number: blockNumber.toString(), block_hash: blockHash, updated_at: at });
}

/** Remembers an applied block's hash and forgets those more than `window` blocks older. */
export async function rememberBlock(db: Db, chainId: number, name: string, blockNumber: bigint, blockHash: string, window: number): Promise<void> {
  await db('chain_cursor_blocks').insert({ chain_id: chainId, name, block_number: blockNumber.toString(), block_hash: blockHash }).onConflict(['chain_id', 'name', 'block_number']).merge();
  await db('chain_cursor_blocks')
    .where({ chain_id: chainId, name })
    .where('block_number', '<', (blockNumber - BigInt(window)).toString())
    .delete();
}

/** The remembered blocks at or below `blockNumber`, newest first. */
export async function listRememberedBlocks(db: Db, chainId: number, name: string, blockNumber: bigint): Promise<{ block_number: number; block_hash: string }[]> {
  return db('chain_cursor_blocks').where({ chain_id: chainId, name }).where('block_number', '<=', blockNumber.toString()).orderBy('block_number', 'desc').select('block_number', 'block_hash');
}

/** Forgets remembered blocks above `blockNumber` (given up by a rewind). */
export async function forgetBlocksAbove(db: Db, chainId: number, name: string, blockNumber: bigint): Promise<void> {
  await db('chain_cursor_blocks').where({ chain_id: chainId, name }).where('block_number', '>', blockNumber.toString()).delete();
}

/** Records a deposit unless (chain_id, tx_hash, log_index) is already recorded; true when this call inserted it. */
export async function insertDepositOnce(db: Db, row: NewDepositRow): Promise<boolean> {
  // Unique among the live rows only (migration 0018): a reversed deposit mined again is credited again.
  const inserted = await db('chain_deposits')
    .insert({ ...row, tx_hash: row.tx_hash.toLowerCase(), block_number: row.block_number.toString(), amount: row.amount.toString() })
    .onConflict(db.raw('(chain_id, tx_hash, log_index) WHERE reversed_at IS NULL'))
    .ignore()
    .returning('id');
  return inserted.length > 0;
}

/** Live (not reversed) deposits credited from blocks after `blockNumber` (a deep reorganisation rewinds past them), locked. */
export async function listDepositsAfter(db: Db, chainId: number, blockNumber: bigint): Promise<DepositRow[]> {
  return db('chain_deposits').where({ chain_id: chainId }).whereNull('reversed_at').where('block_number', '>', blockNumber.toString()).orderBy(['block_number', 'tx_hash', 'log_index']).forUpdate();
}

/** Marks a deposit reversed (its block left the chain); false when it already was. */
export async function markDepositReversed(db: Db, id: string, at: Date): Promise<boolean> {
  return (await db('chain_deposits').where({ id }).whereNull('reversed_at').update({ reversed_at: at })) > 0;
}

/** Our wallets among `addresses` (any case): address (lower case) -> wallet. */
export async function findWalletsByAddresses(db: Db, addresses: string[]): Promise<Map<string, { id: string; agent_id: string }>> {
  if (addresses.length === 0) return new Map();
  const rows = (await db('wallets')
    .whereRaw('lower(address) = ANY(?)', [[...new Set(addresses.map((a) => a.toLowerCase()))]])
    .select('id', 'agent_id', 'address')) as { id: string; agent_id: string; address: string }[];
  return new Map(rows.map((r) => [r.address.toLowerCase(), { id: r.id, agent_id: r.agent_id }]));
}

/**
 * Which of `hashes` are this service's own transactions of `kinds`: swaps and vault actions, whose settlement books
 * every leg from the receipt's events (the wallet's tokens out and in), so the watcher must not credit them again.
 */
/** Our transactions among `hashes` (lower-case hash => kind and the address it was sent to). */
export async function ownTransactions(db: Db, chainId: number, hashes: string[]): Promise<Map<string, { kind: string; to: string }>> {
  if (hashes.length === 0) return new Map();
  const rows = (await db('chain_transactions')
    .where({ chain_id: chainId })
    .whereRaw('lower(tx_hash) = ANY(?)', [hashes.map((h) => h.toLowerCase())])
    .select('tx_hash', 'kind', 'to_address')) as { tx_hash: string; kind: string; to_address: string }[];
  return new Map(rows.map((r) => [r.tx_hash.toLowerCase(), { kind: r.kind, to: r.to_address.toLowerCase() }]));
}

export interface ReconcileWalletRow {
  wallet_id: string;
  agent_id: string;
  address: string;
}

export async function listWalletsWithAddress(db: Db, agentId?: string): Promise<ReconcileWalletRow[]> {
  const q = db('wallets').whereNotNull('address').orderBy('id').select('id as wallet_id', 'agent_id', 'address');
  if (agentId) q.where({ agent_id: agentId });
  return q;
}

/** available + held per asset of one wallet, as strings of base units. */
export async function walletLedgerTotals(db: Db, walletId: string): Promise<Map<string, bigint>> {
  const rows = (await db('balances').where({ wallet_id: walletId }).select('asset_symbol', 'available', 'held')) as { asset_symbol: string; available: string; held: string }[];
  return new Map(rows.map((r) => [r.asset_symbol, BigInt(r.available) + BigInt(r.held)]));
}

export interface InFlightRow {
  kind: string;
  token_address: string | null;
  transfer_value: string | null;
  receipt_status: number | null;
  gas_used: string | null;
  effective_gas_price: string | null;
  from_address: string;
  raw_tx: string;
}

/**
 * Transactions of `walletId`'s operations that the chain has mined while the operation is still open (the ledger
 * still holds the money): the chain already shows them, the ledger not yet.
 */
export async function listMinedUnsettled(db: Db, chainId: number, walletId: string): Promise<InFlightRow[]> {
  return db('chain_transactions as t')
    .join('operations as o', 'o.id', 't.operation_id')
    .where({ 't.chain_id': chainId, 't.status': 'mined', 'o.wallet_id': walletId })
    .whereIn('o.status', ['accepted', 'submitted'])
    .select('t.kind', 't.token_address', 't.transfer_value', 't.receipt_status', 't.gas_used', 't.effective_gas_price', 't.from_address', 't.raw_tx');
}
