// Owners, agents, wallets and per-agent rate-limit overrides.
import { rows, type Db } from '../knex.js';
import { prepared, sql, type Sql } from '../sql.js';

export interface OwnerRow {
  id: string;
  email: string;
  name: string | null;
  /** The owner's signer (evm mode: it owns the agents' AgentAccounts and signs every owner change). */
  signer_address: string | null;
  deleted_at: Date | null;
  created_at: Date;
}

export interface AgentRow {
  id: string;
  owner_id: string;
  name: string;
  enabled: boolean;
  starts_at: Date | null;
  ends_at: Date | null;
  api_key_hash: string;
  api_key_prefix: string;
  created_at: Date;
  updated_at: Date;
}

export interface WalletRow {
  id: string;
  agent_id: string;
  address: string | null;
  /** 'eoa': the wallet's own key; 'account': the lane key of the AgentAccount at `address` (issue 24). */
  sealed_private_key: string | null;
  custody?: 'eoa' | 'account';
  lane_address?: string | null;
  created_at: Date;
}

export interface AuthRow {
  agent: AgentRow;
  wallet_id: string;
  wallet_address: string | null;
  owner_deleted_at: Date | null;
  owner_exists: boolean;
  rate_overrides: RateLimitOverrideRow[];
}

export interface RateLimitOverrideRow {
  agent_id: string;
  class: string;
  limit: number;
  burst: number;
  window_seconds: number;
}

export async function insertOwner(db: Db, row: Pick<OwnerRow, 'id' | 'email' | 'name'> & Partial<Pick<OwnerRow, 'signer_address'>>): Promise<void> {
  await db('owners').insert(row);
}

export async function findOwner(db: Db, id: string): Promise<OwnerRow | undefined> {
  return db('owners').where({ id }).first();
}

export async function softDeleteOwner(db: Db, id: string, at: Date): Promise<number> {
  return db('owners').where({ id }).whereNull('deleted_at').update({ deleted_at: at });
}

export async function insertAgent(db: Db, row: Omit<AgentRow, 'created_at' | 'updated_at'> & { created_at: Date; updated_at: Date }): Promise<void> {
  await db('agents').insert(row);
}

export async function insertWallet(db: Db, row: Omit<WalletRow, 'created_at'> & { created_at: Date }): Promise<void> {
  await db('wallets').insert(row);
}

export async function findAgent(db: Db, id: string): Promise<AgentRow | undefined> {
  return db('agents').where({ id }).first();
}

export async function findWalletByAgent(db: Db, agentId: string): Promise<WalletRow | undefined> {
  return db('wallets').where({ agent_id: agentId }).first();
}

export async function listAgentsByOwner(db: Db, ownerId: string): Promise<AgentRow[]> {
  return db('agents').where({ owner_id: ownerId }).orderBy('created_at', 'asc');
}

/**
 * One round trip for authentication: the agent (the columns of AgentRow, not `a.*`: pg parses every column of every
 * row, timestamps included), its wallet and its owner's state. Written once as SQL: it runs on every authenticated
 * request, and knex's builder would compile it each time.
 */
const authRowStatement = (agentId: string) =>
  prepared(
    sql`SELECT a.id, a.owner_id, a.name, a.enabled, a.starts_at, a.ends_at, a.api_key_hash, a.api_key_prefix, a.created_at, a.updated_at, w.id AS wallet_id, w.address AS wallet_address, o.id AS owner_found, o.deleted_at AS owner_deleted_at,
    (SELECT coalesce(json_agg(r), '[]'::json) FROM rate_limit_overrides r WHERE r.agent_id = a.id) AS rate_overrides
  FROM agents a LEFT JOIN wallets w ON w.agent_id = a.id LEFT JOIN owners o ON o.id = a.owner_id
  WHERE a.id = ${agentId} LIMIT 1`,
    'agentapi_auth_row',
  );

export async function findAuthRow(db: Db, agentId: string): Promise<AuthRow | undefined> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the row is typed by AuthRow below
  const [row] = await rows(db, authRowStatement(agentId) as Sql<any>);
  if (!row) return undefined;
  const { wallet_id, wallet_address, owner_found, owner_deleted_at, rate_overrides, ...agent } = row;
  const overrides = typeof rate_overrides === 'string' ? JSON.parse(rate_overrides) : rate_overrides;
  return { agent: agent as AgentRow, wallet_id, wallet_address, owner_exists: owner_found != null, owner_deleted_at, rate_overrides: overrides ?? [] };
}

export async function updateAgent(db: Db, id: string, patch: Partial<Pick<AgentRow, 'enabled' | 'starts_at' | 'ends_at' | 'api_key_hash' | 'api_key_prefix'>> & { updated_at: Date }): Promise<number> {
  return db('agents').where({ id }).update(patch);
}

export async function upsertRateLimitOverride(db: Db, row: RateLimitOverrideRow): Promise<void> {
  await db('rate_limit_overrides').insert(row).onConflict(['agent_id', 'class']).merge();
}

export async function listRateLimitOverrides(db: Db, agentId: string): Promise<RateLimitOverrideRow[]> {
  return db('rate_limit_overrides').where({ agent_id: agentId });
}
