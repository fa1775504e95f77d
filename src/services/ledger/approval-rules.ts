// Issue 27: which operations wait for the owner's approval under a policy (the policy keys approval_threshold_usd,
// approve_new_payees and approval_ttl_seconds). Pure: the caller checks whether a payee is new.

/** The policy keys of approvals (part of the Policy, policy.ts). */
export interface ApprovalPolicyKeys {
  /** A payment, one-off payment or withdrawal above this USD value (8 decimals) waits for the owner's approval. */
  approval_threshold_usd?: bigint;
  /** The first payment (or one-off payment) to a payee waits for the owner's approval. */
  approve_new_payees?: boolean;
  /** How long an approval may wait before the operation is cancelled (default 86,400). */
  approval_ttl_seconds?: number;
}

/** The operation types an approval can hold (issue 27), and those a first payee makes wait. */
export const APPROVAL_TYPES: readonly string[] = ['payment', 'one_off_payment.create', 'withdrawal.bank', 'withdrawal.crypto'];
export const NEW_PAYEE_TYPES: readonly string[] = ['payment', 'one_off_payment.create'];
export const DEFAULT_APPROVAL_TTL_SECONDS = 86_400;

/** What an allowed operation still needs from its owner: the threshold it exceeds, whether a new payee would. */
export interface ApprovalNeed {
  thresholdUsd: bigint | null;
  /** The policy asks for approval of a first payment to a payee: the caller checks whether the payee is new. */
  checkNewPayee: boolean;
  ttlSeconds: number;
}

/** Issue 27: what the owner must approve of an operation the policy allows (undefined: nothing). */
export function approvalNeed(p: ApprovalPolicyKeys, req: { type: string; usdE8?: bigint | null }): ApprovalNeed | undefined {
  if (!APPROVAL_TYPES.includes(req.type)) return undefined;
  const over = p.approval_threshold_usd !== undefined && req.usdE8 != null && req.usdE8 > p.approval_threshold_usd;
  const checkNewPayee = p.approve_new_payees === true && NEW_PAYEE_TYPES.includes(req.type);
  if (!over && !checkNewPayee) return undefined;
  return { thresholdUsd: over ? p.approval_threshold_usd! : null, checkNewPayee, ttlSeconds: p.approval_ttl_seconds ?? DEFAULT_APPROVAL_TTL_SECONDS };
}
