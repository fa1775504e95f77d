// Operations: insertion, guarded status transitions, settlement claims and open on-chain operations.
import { countOperationEntries, preparedRows, type Db } from '../knex.js';
import { newestFirst, type Keyset } from './keyset.js';

export type OperationStatus = 'accepted' | 'submitted' | 'executed' | 'execution_failed' | 'policy_rejected' | 'cancelled';

export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired';

/** The owner's approval an operation waits for (migration 0017); every column null when none was needed. */
export interface ApprovalColumns {
  approval_state: ApprovalState | null;
  /** Why it needs approval: the threshold exceeded and/or a first payment to the payee. */
  approval_reasons: { threshold_usd?: string; new_payee?: boolean } | null;
  approval_requested_at: Date | null;
  approval_expires_at: Date | null;
  approval_decided_at: Date | null;
  approval_decided_by: string | null;
}

export interface OperationRow extends ApprovalColumns {
  id: string;
  agent_id: string;
  wallet_id: string;
  type: string;
  status: OperationStatus;
  resource_type: string;
  resource_id: string;
  asset_symbol: string | null;
  amount: string | null;
  amount_usd_e8: string | null;
  fee_usd_e8: string;
  counts_toward_limits: boolean;
  human_message: string;
  idempotency_key_hash: string | null;
  error_code: string | null;
  error_message: string | null;
  to_address: string | null;
  tx_hash: string | null;
  details: Record<string, unknown>;
  settle_after: Date | null;
  created_at: Date;
  submitted_at: Date | null;
  executed_at: Date | null;
  failed_at: Date | null;
  updated_at: Date;
  /** What the live policy evaluation saw (issue 28; services/ledger/policy-rules.ts PolicyFacts); null before it was kept. */
  policy_facts?: object | null;
  /** The order in which the agent's writes took its policy lock (drawn by the insert). */
  policy_seq?: number | null;
}

export type NewOperationRow = Omit<OperationRow, 'amount' | 'amount_usd_e8' | 'fee_usd_e8' | 'details' | keyof ApprovalColumns> &
  Partial<ApprovalColumns> & {
    amount: bigint | null;
    amount_usd_e8: bigint | null;
    fee_usd_e8: bigint;
    details: Record<string, unknown>;
  };

export interface OperationFilter {
  agentId: string;
  types?: string[];
  status?: string;
  since?: Date;
  before?: Keyset;
  limit: number;
}

const operationInsert = (db: Db, row: NewOperationRow) =>
  db('operations')
    .insert({
      ...row,
      amount: row.amount?.toString() ?? null,
      amount_usd_e8: row.amount_usd_e8?.toString() ?? null,
      fee_usd_e8: row.fee_usd_e8.toString(),
      details: JSON.stringify(row.details),
      policy_facts: row.policy_facts == null ? null : JSON.stringify(row.policy_facts),
      ...(row.approval_reasons ? { approval_reasons: JSON.stringify(row.approval_reasons) } : {}),
    })
    .returning('*');

export async function insertOperation(db: Db, row: NewOperationRow): Promise<OperationRow> {
  const [inserted] = (await operationInsert(db, row)) as OperationRow[];
  countOperationEntries(db, [inserted!]);
  return inserted!;
}

export async function findOperation(db: Db, agentId: string, id: string): Promise<OperationRow | undefined> {
  return db('operations').where({ agent_id: agentId, id }).first();
}

export async function listOperations(db: Db, f: OperationFilter): Promise<OperationRow[]> {
  const q = newestFirst(db('operations').where({ agent_id: f.agentId }), f);
  if (f.types) q.whereIn('type', f.types);
  if (f.status) q.where('status', f.status);
  if (f.since) q.where('created_at', '>=', f.since);
  return preparedRows<OperationRow>(db, q);
}

/** Guarded transition: changes the row only if it is still in `from`; returns it when this caller won. */
export async function transitionOperation(
  db: Db,
  id: string,
  from: OperationStatus,
  patch: Partial<Omit<OperationRow, 'details'>> & { status: OperationStatus; updated_at: Date; details?: Record<string, unknown> },
): Promise<OperationRow | undefined> {
  const { details, ...rest } = patch;
  const update: Record<string, unknown> = { ...rest };
  if (details) update.details = db.raw('details || ?::jsonb', [JSON.stringify(details)]);
  const [row] = (await db('operations').where({ id, status: from }).update(update).returning('*')) as OperationRow[];
  if (row) countOperationEntries(db, [row]);
  return row;
}

/**
 * Claims up to `limit` operations in `status` whose settlement time has come, skipping rows another worker holds.
 * The caller must be inside a transaction: the row locks last until it commits.
 */
export async function claimDueOperations(
  db: Db,
  status: 'accepted' | 'submitted' | ('accepted' | 'submitted')[],
  types: string[],
  now: Date,
  limit: number,
  excludeIds: string[] = [],
): Promise<OperationRow[]> {
  if (types.length === 0) return [];
  const due = db('operations')
    .whereIn('status', Array.isArray(status) ? status : [status])
    .whereIn('type', types);
  if (excludeIds.length > 0) due.whereNotIn('id', excludeIds);
  return (
    due
      .where((q) => q.whereNull('settle_after').orWhere('settle_after', '<=', now))
      // An operation waiting for its owner's approval is not settled (issue 27): only approve sets it free.
      .whereRaw(`approval_state IS DISTINCT FROM 'pending'`)
      .orderBy('settle_after', 'asc')
      .limit(limit)
      .forUpdate()
      .skipLocked()
  );
}

/** Open (accepted or submitted) operations of `types` recorded against chain `chainId` (`details.chain_id`), oldest first. */
export async function listOpenOperationsOnChain(db: Db, types: string[], chainId: number, limit: number, walletId?: string): Promise<OperationRow[]> {
  const q = db('operations')
    .whereIn('type', types)
    .whereIn('status', ['accepted', 'submitted'])
    .whereRaw(`details->>'chain_id' = ?`, [String(chainId)])
    .orderBy('created_at', 'asc')
    .limit(limit);
  if (walletId) q.where({ wallet_id: walletId });
  return q;
}

/** Claims the operations among `ids` still in `status`, skipping rows another worker holds (inside a transaction). */
export async function claimOperationsByIds(db: Db, ids: string[], status: 'accepted' | 'submitted'): Promise<OperationRow[]> {
  if (ids.length === 0) return [];
  return db('operations').whereIn('id', ids).where({ status }).whereRaw(`approval_state IS DISTINCT FROM 'pending'`).orderBy('settle_after', 'asc').forUpdate().skipLocked();
}

/** The wallet's open (accepted or submitted) operations of `types`: what is in flight but not yet settled. */
export async function listOpenOperations(db: Db, walletId: string, types: string[]): Promise<OperationRow[]> {
  return db('operations').where({ wallet_id: walletId }).whereIn('type', types).whereIn('status', ['accepted', 'submitted']);
}
