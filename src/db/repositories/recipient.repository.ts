// Recipients, recurring payments, one-off payments, trusted destinations and the owner's withdrawal methods.
import type { Db } from '../knex.js';
import type { Keyset } from './operation.repository.js';

export interface RecipientRow {
  id: string;
  agent_id: string;
  kind: 'recurring' | 'one_off';
  name: string;
  address: string;
  chain: string;
  asset_symbol: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface RecurringPaymentRow {
  id: string;
  agent_id: string;
  recipient_id: string;
  asset_symbol: string;
  amount: string;
  interval: 'day' | 'week' | 'month';
  status: 'active' | 'paused' | 'cancelled';
  next_run_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface OneOffPaymentRow {
  id: string;
  operation_id: string;
  agent_id: string;
  wallet_id: string;
  hold_id: string;
  to_address: string;
  asset_symbol: string;
  amount: string;
  status: 'pending' | 'claimed' | 'cancelled' | 'expired' | 'failed';
  unlock_at: Date;
  expires_at: Date;
  resolved_at: Date | null;
  created_at: Date;
}

export interface TrustedDestinationRow {
  id: string;
  agent_id: string;
  kind: 'crypto';
  chain: string;
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

export interface WithdrawalMethodRow {
  id: string;
  owner_id: string;
  kind: 'bank';
  label: string;
  bank_name: string | null;
  account_last4: string;
  currency: string;
  status: 'active' | 'disabled';
  created_at: Date;
}

type Page = { before?: Keyset; limit: number };

function page<T extends object>(q: import('knex').Knex.QueryBuilder<T>, p: Page) {
  q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(p.limit);
  if (p.before) q.whereRaw('(created_at, id) < (?, ?)', [p.before.createdAt, p.before.id]);
  return q;
}

export async function insertRecipient(db: Db, row: RecipientRow): Promise<void> {
  await db('recipients').insert(row);
}

export async function findRecipient(db: Db, agentId: string, id: string): Promise<RecipientRow | undefined> {
  return db('recipients').where({ agent_id: agentId, id }).first();
}

export async function findRecipientsByAddress(db: Db, agentId: string, address: string): Promise<RecipientRow[]> {
  return db('recipients').where({ agent_id: agentId }).whereRaw('lower(address) = lower(?)', [address]).orderBy('created_at');
}

export async function findRecipientsByName(db: Db, agentId: string, name: string): Promise<RecipientRow[]> {
  return db('recipients').where({ agent_id: agentId }).whereRaw('lower(name) = lower(?)', [name]).orderBy('created_at');
}

export async function listRecipients(db: Db, agentId: string, p: Page): Promise<RecipientRow[]> {
  return page(db('recipients').where({ agent_id: agentId }), p);
}

export async function insertRecurringPayment(db: Db, row: Omit<RecurringPaymentRow, 'amount'> & { amount: bigint }): Promise<void> {
  await db('recurring_payments').insert({ ...row, amount: row.amount.toString() });
}

export async function findRecurringPayment(db: Db, agentId: string, id: string): Promise<RecurringPaymentRow | undefined> {
  return db('recurring_payments').where({ agent_id: agentId, id }).first();
}

export async function findActiveRecurringByRecipient(db: Db, agentId: string, recipientId: string): Promise<RecurringPaymentRow | undefined> {
  return db('recurring_payments').where({ agent_id: agentId, recipient_id: recipientId, status: 'active' }).orderBy('created_at').first();
}

export async function listRecurringPayments(db: Db, agentId: string, p: Page): Promise<RecurringPaymentRow[]> {
  return page(db('recurring_payments').where({ agent_id: agentId }), p);
}

export async function insertOneOffPayment(db: Db, row: Omit<OneOffPaymentRow, 'amount'> & { amount: bigint }): Promise<void> {
  await db('one_off_payments').insert({ ...row, amount: row.amount.toString() });
}

export async function findOneOffPayment(db: Db, id: string): Promise<OneOffPaymentRow | undefined> {
  return db('one_off_payments').where({ id }).first();
}

export async function findOneOffByOperation(db: Db, operationId: string): Promise<OneOffPaymentRow | undefined> {
  return db('one_off_payments').where({ operation_id: operationId }).first();
}

/** Locks one pending one-off payment (by its id or its operation id). */
export async function lockPendingOneOff(db: Db, idOrOperationId: string): Promise<OneOffPaymentRow | undefined> {
  return db('one_off_payments')
    .where((q) => q.where({ id: idOrOperationId }).orWhere({ operation_id: idOrOperationId }))
    .forUpdate()
    .first();
}

export async function resolveOneOff(db: Db, id: string, to: OneOffPaymentRow['status'], at: Date): Promise<boolean> {
  return (await db('one_off_payments').where({ id, status: 'pending' }).update({ status: to, resolved_at: at })) === 1;
}

export async function claimExpiredOneOffs(db: Db, now: Date, limit: number): Promise<OneOffPaymentRow[]> {
  return db('one_off_payments').where({ status: 'pending' }).where('expires_at', '<=', now).orderBy('expires_at').limit(limit).forUpdate().skipLocked();
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

export async function listTrustedDestinations(db: Db, agentId: string, p: Page): Promise<TrustedDestinationRow[]> {
  return page(db('trusted_destinations').where({ agent_id: agentId }), p);
}

export async function transitionTrustedDestination(db: Db, id: string, from: TrustedDestinationRow['status'], patch: Partial<TrustedDestinationRow> & { status: TrustedDestinationRow['status']; updated_at: Date }): Promise<TrustedDestinationRow | undefined> {
  const [row] = await db('trusted_destinations').where({ id, status: from }).update(patch).returning('*');
  return row;
}

export async function insertWithdrawalMethod(db: Db, row: WithdrawalMethodRow): Promise<void> {
  await db('withdrawal_methods').insert(row);
}

export async function findWithdrawalMethod(db: Db, ownerId: string, id: string): Promise<WithdrawalMethodRow | undefined> {
  return db('withdrawal_methods').where({ owner_id: ownerId, id }).first();
}

export async function listWithdrawalMethods(db: Db, ownerId: string, p: Page): Promise<WithdrawalMethodRow[]> {
  return page(db('withdrawal_methods').where({ owner_id: ownerId }), p);
}
