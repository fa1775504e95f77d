// The shapes shared by the state machine (operations.ts), its scheduler (settlement.ts) and the
// activity log (activity.ts): who acts, and what a settler answers.
import type { Knex } from '../../db/knex.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';

export interface OwnerRef {
  agentId: string;
  walletId: string;
}

export type SettleOutcome = { ok: true; details?: Record<string, unknown> } | { ok: false; code: string; message: string };

/** A settler moves the money of one submitted operation; returning `ok: false` rolls its writes back and releases the holds. */
export type Settler = (trx: Knex.Transaction, op: OperationRow) => Promise<SettleOutcome>;
/** The ledger side of an operation confirmed on chain (`details`: what the adapter read from the receipt); null: the default capture (settlement.ts captureOnChain). */
export type ChainSettler = (trx: Knex.Transaction, op: OperationRow, details: Record<string, unknown>) => Promise<SettleOutcome | null>;
