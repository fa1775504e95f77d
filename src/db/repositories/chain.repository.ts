// Chain settlement state (migration 0006): settings per chain, account nonces, signed transactions.
import { rows, type Db, type Knex } from '../knex.js';
import { sql } from '../sql.js';

export type ChainTxStatus = 'signed' | 'broadcast' | 'mined' | 'replaced' | 'dropped';
/** `lane`: a relayed lane call of an agent account; `owner`: an owner's signed action relayed; `deploy`: an account's creation; `claim`: a cheque claim (issue 24). */
export type ChainTxKind = 'native' | 'eip3009' | 'cancel' | 'funding' | 'swap' | 'wrap' | 'vault' | 'lending' | 'rewards' | 'lane' | 'owner' | 'deploy' | 'claim';

export interface ChainTxRow {
  id: string;
  chain_id: number;
  operation_id: string | null;
  kind: ChainTxKind;
  from_address: string;
  to_address: string;
  nonce: string;
  attempt: number;
  raw_tx: string;
  tx_hash: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  status: ChainTxStatus;
  token_address: string | null;
  transfer_to: string | null;
  transfer_value: string | null;
  authorization_nonce: string | null;
  valid_before: string | null;
  block_number: string | null;
  block_hash: string | null;
  log_index: number | null;
  receipt_status: number | null;
  gas_used: string | null;
  effective_gas_price: string | null;
  last_error: string | null;
  created_at: Date;
  broadcast_at: Date | null;
  mined_at: Date | null;
  updated_at: Date;
}

export type NewChainTxRow = Pick<
  ChainTxRow,
  'id' | 'chain_id' | 'operation_id' | 'kind' | 'from_address' | 'to_address' | 'attempt' | 'raw_tx' | 'tx_hash' | 'token_address' | 'transfer_to' | 'authorization_nonce' | 'created_at'
> & {
  nonce: bigint;
  max_fee_per_gas: bigint;
  max_priority_fee_per_gas: bigint;
  transfer_value: bigint | null;
  valid_before: bigint | null;
};

export async function findSetting(db: Db, chainId: number, key: string): Promise<string | undefined> {
  const row = await db('chain_settings').where({ chain_id: chainId, key }).first('value');
  return (row as { value: string } | undefined)?.value;
}

/** Inserts a setting unless one exists; returns the stored value (the first writer's, under a race). */
export async function insertSettingOnce(db: Db, chainId: number, key: string, value: string, at: Date): Promise<string> {
  await db('chain_settings').insert({ chain_id: chainId, key, value, updated_at: at }).onConflict(['chain_id', 'key']).ignore();
  return (await findSetting(db, chainId, key))!;
}

/**
 * Takes the next nonce of `address` under its row lock (held until the caller's transaction ends, so concurrent
 * workers queue here and each gets a distinct nonce). The row is created from `initial` (the chain's pending count)
 * the first time. Returns undefined when no row exists yet and `initial` was not given.
 */
export async function takeNonce(db: Db, chainId: number, address: string, at: Date, initial?: bigint): Promise<bigint | undefined> {
  const key = { chain_id: chainId, address: address.toLowerCase() };
  if (initial !== undefined)
    await db('chain_nonces')
      .insert({ ...key, next_nonce: initial, updated_at: at })
      .onConflict(['chain_id', 'address'])
      .ignore();
  const [row] = await db('chain_nonces')
    .where(key)
    .update({ next_nonce: db.raw('next_nonce + 1'), updated_at: at })
    .returning(db.raw('(next_nonce - 1)::text as nonce'));
  return row ? BigInt((row as { nonce: string }).nonce) : undefined;
}

export async function insertChainTx(db: Db, row: NewChainTxRow): Promise<void> {
  await db('chain_transactions').insert({ ...row, from_address: row.from_address.toLowerCase(), status: 'signed', updated_at: row.created_at });
}

export async function listChainTxsByOperation(db: Db, operationId: string): Promise<ChainTxRow[]> {
  return db('chain_transactions')
    .where({ operation_id: operationId })
    .orderBy([{ column: 'nonce' }, { column: 'attempt' }]);
}

/** Transactions recorded but not yet accepted by the node (never broadcast, or broadcast failed). */
export async function listUnsentChainTxs(db: Db, chainId: number, limit: number): Promise<ChainTxRow[]> {
  return db('chain_transactions')
    .where({ chain_id: chainId, status: 'signed' })
    .orderBy([{ column: 'from_address' }, { column: 'nonce' }])
    .limit(limit);
}

/**
 * Broadcast transactions older than `before` that are the newest attempt of their (sender, nonce) and not mined:
 * candidates for a fee-bumped replacement.
 */
export async function listStaleChainTxs(db: Db, chainId: number, before: Date, limit: number): Promise<ChainTxRow[]> {
  return db('chain_transactions as t')
    .where({ 't.chain_id': chainId, 't.status': 'broadcast' })
    .where('t.broadcast_at', '<', before)
    .whereNotExists((q) =>
      q.from('chain_transactions as s').whereRaw('s.chain_id = t.chain_id AND s.from_address = t.from_address AND s.nonce = t.nonce AND (s.attempt > t.attempt OR s.status = ?)', ['mined']),
    )
    .orderBy('t.broadcast_at')
    .limit(limit)
    .select('t.*');
}

