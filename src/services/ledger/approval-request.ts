// Issue 27: the approval columns of an operation the policy allows but its owner must approve, and the reasons
// and view of an approval as the document shows them (Operation.approval).
import type { Db } from '../../db/knex.js';
import { hasPaidBefore } from '../../db/repositories/approval.repository.js';
import type { ApprovalColumns, OperationRow } from '../../db/repositories/operation.repository.js';
import type { Schema } from '../../lib/contract.js';
import { formatAmount } from '../../lib/money.js';
import type { ApprovalNeed } from './approval-rules.js';
import { USD_DECIMALS } from './ledger.js';

/** The pending approval's columns, or none when the only reason was a new payee and the payee is not new. */
export async function approvalColumns(db: Db, need: ApprovalNeed, op: { agentId: string; toAddress: string | null; now: Date }): Promise<Partial<ApprovalColumns>> {
  const newPayee = need.checkNewPayee && op.toAddress !== null && !(await hasPaidBefore(db, op.agentId, op.toAddress));
  if (need.thresholdUsd === null && !newPayee) return {};
  const reasons: NonNullable<ApprovalColumns['approval_reasons']> = {};
  if (need.thresholdUsd !== null) reasons.threshold_usd = formatAmount(need.thresholdUsd, USD_DECIMALS);
  if (newPayee) reasons.new_payee = true;
  return { approval_state: 'pending', approval_reasons: reasons, approval_requested_at: op.now, approval_expires_at: new Date(op.now.getTime() + need.ttlSeconds * 1000) };
}

/** Operation.approval: present when the operation needed its owner's approval. */
export function approvalView(op: OperationRow): Schema<'OperationApproval'> | undefined {
  if (!op.approval_state || !op.approval_requested_at || !op.approval_expires_at) return undefined;
  const r = op.approval_reasons ?? {};
  const reasons: Schema<'OperationApproval'>['reasons'] = [];
  if (r.threshold_usd) reasons.push('above_threshold');
  if (r.new_payee) reasons.push('new_payee');
  return {
    state: op.approval_state,
    reasons,
    threshold_usd: r.threshold_usd ?? null,
    requested_at: op.approval_requested_at.toISOString(),
    expires_at: op.approval_expires_at.toISOString(),
    decided_at: op.approval_decided_at?.toISOString() ?? null,
  };
}
