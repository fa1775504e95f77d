// Earn vaults and positions: rows with NUMERIC money as strings; locks for read-modify-write.
//
// Lock order of every earn write (issue 30): the agent's policy row, then the wallet's balance rows ((wallet, asset)
// order, as every ledger posting), then vault rows (id order), then position rows. Balances come before vaults
// because a settlement batch holds balance rows while it waits for others (settlement-batch.ts): a transaction
// holding a vault row must never wait for one, or every other depositor into that vault waits behind the batch.
import type { Db } from '../knex.js';
import type { PriceRow } from './ledger.repository.js';

export interface VaultRow {
  id: string;
  name: string;
  protocol_id: string;
  asset_symbol: string;
  address: string;
  apy_bps: number;
  decimals_offset: number;
  total_assets: string;
  total_shares: string;
  capacity: string | null;
  reward_asset_symbol: string | null;
  reward_rate_ray: string;
  acc_reward_per_share_ray: string;
  active: boolean;
  last_accrued_at: Date | null;
  created_at: Date;
}

export interface PositionRow {
  id: string;
  agent_id: string;
  wallet_id: string;
  vault_id: string;
  shares: string;
  principal: string;
  reward_checkpoint_ray: string;
  rewards_accrued: string;
  created_at: Date;
  updated_at: Date;
}

/** A vault as inserted: the row's descriptive columns, money as bigint; state columns take their defaults. */
export type NewVault = Pick<VaultRow, 'id' | 'name' | 'protocol_id' | 'asset_symbol' | 'address' | 'apy_bps' | 'decimals_offset' | 'reward_asset_symbol' | 'created_at'> & {
  capacity: bigint | null;
  reward_rate_ray: bigint;
};

export async function insertVault(db: Db, v: NewVault): Promise<VaultRow> {
  const [row] = await db('earn_vaults')
    .insert({ ...v, capacity: v.capacity?.toString() ?? null, reward_rate_ray: v.reward_rate_ray.toString(), last_accrued_at: null })
    .returning('*');
  return row as VaultRow;
}

export async function listVaults(db: Db, opts: { activeOnly?: boolean; asset?: string } = {}): Promise<VaultRow[]> {
  const q = db('earn_vaults').orderBy([
    { column: 'apy_bps', order: 'desc' },
    { column: 'id', order: 'asc' },
  ]);
  if (opts.activeOnly) q.where({ active: true });
  if (opts.asset) q.where({ asset_symbol: opts.asset });
  return q;
}

export async function findVault(db: Db, id: string): Promise<VaultRow | undefined> {
  return db('earn_vaults').where({ id }).first();
}

export async function findVaultByAddress(db: Db, address: string): Promise<VaultRow | undefined> {
  return db('earn_vaults').whereRaw('lower(address) = lower(?)', [address]).first();
}

/** Locks the vaults (in id order, so two movers never deadlock) for the rest of the transaction; take the balance rows first. */
export async function lockVaults(db: Db, ids: string[]): Promise<VaultRow[]> {
  const sorted = [...new Set(ids)].sort();
  const rows: VaultRow[] = [];
  for (const id of sorted) {
    const row = await db('earn_vaults').where({ id }).forUpdate().first();
    if (row) rows.push(row as VaultRow);
  }
  return rows;
}

export async function updateVaultState(db: Db, id: string, s: { total_assets: bigint; total_shares: bigint; acc_reward_per_share_ray: bigint; last_accrued_at: Date }): Promise<void> {
  await db('earn_vaults').where({ id }).update({
    total_assets: s.total_assets.toString(),
    total_shares: s.total_shares.toString(),
    acc_reward_per_share_ray: s.acc_reward_per_share_ray.toString(),
    last_accrued_at: s.last_accrued_at,
  });
}

/** What one mint writes (vaults.ts mintInto computed it from the locked vault row). */
export interface Mint {
  vault: { id: string; total_assets: bigint; total_shares: bigint; acc_reward_per_share_ray: bigint; last_accrued_at: Date };
  /** The shares and principal added to the wallet's position in the vault, settling its rewards at the vault's accumulator. */
  position: { id: string; agent_id: string; wallet_id: string; shares: bigint; principal: bigint; at: Date };
  /** The operation that minted, when its details learn the shares in the same statement (an earn deposit). */
  operation?: { id: string; details: Record<string, unknown> };
}

