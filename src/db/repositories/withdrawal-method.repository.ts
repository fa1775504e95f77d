// The owner's bank withdrawal methods.
import type { Db } from '../knex.js';
import { newestFirst, type Page } from './keyset.js';

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

export async function insertWithdrawalMethod(db: Db, row: WithdrawalMethodRow): Promise<void> {
  await db('withdrawal_methods').insert(row);
}

export async function findWithdrawalMethod(db: Db, ownerId: string, id: string): Promise<WithdrawalMethodRow | undefined> {
  return db('withdrawal_methods').where({ owner_id: ownerId, id }).first();
}

export async function listWithdrawalMethods(db: Db, ownerId: string, p: Page): Promise<WithdrawalMethodRow[]> {
  return newestFirst(db('withdrawal_methods').where({ owner_id: ownerId }), p);
}
