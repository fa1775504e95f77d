// Request helpers shared by the ledger area's handler files (not a tag: exports no handler).
import type { LooseRequest, OperationRequest, RequestContext } from '../http/types.js';
import { ApiError } from '../lib/errors.js';

/** Transitional, for the owner handlers (src/handlers/owner.ts) that are not yet typed by operationId. */
export const param = (c: LooseRequest, name: string): string => String(c.params[name] ?? '');

/** Transitional, as `param`. */
export function query(c: LooseRequest, name: string): string | undefined {
  const value = c.query[name];
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) throw new ApiError('validation_failed', `${name} may be given once`, { field: name });
  return String(value);
}

/** Transitional, as `param`. */
export const pageQuery = (c: LooseRequest) => ({ cursor: query(c, 'cursor'), limit: query(c, 'limit') });

/** Transitional, as `param`. */
export const body = <T = Record<string, unknown>>(c: LooseRequest): T => (c.body && typeof c.body === 'object' ? c.body : {}) as T;

export const who = (ctx: RequestContext) => ({ agentId: ctx.principal.agentId, walletId: ctx.principal.walletId, ownerId: ctx.principal.ownerId });

export const ok = <P extends object>(payload: P) => ({ status: 200 as const, body: { ok: true as const, ...payload } });

type OperationPageId = 'listPayments' | 'listOneOffPayments' | 'listWithdrawals';
type OperationDetailId = 'getPayment' | 'getOneOffPayment' | 'getWithdrawal';

/** A page of the agent's operations of `types` (the list routes of the payments and withdrawals tags). */
export const listOperationsOf = (types: string[]) => async (req: OperationRequest<OperationPageId>, ctx: RequestContext) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...req.query, types }));

/** One operation of `types` by id (`include=onchain`). */
export const getOperationOf = (types: string[]) => async (req: OperationRequest<OperationDetailId>, ctx: RequestContext) => {
  const { include } = req.query;
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, req.params.id, { types, include: include ? [include] : [] }) });
};
