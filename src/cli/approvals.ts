// agentctl approval approve (issue 27, evm mode): the owner approves a pending payment, crypto withdrawal or one-off
// payment of an agent account with its own key (--owner-key-file): the ApproveSpend typed data is proposed, signed
// here, checked and relayed to the account (whose lane call above the approval threshold consumes it), and the
// operation approved. Always in-process and always signed by the owner's key: agentctl holds no passkey, and the
// development owner key never approves on the owner's behalf here. Other approvals stay the console's (passkey).
import { ApiError } from '../lib/errors.js';
import { CliUsageError, onDatabase, requirePositional, type CliCommand } from './types.js';

export const approvalCommands: CliCommand[] = [
  {
    name: 'approval approve',
    usage: "approval approve OPERATION_ID --owner-key-file FILE (evm mode, an agent account's transfer: the owner's key signs ApproveSpend here)",
    run: async (ctx, args) => {
      const id = requirePositional(args, 0, 'OPERATION_ID');
      const { findApproval, spendApprovalOf } = await onDatabase();
      const op = await findApproval(ctx.db, null, id);
      if (!op) throw new ApiError('not_found', 'approval not found');
      const custody = ctx.services.custody ?? undefined;
      const change = await spendApprovalOf(ctx.db, { custody, ledger: ctx.services.ledger.ledger }, op);
      if (!change || !custody) throw new CliUsageError("only an agent account's transfer (evm mode) is approved here; approve the others in the console with a passkey");
      if (op.approval_state !== 'pending') throw new ApiError('invalid_state_transition', `the approval is ${op.approval_state}, not pending`, { approval_state: op.approval_state });
      // Unsigned: the proposal (428), which --owner-key-file signs; never the development key.
      if (!ctx.ownerSignature) {
        const proposal = await custody.propose(ctx.db, op.agent_id, change);
        throw new ApiError('owner_signature_required', "approving needs the owner's signature: --owner-key-file FILE", proposal as unknown as Record<string, unknown>);
      }
      const { tx_hash } = await custody.apply(ctx.db, op.agent_id, change, ctx.ownerSignature);
      const operation = await ctx.services.ledger.approvals.approve(ctx.db, op.owner_id, op.id, `owner:${op.owner_id} approve_spend:${tx_hash}`);
      return { operation_id: op.id, approval_state: operation.approval?.state ?? null, tx_hash };
    },
  },
];