export async function markChainTxBroadcast(db: Db, id: string, at: Date): Promise<void> {
  await db('chain_transactions').where({ id, status: 'signed' }).update({ status: 'broadcast', broadcast_at: at, last_error: null, updated_at: at });
}

export async function markChainTxError(db: Db, id: string, error: string, at: Date): Promise<void> {
  await db('chain_transactions')
    .where({ id })
    .update({ last_error: error.slice(0, 500), updated_at: at });
}

/** Records the receipt of the attempt that was mined; the other attempts of its nonce become `replaced`. */
export async function markChainTxMined(
  db: Db,
  row: Pick<ChainTxRow, 'id' | 'chain_id' | 'from_address' | 'nonce'>,
  receipt: { block_number: bigint; block_hash: string; receipt_status: number; gas_used: bigint; effective_gas_price: bigint; log_index: number | null },
  at: Date,
): Promise<void> {
  await db('chain_transactions')
    .where({ id: row.id })
    .update({ ...receipt, status: 'mined', mined_at: at, updated_at: at });
  await db('chain_transactions')
    .where({ chain_id: row.chain_id, from_address: row.from_address, nonce: row.nonce })
    .whereNot({ id: row.id })
    .whereIn('status', ['signed', 'broadcast'])
    .update({ status: 'replaced', updated_at: at });
}

/**
 * The EIP-2612 permit nonce to sign for `owner` on `token`: the chain's when no swap of the owner is in flight
 * (a reverted swap does not consume its permit, so the count restarts from the chain), else the next after those in
 * flight, allocated under the row lock of chain_nonces (key `permit:<token>:<owner>`) like account nonces.
 */
export async function takePermitNonce(db: Db, chainId: number, token: string, owner: string, onchain: bigint, at: Date): Promise<bigint> {
  const key = { chain_id: chainId, address: `permit:${token}:${owner}`.toLowerCase() };
  await db('chain_nonces')
    .insert({ ...key, next_nonce: onchain, updated_at: at })
    .onConflict(['chain_id', 'address'])
    .ignore();
  await db('chain_nonces').where(key).forUpdate().first();
  const open = await db('chain_transactions')
    .where({ chain_id: chainId, token_address: token.toLowerCase(), transfer_to: owner.toLowerCase() })
    .whereIn('kind', ['swap', 'vault', 'lending'])
    .whereIn('status', ['signed', 'broadcast'])
    .first('id');
  const [row] = await db('chain_nonces')
    .where(key)
    .update({ next_nonce: open ? db.raw('greatest(next_nonce, ?) + 1', [onchain.toString()]) : (onchain + 1n).toString(), updated_at: at })
    .returning(db.raw('(next_nonce - 1)::text as nonce'));
  return BigInt((row as { nonce: string }).nonce);
}

export async function deleteSetting(db: Db, chainId: number, key: string): Promise<void> {
  await db('chain_settings').where({ chain_id: chainId, key }).delete();
}

export async function findChainTxByHash(db: Db, txHash: string): Promise<ChainTxRow | undefined> {
  return db('chain_transactions').where({ tx_hash: txHash }).first();
}

/** A re-sent transaction (same bytes): its staleness restarts. */
export async function touchChainTxBroadcast(db: Db, id: string, at: Date): Promise<void> {
  await db('chain_transactions').where({ id }).update({ broadcast_at: at, updated_at: at });
}

/** The sealed key of the wallet at `address` (a sender of native transfers), if it is one of ours. */
export async function findWalletKeyByAddress(db: Db, address: string): Promise<string | undefined> {
  const row = await db('wallets').whereRaw('lower(address) = lower(?)', [address]).first('sealed_private_key');
  return (row as { sealed_private_key: string | null } | undefined)?.sealed_private_key ?? undefined;
}

/** Records the token's address on this chain as the asset's contract address (dev bootstrap, configured addresses), and its EIP-712 domain when read from the token. */
export async function setAssetContractAddress(db: Db, symbol: string, address: string, eip712?: { name: string; version: string }): Promise<number> {
  return db('assets')
    .where({ symbol })
    .update({ contract_address: address, ...(eip712 ? { eip712_name: eip712.name, eip712_version: eip712.version } : {}) });
}

export async function upsertSetting(db: Db, chainId: number, key: string, value: string, at: Date): Promise<void> {
  await db('chain_settings').insert({ chain_id: chainId, key, value, updated_at: at }).onConflict(['chain_id', 'key']).merge(['value', 'updated_at']);
}

/** Runs `fn` in a transaction holding the chain bootstrap's advisory lock (one bootstrapping process at a time). */
export async function withChainLock<T>(db: Knex, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    await rows(trx, sql`SELECT pg_advisory_xact_lock(hashtext('agent-api:chain-bootstrap'))`);
    return fn(trx);
  });
}

/** Forgets the nonces of a chain whose state was lost (a fresh development node): the next take reads the node's count. */
export async function deleteNonces(db: Db, chainId: number): Promise<number> {
  return db('chain_nonces').where({ chain_id: chainId }).delete();
}

/** A protocol the development bootstrap deployed (Uniswap v2), listed by /protocols beside the seeded ones. */
export async function insertProtocolOnce(db: Db, p: { id: string; name: string; kinds: string[]; asset_symbols: string[] }): Promise<void> {
  await db('protocols')
    .insert({ ...p, kinds: JSON.stringify(p.kinds), asset_symbols: JSON.stringify(p.asset_symbols) })
    .onConflict('id')
    .ignore();
}
