// Event type vocabulary (spec 6.3, contract §11): what v1 emits, what an endpoint may subscribe to, what is reserved.

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
] as const;

export const SUBSCRIBABLE_EVENT_TYPES = [
  ...EMITTED_EVENT_TYPES,
  'trusted_destination.confirmed',
  'trusted_destination.cancelled',
  'trusted_destination.removed',
] as const;

export const RESERVED_EVENT_TYPES = [
  'payment.submitted',
  'payment.received',
  'one_off_payment.claimed',
  'one_off_payment.expired',
  'withdrawal.submitted',
  'deposit.received',
  'recurring_payment.updated',
  'recipient.changed',
  'agent.limit_approaching',
  'agent.limit_reached',
  'agent.disabled',
  'agent.expired',
  'agent.expiring_soon',
] as const;

const SUBSCRIBABLE: ReadonlySet<string> = new Set(SUBSCRIBABLE_EVENT_TYPES);
export const isSubscribableEventType = (type: string): boolean => SUBSCRIBABLE.has(type);
