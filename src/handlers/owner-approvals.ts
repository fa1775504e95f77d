// Tag owner, approvals and passkeys (issue 27): the owner's inbox, approve (a fresh passkey assertion, or in evm mode
// the owner's signed ApproveSpend the account requires), reject, and passkey enrolment. The owner's alone: the
// operator's admin token can list approvals but neither decide nor enrol.
import type { Handler, RequestContext } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import { ownerSignatureOf } from '../services/custody/accounts.js';
import { spendApprovalOf } from '../services/custody/spend-approval.js';
import { actorOf, created, ok, record } from './owner-common.js';

/** Approvals and passkeys are the owner's alone (issue 27): the operator's admin token cannot decide nor enrol. */
function ownerOnly(ctx: RequestContext): string {
  const actor = actorOf(ctx);
  if (actor.kind !== 'owner' || !actor.ownerId) throw new ApiError('owner_only_action', 'only the owner decides approvals and holds passkeys: sign in as the owner (the admin token cannot)');
  return actor.ownerId;
}

export const ownerListApprovals: Handler<'ownerListApprovals'> = async (req, ctx) => {
  const actor = actorOf(ctx);
  return ok(await ctx.services.ledger.approvals.list(ctx.db, actor.kind === 'owner' ? actor.ownerId : null, req.query));
};

export const ownerApproveOperation: Handler<'ownerApproveOperation'> = async (req, ctx) => {
  const ownerId = ownerOnly(ctx);
  const pending = await ctx.services.ledger.approvals.find(ctx.db, ownerId, req.params.operation_id);
  if (pending.approval_state !== 'pending')
    throw new ApiError('invalid_state_transition', `the approval is ${pending.approval_state}, not pending`, { approval_state: pending.approval_state, status: pending.status });
  // evm mode, an account's transfer (issue 27): the owner's signed ApproveSpend, relayed, is the approval the account
  // requires above its threshold. Without a signature: 428 with the typed data, unless the development key signs
  // (then the passkey step-up stays the proof of the owner).
  const { custody } = ctx.services;
  const change = await spendApprovalOf(ctx.db, { custody: custody ?? undefined, ledger: ctx.services.ledger.ledger }, pending);
  const signature = ownerSignatureOf(req.body);
  const passkey = async () => {
    const assertion = req.body.assertion;
    if (!assertion) throw new ApiError('validation_failed', 'approving needs a fresh passkey assertion (`assertion`)', { errors: [{ location: 'body', path: '/assertion', message: 'is required' }] });
    // The step-up: a passkey assertion over a challenge issued for this approval within the last 5 minutes.
    return (await ctx.services.passkeys.verifyAssertion(ctx.db, assertion, { purpose: 'approve', ownerId, operationId: pending.id })).passkeyId;
  };
  let passkeyId: string | null = null;
  let txHash: string | null = null;
  if (change && custody) {
    if (!signature && !(await custody.canSignLocally(ctx.db, pending.agent_id))) await custody.apply(ctx.db, pending.agent_id, change); // answers 428 with the proposal
    if (!signature || req.body.assertion) passkeyId = await passkey();
    txHash = (await custody.apply(ctx.db, pending.agent_id, change, signature)).tx_hash;
  } else passkeyId = await passkey();
  const by = `owner:${ownerId} ${txHash ? `approve_spend:${txHash}` : `passkey:${passkeyId}`}`;
  const operation = await ctx.services.ledger.approvals.approve(ctx.db, ownerId, pending.id, by);
  await record(req, ctx, ownerId, { type: 'operation', id: pending.id }, { agent_id: pending.agent_id, passkey_id: passkeyId, ...(txHash ? { tx_hash: txHash } : {}) });
  return ok({ operation });
};

export const ownerRejectOperation: Handler<'ownerRejectOperation'> = async (req, ctx) => {
  const ownerId = ownerOnly(ctx);
  const pending = await ctx.services.ledger.approvals.find(ctx.db, ownerId, req.params.operation_id);
  const operation = await ctx.services.ledger.approvals.reject(ctx.db, ownerId, pending.id);
  await record(req, ctx, ownerId, { type: 'operation', id: pending.id }, { agent_id: pending.agent_id });
  return ok({ operation });
};

export const ownerListPasskeys: Handler<'ownerListPasskeys'> = async (_req, ctx) => ok({ items: await ctx.services.passkeys.list(ctx.db, ownerOnly(ctx)) });

export const ownerPasskeyRegistrationOptions: Handler<'ownerPasskeyRegistrationOptions'> = async (_req, ctx) => ok(await ctx.services.passkeys.registrationOptions(ctx.db, ownerOnly(ctx)));

export const ownerRegisterPasskey: Handler<'ownerRegisterPasskey'> = async (req, ctx) => {
  const ownerId = ownerOnly(ctx);
  const passkey = await ctx.services.passkeys.register(ctx.db, ownerId, req.body.name ?? 'Passkey', req.body.response);
  await record(req, ctx, ownerId, { type: 'passkey', id: passkey.id }, { name: passkey.name });
  return created({ passkey });
};

export const ownerPasskeyAssertionOptions: Handler<'ownerPasskeyAssertionOptions'> = async (req, ctx) => {
  const ownerId = ownerOnly(ctx);
  const b = req.body;
  const missing = (path: string) => new ApiError('validation_failed', `purpose ${b.purpose} needs ${path}`, { errors: [{ location: 'body', path: `/${path}`, message: 'is required' }] });
  if (b.purpose === 'step_up') {
    // A step-up for one action on one of the owner's agents (the details of a 428 step_up_required).
    if (!b.action) throw missing('action');
    if (!b.agent_id) throw missing('agent_id');
    const agent = await ctx.services.owner.requireAgent(ctx.db, actorOf(ctx), b.agent_id);
    return ok(await ctx.services.passkeys.assertionOptions(ctx.db, { purpose: 'step_up', ownerId, action: b.action, agentId: agent.id }));
  }
  if (!b.operation_id) throw missing('operation_id');
  const pending = await ctx.services.ledger.approvals.find(ctx.db, ownerId, b.operation_id);
  return ok(await ctx.services.passkeys.assertionOptions(ctx.db, { purpose: 'approve', ownerId, operationId: pending.id }));
};
