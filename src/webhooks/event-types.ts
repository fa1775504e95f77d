// Event types (spec 6.3, contract §11): what may be subscribed to is the document's vocabulary
// (generated/vocabulary.ts); what v1 actually emits is a fact of this code, listed here.
import { SUBSCRIBABLE_EVENT_TYPES } from '../../generated/vocabulary.js';
import type { Schema } from '../lib/contract.js';

export type SubscribableEventType = Schema<'SubscribableEventType'>;

export const EMITTED_EVENT_TYPES = [
  'payment.executed',
  'payment.execution_failed',
  'one_off_payment.created',
  'conversion.executed',
  'conversion.execution_failed',
  'earn.deposit.executed',
  'earn.withdraw.executed',
  'earn.move.executed',
  'rewards.claimed',
  'debt.borrowed',
  'debt.repaid',
  'debt.deleveraged',
  'collateral.added',
  'collateral.removed',
  'withdrawal.settled',
  'withdrawal.execution_failed',
  'agent.webhook_disabled',
  'operation.policy_rejected',
  'webhook.test',
  // v1.1 (issue 27): owner approvals.
  'operation.approval_requested',
  'operation.approval_decided',
] as const satisfies readonly SubscribableEventType[];

const SUBSCRIBABLE: ReadonlySet<string> = new Set(SUBSCRIBABLE_EVENT_TYPES);
export const isSubscribableEventType = (type: string): type is SubscribableEventType => SUBSCRIBABLE.has(type);