const RAY_TEXT = (10n ** 27n).toString();

/**
 * A mint in ONE statement, the vault row already locked by the caller: the vault's new state, the position created or
 * grown, and (for a deposit) its operation's details. The position's rewards settle in SQL against
 * the row as it is when the upsert locks it (vaults.ts settleRewards: rewards += shares · (acc − checkpoint) / RAY,
 * rounded down; checkpoint = acc), so no earlier read of it is trusted. The vault row is the one every depositor
 * shares: holding it costs this statement and the COMMIT, no more (issue 30).
 */
export async function mintShares(db: Db, m: Mint): Promise<PositionRow> {
  const v = m.vault;
  const p = m.position;
  const result = await db.raw(
    `WITH vault AS (
       UPDATE earn_vaults SET total_assets = ?, total_shares = ?, acc_reward_per_share_ray = ?, last_accrued_at = ? WHERE id = ? RETURNING id
     ), op AS (
       UPDATE operations SET details = details || ?::jsonb WHERE id = ? RETURNING id
     ), pos AS (
       INSERT INTO earn_positions AS p (id, agent_id, wallet_id, vault_id, shares, principal, reward_checkpoint_ray, rewards_accrued, created_at, updated_at)
       SELECT ?, ?, ?, vault.id, ?, ?, ?, 0, ?, ? FROM vault
       ON CONFLICT (wallet_id, vault_id) DO UPDATE SET
         rewards_accrued = p.rewards_accrued + GREATEST(0, div(p.shares * (EXCLUDED.reward_checkpoint_ray - p.reward_checkpoint_ray), ${RAY_TEXT})),
         shares = p.shares + EXCLUDED.shares,
         principal = p.principal + EXCLUDED.principal,
         reward_checkpoint_ray = EXCLUDED.reward_checkpoint_ray,
         updated_at = EXCLUDED.updated_at
       RETURNING p.*
     )
     SELECT pos.* FROM pos`,
    [
      v.total_assets.toString(),
      v.total_shares.toString(),
      v.acc_reward_per_share_ray.toString(),
      v.last_accrued_at,
      v.id,
      JSON.stringify(m.operation?.details ?? {}),
      m.operation?.id ?? null,
      p.id,
      p.agent_id,
      p.wallet_id,
      p.shares.toString(),
      p.principal.toString(),
      v.acc_reward_per_share_ray.toString(),
      p.at,
      p.at,
    ],
  );
  const position = (result.rows as PositionRow[])[0];
  if (!position) throw new Error(`vault ${v.id} is gone`);
  return position;
}

export async function listPositions(db: Db, walletId: string, page: { before?: { createdAt: Date; id: string }; limit: number }): Promise<PositionRow[]> {
  const q = db('earn_positions')
    .where({ wallet_id: walletId })
    .where('shares', '>', 0)
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(page.limit);
  if (page.before) q.whereRaw('(created_at, id) < (?, ?)', [page.before.createdAt, page.before.id]);
  return q;
}

export async function listAllPositions(db: Db, walletId: string): Promise<PositionRow[]> {
  return db('earn_positions').where({ wallet_id: walletId }).orderBy('created_at', 'asc');
}

export async function findPosition(db: Db, walletId: string, id: string): Promise<PositionRow | undefined> {
  return db('earn_positions').where({ wallet_id: walletId, id }).first();
}

export async function findPositionByVault(db: Db, walletId: string, vaultId: string): Promise<PositionRow | undefined> {
  return db('earn_positions').where({ wallet_id: walletId, vault_id: vaultId }).first();
}

/** Returns the wallet's position in the vault, creating an empty one (race-safe through the unique key). */
export async function ensurePosition(db: Db, p: { id: string; agent_id: string; wallet_id: string; vault_id: string; reward_checkpoint_ray: bigint; at: Date }): Promise<PositionRow> {
  await db('earn_positions')
    .insert({ id: p.id, agent_id: p.agent_id, wallet_id: p.wallet_id, vault_id: p.vault_id, reward_checkpoint_ray: p.reward_checkpoint_ray.toString(), created_at: p.at, updated_at: p.at })
    .onConflict(['wallet_id', 'vault_id'])
    .ignore();
  return (await db('earn_positions').where({ wallet_id: p.wallet_id, vault_id: p.vault_id }).forUpdate().first()) as PositionRow;
}

