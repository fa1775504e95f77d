// Trusted destinations: owner-proposed addresses with a time lock before confirmation.
import { rows, type Db } from '../knex.js';
import { sql } from '../sql.js';
import { newestFirst, type Page } from './keyset.js';

export interface TrustedDestinationRow {
  id: string;
  agent_id: string;
  kind: 'crypto';
  chain: 'base';
  address: string;
  label: string;
  status: 'pending' | 'confirmed' | 'cancelled' | 'removed';
  confirmable_at: Date;
  created_at: Date;
  confirmed_at: Date | null;
  cancelled_at: Date | null;
  removed_at: Date | null;
  updated_at: Date;
}

export async function insertTrustedDestination(db: Db, row: TrustedDestinationRow): Promise<void> {
  await db('trusted_destinations').insert(row);
}

export async function findTrustedDestination(db: Db, agentId: string, id: string, opts: { lock?: boolean } = {}): Promise<TrustedDestinationRow | undefined> {
  const q = db('trusted_destinations').where({ agent_id: agentId, id }).first();
  if (opts.lock) q.forUpdate();
  return q;
}

export async function findTrustedDestinationById(db: Db, id: string): Promise<TrustedDestinationRow | undefined> {
  return db('trusted_destinations').where({ id }).forUpdate().first();
}

export async function findConfirmedDestinationsByAddress(db: Db, agentId: string, address: string): Promise<TrustedDestinationRow[]> {
  return db('trusted_destinations').where({ agent_id: agentId, status: 'confirmed' }).whereRaw('lower(address) = lower(?)', [address]).orderBy('created_at');
}

/**
 * The agent's pending destination for `address`, if any, after taking a transaction lock on (agent, address): two
 * proposals of one address serialise here, so the second sees the first (call it in the transaction that inserts).
 */
export async function lockPendingDestinationByAddress(trx: Db, agentId: string, address: string): Promise<TrustedDestinationRow | undefined> {
  await rows(trx, sql`SELECT pg_advisory_xact_lock(hashtext(${`trusted-destination:${agentId}:${address.toLowerCase()}`}))`);
  return trx('trusted_destinations').where({ agent_id: agentId, status: 'pending' }).whereRaw('lower(address) = lower(?)', [address]).first();
}

export async function listTrustedDestinations(db: Db, agentId: string, p: Page): Promise<TrustedDestinationRow[]> {
  return newestFirst(db('trusted_destinations').where({ agent_id: agentId }), p);
}

export async function transitionTrustedDestination(
  db: Db,
  id: string,
  from: TrustedDestinationRow['status'],
  patch: Partial<TrustedDestinationRow> & { status: TrustedDestinationRow['status']; updated_at: Date },
): Promise<TrustedDestinationRow | undefined> {
  const [row] = await db('trusted_destinations').where({ id, status: from }).update(patch).returning('*');
  return row;
}
