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
