// What an operation's creation takes (CreateOperationInput) and what each type announces: the event types of its
// terminal transitions (spec 6.3, contract §8) and the resource family it belongs to.
import type { EVENT_TYPES, OPERATION_TYPES } from '../../../generated/vocabulary.js';
import type { Knex } from '../../db/knex.js';
import type { LockedPolicy, PolicyRequest } from './policy.js';
import type { OwnerRef } from './settling.js';

/** Event types per operation type (spec 6.3, contract §8). Families without a failure event emit none on failure. */
type OperationType = (typeof OPERATION_TYPES)[number];
type EventType = (typeof EVENT_TYPES)[number];

const OPERATION_EVENTS: Record<OperationType, { executed?: EventType; failed?: EventType }> = {
  payment: { executed: 'payment.executed', failed: 'payment.execution_failed' },
  'withdrawal.bank': { executed: 'withdrawal.settled', failed: 'withdrawal.execution_failed' },
  'withdrawal.crypto': { executed: 'withdrawal.settled', failed: 'withdrawal.execution_failed' },
  conversion: { executed: 'conversion.executed', failed: 'conversion.execution_failed' },
  'earn.deposit': { executed: 'earn.deposit.executed' },
  'earn.withdraw': { executed: 'earn.withdraw.executed' },
  'earn.move': { executed: 'earn.move.executed' },
  'earn.rewards_claim': { executed: 'rewards.claimed' },
  'debt.borrow': { executed: 'debt.borrowed' },
  'debt.repay': { executed: 'debt.repaid' },
  'debt.deleverage': { executed: 'debt.deleveraged' },
  'collateral.add': { executed: 'collateral.added' },
  'collateral.remove': { executed: 'collateral.removed' },
  'trusted_destination.confirm': { executed: 'trusted_destination.confirmed' },
  'trusted_destination.cancel': { executed: 'trusted_destination.cancelled' },
  'trusted_destination.remove': { executed: 'trusted_destination.removed' },
  // one_off_payment.created is written at acceptance (acceptedEvent); x402 operations announce nothing of their own (their terminal activity row is the record).
  'one_off_payment.create': {},
  'x402.sign': {},
  'x402.purchase': {},
};

/** The events of an operation type; none for a type outside the document (test-only settlers). */
export const eventsOf = (type: string): { executed?: EventType; failed?: EventType } => OPERATION_EVENTS[type as OperationType] ?? {};

export interface CreateOperationInput {
  principal: OwnerRef;
  type: string;
  /** Defaults to `{ type: <family>, id: <operation id> }`. */
  resource?: { type: string; id: string };
  /** Pre-chosen operation id (so a resource row can reference it). */
  id?: string;
  asset?: string | null;
  amount?: bigint | null;
  /** USD value (8 decimals); computed from the price feed when an amount is given and this is not. */
  amountUsdE8?: bigint | null;
  /** Counts toward policy caps; default: when a USD value is known. */
  countsTowardLimits?: boolean;
  /** Extra policy facts (recipient, protocol, slippage, LTV). */
  policy?: Omit<PolicyRequest, 'type' | 'asset' | 'usdE8'>;
  /** Holds placed at acceptance; default: the amount in the asset when the operation settles later. */
  holds?: { asset: string; amount: bigint }[];
  toAddress?: string | null;
  details?: Record<string, unknown>;
  humanMessage: string;
  idempotencyKey?: string | null;
  /**
   * `worker` (default): the settlement loop runs the type's settler after SETTLEMENT_DELAY_MS;
   * `immediate`: executed in this transaction (no hold), or execution_failed when `toAddress` is a
   * failing address of the simulated chain (check `operation.status` before applying effects);
   * `manual`: stays accepted until `finish` is called.
   */
  settlement?: 'worker' | 'immediate' | 'manual';
  /** An event written at acceptance (one_off_payment.created). */
  acceptedEvent?: string;
  /** Merged into the data of the events this creation writes (beside `operation`). */
  eventData?: Record<string, unknown>;
  /** The owner acting out of band (agentctl): no agent policy applies. */
  skipPolicy?: boolean;
  /** The agent's policy row as the caller already locked it in this transaction (PolicyService.lock). */
  lockedPolicy?: LockedPolicy;
  /**
   * Tops the wallet up when its one hold is short (a payment drawing on Earn, issue 26): `details` joins the
   * operation's; `hold`, when given, is what the wallet itself holds (the rest is redeemed on chain at settlement,
   * in the same transaction as the transfer); null: insufficient_funds.
   */
  topUp?: (trx: Knex.Transaction) => Promise<{ details: Record<string, unknown>; hold?: bigint } | null>;
}

/** The resource type of an operation type (`withdrawal.bank` is a withdrawal). */
export function family(type: string): string {
  if (type.startsWith('withdrawal.')) return 'withdrawal';
  if (type === 'one_off_payment.create') return 'one_off_payment';
  if (type.startsWith('trusted_destination.')) return 'trusted_destination';
  return type.replace(/\./g, '_');
}
