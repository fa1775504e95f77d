// The owner's side: owner API tokens (by hash), the owner audit log, and the lookups that tie an
// owner-addressed resource (destination, endpoint, grant, one-off payment) to its agent and owner.
import { rows, type Db } from '../knex.js';
import { identifier, sql } from '../sql.js';
import type { AgentRow } from './agent.repository.js';

export interface OwnerTokenRow {
  id: string;
  owner_id: string;
  token_hash: string;
  token_prefix: string;
  label: string | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
}

export interface AuditRow {
  id: string;
  owner_id: string;
  actor: 'owner' | 'admin' | 'system';
  actor_token_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  details: Record<string, unknown>;
  client_address: string | null;
  request_id: string | null;
  created_at: Date;
}

export async function insertOwnerToken(db: Db, row: Omit<OwnerTokenRow, 'last_used_at' | 'revoked_at'>): Promise<void> {
  await db('owner_tokens').insert(row);
}

/** A live token of a live owner, by hash. */
export async function findLiveOwnerToken(db: Db, tokenHash: string): Promise<OwnerTokenRow | undefined> {
  return db('owner_tokens as t').join('owners as o', 'o.id', 't.owner_id').where('t.token_hash', tokenHash).whereNull('t.revoked_at').whereNull('o.deleted_at').first('t.*');
}

export async function touchOwnerToken(db: Db, id: string, at: Date): Promise<void> {
  await db('owner_tokens').where({ id }).update({ last_used_at: at });
}

export async function insertAudit(db: Db, row: AuditRow): Promise<void> {
  await db('owner_audit').insert({ ...row, details: JSON.stringify(row.details) });
}

/**
 * Newest first, in insertion order within one timestamp (`seq`); `before` is the last row of the previous page
 * (exclusive keyset on created_at and that row's seq).
 */
export async function listAudit(db: Db, ownerId: string | null, options: { before?: { createdAt: Date; id: string }; since?: Date; limit: number }): Promise<AuditRow[]> {
  const q = db('owner_audit')
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'seq', order: 'desc' },
    ])
    .limit(options.limit);
  if (ownerId) q.where({ owner_id: ownerId });
  if (options.since) q.where('created_at', '>=', options.since);
  if (options.before) q.whereRaw('(created_at, seq) < (?, (SELECT seq FROM owner_audit WHERE id = ?))', [options.before.createdAt, options.before.id]);
  return q;
}

/** Live (not soft-deleted) agents, newest first, of one owner or (null) of every owner. */
export async function listLiveAgents(
  db: Db,
  ownerId: string | null,
  options: { before?: { createdAt: Date; id: string }; limit: number },
): Promise<(AgentRow & { wallet_id: string; wallet_address: string | null })[]> {
  const q = db('agents as a')
    .join('wallets as w', 'w.agent_id', 'a.id')
    .whereNull('a.deleted_at')
    .orderBy([
      { column: 'a.created_at', order: 'desc' },
      { column: 'a.id', order: 'desc' },
    ])
    .limit(options.limit)
    .select('a.*', 'w.id as wallet_id', 'w.address as wallet_address');
  if (ownerId) q.where('a.owner_id', ownerId);
  if (options.before) q.whereRaw('(a.created_at, a.id) < (?, ?)', [options.before.createdAt, options.before.id]);
  return q;
}

export interface OwnerSummaryRow {
  id: string;
  email: string;
  name: string | null;
  created_at: Date;
  agent_count: number;
}

/** Live owners newest first, each with its number of live agents (agents_owner_id index per owner). */
export async function listLiveOwners(db: Db, options: { before?: { createdAt: Date; id: string }; limit: number }): Promise<OwnerSummaryRow[]> {
  const q = db('owners as o')
    .whereNull('o.deleted_at')
    .orderBy([
      { column: 'o.created_at', order: 'desc' },
      { column: 'o.id', order: 'desc' },
    ])
    .limit(options.limit)
    .select('o.id', 'o.email', 'o.name', 'o.created_at', db.raw('(SELECT count(*)::int FROM agents a WHERE a.owner_id = o.id AND a.deleted_at IS NULL) AS agent_count'));
  if (options.before) q.whereRaw('(o.created_at, o.id) < (?, ?)', [options.before.createdAt, options.before.id]);
  return q as unknown as Promise<OwnerSummaryRow[]>;
}

export async function findLiveAgent(db: Db, id: string): Promise<(AgentRow & { wallet_id: string; wallet_address: string | null }) | undefined> {
  return db('agents as a').join('wallets as w', 'w.agent_id', 'a.id').where('a.id', id).whereNull('a.deleted_at').first('a.*', 'w.id as wallet_id', 'w.address as wallet_address');
}

export async function softDeleteAgent(db: Db, id: string, at: Date): Promise<number> {
  return db('agents').where({ id }).whereNull('deleted_at').update({ deleted_at: at, enabled: false, updated_at: at });
}

