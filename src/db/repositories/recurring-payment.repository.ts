// Recurring payments to recipients.
import type { Db } from '../knex.js';
import { newestFirst, type Page } from './keyset.js';

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
  return newestFirst(db('recurring_payments').where({ agent_id: agentId }), p);
}

/** A recurring payment with its recipient's name and address (null when the recipient is gone). */
export type RecurringPaymentWithRecipient = RecurringPaymentRow & { recipient_name: string | null; recipient_address: string | null };

/** The recipient joined in the payment's own statement (one round trip for a page instead of one per row). */
function withRecipient(db: Db) {
  return db('recurring_payments as p')
    .leftJoin('recipients as r', (j) => j.on('r.id', 'p.recipient_id').andOn('r.agent_id', 'p.agent_id'))
    .select('p.*', 'r.name as recipient_name', 'r.address as recipient_address');
}

export async function findRecurringPaymentWithRecipient(db: Db, agentId: string, id: string): Promise<RecurringPaymentWithRecipient | undefined> {
  return withRecipient(db).where({ 'p.agent_id': agentId, 'p.id': id }).first();
}

export async function listRecurringPaymentsWithRecipient(db: Db, agentId: string, p: Page): Promise<RecurringPaymentWithRecipient[]> {
  const q = withRecipient(db).where({ 'p.agent_id': agentId });
  q.orderBy([
    { column: 'p.created_at', order: 'desc' },
    { column: 'p.id', order: 'desc' },
  ]).limit(p.limit);
  if (p.before) q.whereRaw('(p.created_at, p.id) < (?, ?)', [p.before.createdAt, p.before.id]);
  return q;
}
