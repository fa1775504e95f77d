// The shapes shared by the state machine (operations.ts), its scheduler (settlement.ts) and the
// activity log (activity.ts): who acts, and what a settler answers.
import type { Knex } from '../../db/knex.js';
import type { AssetRow, HoldRow } from '../../db/repositories/ledger.repository.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import type { ActivityInput } from './activity.js';
import type { Account, PriceBook } from './ledger.js';

export interface OwnerRef {
  agentId: string;
  walletId: string;
}

export type SettleOutcome = { ok: true; details?: Record<string, unknown> } | { ok: false; code: string; message: string };

/** A settler moves the money of one submitted operation; returning `ok: false` rolls its writes back and releases the holds. */
export type Settler = (trx: Knex.Transaction, op: OperationRow) => Promise<SettleOutcome>;
/** The ledger side of an operation confirmed on chain (`details`: what the adapter read from the receipt). */
export type ChainSettler = (trx: Knex.Transaction, op: OperationRow, details: Record<string, unknown>) => Promise<SettleOutcome>;


/** What a batch settler knows of one operation: read for the whole batch in one statement (settlement-batch.ts). */
export interface BatchFacts {
  /** The operation's holds still held, oldest first. */
  holds: HoldRow[];
  /** The agent wallet at the operation's `to_address`, when there is one. */
  payee: { id: string; agent_id: string } | undefined;
  /** The simulated chain refuses transfers to `to_address` (agentctl chain fail-address). */
  failing: boolean;
  assets: ReadonlyMap<string, AssetRow>;
  prices: PriceBook;
}

/**
 * How a batch settles one operation, decided without I/O: executed, every held hold captured to `capture.to`
 * (none when `capture` is null: the holds stay, as a one-off payment's escrow does), with `activity` rows beside the
 * terminal one; or failed, every held hold released.
 */
export type BatchPlan =
  | { ok: true; details?: Record<string, unknown>; capture: { to: Account; entryType: string } | null; activity?: ActivityInput[] }
  | { ok: false; code: string; message: string };

/** The batch form of a type's settler; null leaves this operation to the one-at-a-time path (its Settler). */
export type BatchSettler = (op: OperationRow, facts: BatchFacts) => BatchPlan | null;
