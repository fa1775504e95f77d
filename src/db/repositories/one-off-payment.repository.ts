// One-off (claimable) payments: escrowed by a hold until claim, cancel or expiry.
import type { Db } from '../knex.js';

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

export async function insertOneOffPayment(db: Db, row: Omit<OneOffPaymentRow, 'amount'> & { amount: bigint }): Promise<void> {
  await db('one_off_payments').insert({ ...row, amount: row.amount.toString() });
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
