// Owner approvals (issue 27): the operations that wait for one, their guarded decisions and the expiry claim. The
// approval lives on the operation row (migration 0017); every decision is a guarded update from `pending`.
import { countOperationEntries, type Db } from '../knex.js';
import type { Keyset } from './keyset.js';
import type { ApprovalState, OperationRow } from './operation.repository.js';

/** Whether the agent has paid `address` before (a payment or one-off payment that was not refused or cancelled). */
export async function hasPaidBefore(db: Db, agentId: string, address: string): Promise<boolean> {
  const row = await paidOperations(db, agentId).whereRaw('lower(to_address) = lower(?)', [address]).first('id');
  return row !== undefined;
}

/** Every address the agent has paid before, in the sense of `hasPaidBefore`, lower-case and sorted (an agent account's `paidBefore`). */
export async function listPaidAddresses(db: Db, agentId: string): Promise<string[]> {
  const rows: { address: string }[] = await paidOperations(db, agentId).whereNotNull('to_address').distinct(db.raw('lower(to_address) as address')).orderBy('address');
  return rows.map((r) => r.address);
}

const paidOperations = (db: Db, agentId: string) =>
  db('operations')
    .where({ agent_id: agentId })
    .whereIn('type', ['payment', 'one_off_payment.create'])
    .whereIn('status', ['accepted', 'submitted', 'executed'])
    .whereRaw(`approval_state IS DISTINCT FROM 'pending'`);

/** The operation `id` of an agent of `ownerId` (any owner when null) that needed approval, with its agent's name. */
export async function findApproval(db: Db, ownerId: string | null, id: string): Promise<(OperationRow & { agent_name: string; owner_id: string }) | undefined> {
  const q = db('operations as o').join('agents as a', 'a.id', 'o.agent_id').where('o.id', id).whereNotNull('o.approval_state').whereNull('a.deleted_at');
  if (ownerId) q.where('a.owner_id', ownerId);
  return q.first('o.*', 'a.name as agent_name', 'a.owner_id');
}

/** The owner's approvals newest first (by request time, then id), optionally in one state. */
export async function listApprovals(db: Db, ownerId: string | null, f: { state?: ApprovalState; before?: Keyset; limit: number }): Promise<(OperationRow & { agent_name: string })[]> {
  const q = db('operations as o')
    .join('agents as a', 'a.id', 'o.agent_id')
    .whereNotNull('o.approval_state')
    .whereNull('a.deleted_at')
    .orderBy([
      { column: 'o.approval_requested_at', order: 'desc' },
      { column: 'o.id', order: 'desc' },
    ])
    .limit(f.limit);
  if (ownerId) q.where('a.owner_id', ownerId);
  if (f.state) q.where('o.approval_state', f.state);
  if (f.before) q.whereRaw('(o.approval_requested_at, o.id) < (?, ?)', [f.before.createdAt, f.before.id]);
  return q.select('o.*', 'a.name as agent_name');
}

/** pending -> approved while not expired: the operation becomes due for settlement now. */
export async function markApproved(db: Db, id: string, now: Date, decidedBy: string): Promise<OperationRow | undefined> {
  const [row] = await db('operations')
    .where({ id, status: 'accepted', approval_state: 'pending' })
    .where('approval_expires_at', '>', now)
    .update({ approval_state: 'approved', approval_decided_at: now, approval_decided_by: decidedBy, settle_after: now, updated_at: now })
    .returning('*');
  return row as OperationRow | undefined;
}

/** pending -> rejected | expired: the operation ends `cancelled` (the caller releases its holds in the same transaction). */
export async function markCancelled(db: Db, id: string, state: 'rejected' | 'expired', now: Date, decidedBy: string, error: { code: string; message: string }): Promise<OperationRow | undefined> {
  const [row] = await db('operations')
    .where({ id, status: 'accepted', approval_state: 'pending' })
    .update({
      status: 'cancelled',
      approval_state: state,
      approval_decided_at: now,
      approval_decided_by: decidedBy,
      updated_at: now,
      error_code: error.code,
      error_message: error.message,
      settle_after: null,
    })
    .returning('*');
  if (row) countOperationEntries(db, [row as OperationRow]);
  return row as OperationRow | undefined;
}

/** Pending approvals past their deadline, locked for this transaction (another worker skips them). */
export async function claimExpiredApprovals(db: Db, now: Date, limit: number): Promise<OperationRow[]> {
  return db('operations').where({ approval_state: 'pending', status: 'accepted' }).where('approval_expires_at', '<=', now).orderBy('approval_expires_at').limit(limit).forUpdate().skipLocked();
}

/** Pending approvals whose owner was not told yet and whose retry is due, locked for this transaction, with the owner's address. */
export async function claimUnnotifiedApprovals(db: Db, now: Date, limit: number): Promise<(OperationRow & { agent_name: string; owner_email: string; approval_notice_attempts: number })[]> {
  return db('operations as o')
    .join('agents as a', 'a.id', 'o.agent_id')
    .join('owners as w', 'w.id', 'a.owner_id')
    .where('o.approval_state', 'pending')
    .whereNull('o.approval_notified_at')
    .where((q) => q.whereNull('o.approval_notice_after').orWhere('o.approval_notice_after', '<=', now))
    .orderBy('o.approval_requested_at')
    .limit(limit)
    .forUpdate('o')
    .skipLocked()
    .select('o.*', 'a.name as agent_name', 'w.email as owner_email');
}

export async function markNotified(db: Db, id: string, at: Date): Promise<void> {
  await db('operations').where({ id }).update({ approval_notified_at: at });
}

/** A notice the mail server refused: counted, and not claimed again before `after`. */
export async function deferNotice(db: Db, id: string, attempts: number, after: Date): Promise<void> {
  await db('operations').where({ id }).update({ approval_notice_attempts: attempts, approval_notice_after: after });
}

/** The approval state of an operation (null when it needed none). */
export async function approvalStateOf(db: Db, operationId: string): Promise<ApprovalState | null> {
  const row = await db('operations').where({ id: operationId }).first('approval_state');
  return (row?.approval_state as ApprovalState | null | undefined) ?? null;
}

/** Pending approvals per agent among `agentIds` (agents without one absent). */
export async function countPendingApprovals(db: Db, agentIds: string[]): Promise<Map<string, number>> {
  if (agentIds.length === 0) return new Map();
  const found = (await db('operations').whereIn('agent_id', agentIds).where('approval_state', 'pending').groupBy('agent_id').select('agent_id', db.raw('count(*)::int AS n'))) as {
    agent_id: string;
    n: number;
  }[];
  return new Map(found.map((r) => [r.agent_id, Number(r.n)]));
}
