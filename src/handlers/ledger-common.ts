// Helpers shared by the ledger area's handler files (not a tag: exports no handler).
import type { OperationRequest, RequestContext } from '../http/types.js';

export const who = (ctx: RequestContext) => ({ agentId: ctx.principal.agentId, walletId: ctx.principal.walletId, ownerId: ctx.principal.ownerId });

export const ok = <P extends object>(payload: P) => ({ status: 200 as const, body: { ok: true as const, ...payload } });

type OperationPageId = 'listPayments' | 'listOneOffPayments' | 'listWithdrawals';
type OperationDetailId = 'getPayment' | 'getOneOffPayment' | 'getWithdrawal';

/** A page of the agent's operations of `types` (the list routes of the payments and withdrawals tags). */
export const listOperationsOf = (types: string[]) => async (req: OperationRequest<OperationPageId>, ctx: RequestContext) =>
  ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...req.query, types }));

/** One operation of `types` by id (`include=onchain`). */
export const getOperationOf = (types: string[]) => async (req: OperationRequest<OperationDetailId>, ctx: RequestContext) => {
  const { include } = req.query;
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, req.params.id, { types, include: include ? [include] : [] }) });
};