/** The agent a resource belongs to (null when the resource does not exist). */
export async function findAgentIdOf(db: Db, kind: 'trusted_destination' | 'webhook_endpoint' | 'oauth_grant' | 'one_off_payment', id: string): Promise<string | null> {
  const row =
    kind === 'trusted_destination'
      ? await db('trusted_destinations').where({ id }).first('agent_id')
      : kind === 'webhook_endpoint'
        ? await db('webhook_endpoints').where({ id }).first('agent_id')
        : kind === 'oauth_grant'
          ? await db('oauth_grants').where({ id }).first('agent_id')
          : await db('one_off_payments').where({ id }).orWhere({ operation_id: id }).first('agent_id');
  return (row?.agent_id as string | undefined) ?? null;
}

/** Endpoint ids of every live agent of an owner (or of every owner), newest first. */
export async function listEndpointsOfOwner(db: Db, ownerId: string | null, options: { before?: { createdAt: Date; id: string }; limit: number }) {
  const q = db('webhook_endpoints as e')
    .join('agents as a', 'a.id', 'e.agent_id')
    .whereNull('a.deleted_at')
    .orderBy([
      { column: 'e.created_at', order: 'desc' },
      { column: 'e.id', order: 'desc' },
    ])
    .limit(options.limit)
    .select(
      'e.*',
      'a.name as agent_name',
      // The newest failed attempt's error, while the endpoint is failing (webhook_delivery_attempts, migration 0015).
      db.raw(`CASE WHEN e.failing_since IS NULL THEN NULL ELSE (SELECT coalesce(t.error_class, 'http_' || t.http_status) FROM webhook_deliveries d JOIN webhook_delivery_attempts t ON t.delivery_id = d.id
        WHERE d.endpoint_id = e.id AND t.outcome <> 'delivered' AND (t.error_class IS NOT NULL OR t.http_status IS NOT NULL) ORDER BY t.attempted_at DESC LIMIT 1) END AS last_error`),
    );
  if (ownerId) q.where('a.owner_id', ownerId);
  if (options.before) q.whereRaw('(e.created_at, e.id) < (?, ?)', [options.before.createdAt, options.before.id]);
  return q;
}

export interface EndpointToWarn {
  id: string;
  agent_id: string;
  url: string;
  failing_since: Date;
  owner_id: string;
  owner_email: string;
  agent_name: string;
}

/**
 * One enabled endpoint failing for at least `hours` whose owner was not yet warned at that level in
 * this failing period (a stamp older than failing_since belongs to an earlier period), locked so
 * that concurrent workers warn once. Runs in the caller's transaction.
 */
export async function lockEndpointToWarn(db: Db, level: 24 | 48, now: Date): Promise<EndpointToWarn | undefined> {
  const stamp = level === 24 ? 'warned_24h_at' : 'warned_48h_at';
  const warned = identifier(stamp);
  const [row] = await rows(
    db,
    sql<EndpointToWarn>`SELECT e.id, e.agent_id, e.url, e.failing_since, a.owner_id, o.email AS owner_email, a.name AS agent_name
     FROM webhook_endpoints e JOIN agents a ON a.id = e.agent_id JOIN owners o ON o.id = a.owner_id
     WHERE e.enabled AND e.failing_since IS NOT NULL AND e.failing_since <= ${new Date(now.getTime() - level * 3600_000)}
       AND (e.${warned} IS NULL OR e.${warned} < e.failing_since)
       AND a.deleted_at IS NULL AND o.deleted_at IS NULL
     ORDER BY e.failing_since, e.id
     LIMIT 1
     FOR UPDATE OF e SKIP LOCKED`,
  );
  return row;
}

/** Marks the warning sent; the 48 h warning also covers a 24 h one never sent (a worker was down). */
export async function markEndpointWarned(db: Db, id: string, level: 24 | 48, at: Date): Promise<void> {
  await db('webhook_endpoints')
    .where({ id })
    .update(level === 24 ? { warned_24h_at: at } : { warned_24h_at: at, warned_48h_at: at });
}

/** The most recent failed attempt's reason at an endpoint. */
export async function lastFailureOf(db: Db, endpointId: string): Promise<{ error_class: string | null; http_status: number | null } | undefined> {
  return db('webhook_deliveries').where({ endpoint_id: endpointId }).whereNotNull('error_class').orderBy('last_attempt_at', 'desc').first('error_class', 'http_status');
}

export interface OwnerSessionRow {
  id: string;
  owner_id: string;
  token_hash: string;
  csrf_token: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

export async function insertOwnerSession(db: Db, row: Omit<OwnerSessionRow, 'revoked_at'>): Promise<void> {
  await db('owner_sessions').insert(row);
}

/** A live session of a live owner, by token hash. */
export async function findLiveOwnerSession(db: Db, tokenHash: string, now: Date): Promise<(OwnerSessionRow & { email: string }) | undefined> {
  return db('owner_sessions as s')
    .join('owners as o', 'o.id', 's.owner_id')
    .where('s.token_hash', tokenHash)
    .whereNull('s.revoked_at')
    .where('s.expires_at', '>', now)
    .whereNull('o.deleted_at')
    .first('s.*', 'o.email');
}

export async function revokeOwnerSession(db: Db, id: string, at: Date): Promise<void> {
  await db('owner_sessions').where({ id }).update({ revoked_at: at });
}