export async function lockPosition(db: Db, walletId: string, id: string): Promise<PositionRow | undefined> {
  return db('earn_positions').where({ wallet_id: walletId, id }).forUpdate().first();
}

export async function updatePosition(db: Db, id: string, s: { shares: bigint; principal: bigint; reward_checkpoint_ray: bigint; rewards_accrued: bigint; updated_at: Date }): Promise<void> {
  await db('earn_positions').where({ id }).update({
    shares: s.shares.toString(),
    principal: s.principal.toString(),
    reward_checkpoint_ray: s.reward_checkpoint_ray.toString(),
    rewards_accrued: s.rewards_accrued.toString(),
    updated_at: s.updated_at,
  });
}

/** The development bootstrap put this vault on chain: its address becomes the deployed ERC-4626 vault's. */
export async function setVaultAddress(db: Db, id: string, address: string): Promise<number> {
  return db('earn_vaults').where({ id }).update({ address });
}

export const VAULT_COLUMNS = [
  'id',
  'name',
  'protocol_id',
  'asset_symbol',
  'address',
  'apy_bps',
  'decimals_offset',
  'total_assets',
  'total_shares',
  'capacity',
  'reward_asset_symbol',
  'reward_rate_ray',
  'acc_reward_per_share_ray',
  'active',
  'last_accrued_at',
  'created_at',
] as const satisfies readonly (keyof VaultRow)[];

/** A position read with its vault and the price of the vault's asset (undefined without one). */
export interface ValuedPosition {
  position: PositionRow;
  vault: VaultRow;
  price: PriceRow | undefined;
}

/** Positions joined with their vault and price in one statement (a page of positions is one round trip). */
function valuedPositions(db: Db) {
  return db('earn_positions as e')
    .join('earn_vaults as v', 'v.id', 'e.vault_id')
    .leftJoin('prices as pr', 'pr.asset_symbol', 'v.asset_symbol')
    .select('e.*', ...VAULT_COLUMNS.map((c) => `v.${c} as v__${c}`), 'pr.usd_e8 as pr__usd_e8', 'pr.observed_at as pr__observed_at', 'pr.source as pr__source');
}

export function splitValued(row: Record<string, unknown>): ValuedPosition {
  const position: Record<string, unknown> = {};
  const vault: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (k.startsWith('v__')) vault[k.slice(3)] = v;
    else if (!k.startsWith('pr__')) position[k] = v;
  }
  const price =
    row.pr__usd_e8 == null
      ? undefined
      : { asset_symbol: vault.asset_symbol as string, usd_e8: row.pr__usd_e8 as string, observed_at: row.pr__observed_at as Date | null, source: row.pr__source as string };
  return { position: position as unknown as PositionRow, vault: vault as unknown as VaultRow, price };
}

export async function listValuedPositions(db: Db, walletId: string, page: { before?: { createdAt: Date; id: string }; limit: number }): Promise<ValuedPosition[]> {
  const q = valuedPositions(db)
    .where('e.wallet_id', walletId)
    .where('e.shares', '>', 0)
    .orderBy([
      { column: 'e.created_at', order: 'desc' },
      { column: 'e.id', order: 'desc' },
    ])
    .limit(page.limit);
  if (page.before) q.whereRaw('(e.created_at, e.id) < (?, ?)', [page.before.createdAt, page.before.id]);
  return (await q).map(splitValued);
}

export async function listAllValuedPositions(db: Db, walletId: string): Promise<ValuedPosition[]> {
  return (await valuedPositions(db).where('e.wallet_id', walletId).orderBy('e.created_at', 'asc')).map(splitValued);
}

export async function findValuedPosition(db: Db, walletId: string, id: string): Promise<ValuedPosition | undefined> {
  const row = await valuedPositions(db).where({ 'e.wallet_id': walletId, 'e.id': id }).first();
  return row ? splitValued(row) : undefined;
}
