// The activity log: one row per financial event of a wallet (operations, receipts, deposits).
import type { Schema } from '../../lib/contract.js';
import { preparedRows, type Db } from '../knex.js';
import { newestFirst, type Page } from './keyset.js';

export interface ActivityRow {
  id: string;
  agent_id: string;
  wallet_id: string;
  type: Schema<'ActivityType'>;
  status: string;
  operation_id: string | null;
  direction: 'in' | 'out' | 'none';
  asset_symbol: string | null;
  amount: string | null;
  amount_usd_e8: string | null;
  counterparty: string | null;
  description: string;
  /** The on-chain transaction behind the entry (deposits seen on chain); absent elsewhere. */
  tx_hash?: string | null;
  created_at: Date;
}

export async function insertActivity(db: Db, row: Omit<ActivityRow, 'amount' | 'amount_usd_e8'> & { amount: bigint | null; amount_usd_e8: bigint | null }): Promise<void> {
  await db('activity').insert({ ...row, amount: row.amount?.toString() ?? null, amount_usd_e8: row.amount_usd_e8?.toString() ?? null });
}

export async function listActivity(db: Db, f: Page & { agentId: string; type?: string; since?: Date }): Promise<ActivityRow[]> {
  const q = newestFirst(db('activity').where({ agent_id: f.agentId }), f);
  if (f.type) q.where('type', f.type);
  if (f.since) q.where('created_at', '>=', f.since);
  return preparedRows<ActivityRow>(db, q);
}
