// Tag borrow: the Aave-style account summary and collateral; borrow, repay, deleverage, collateral add/remove.
import type { LooseRequest } from '../http/types.js';
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { AddCollateralBody, BorrowBody, DeleverageBody, RemoveCollateralBody, RepayBody } from '../services/defi/borrow/borrow.service.js';

const body = <T>(c: LooseRequest): T => (c.body && typeof c.body === 'object' ? c.body : {}) as T;
const query = (c: LooseRequest, name: string): string | undefined => {
  const v = c.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};

export const getBorrowSummary: LooseHandler = async (_c, ctx) => ({ status: 200, body: { ok: true, borrow: await ctx.services.defi.borrow.summary(ctx.db, ctx.principal) } });

export const listCollateral: LooseHandler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.listCollateral(ctx.db, ctx.principal, { cursor: query(c, 'cursor'), limit: query(c, 'limit') }) });

export const createBorrow: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.borrow.borrow(ctx.db, ctx.principal, body<BorrowBody>(c), ctx.idempotencyKey));

export const createRepayment: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.borrow.repay(ctx.db, ctx.principal, body<RepayBody>(c), ctx.idempotencyKey));

export const createDeleverage: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.borrow.deleverage(ctx.db, ctx.principal, body<DeleverageBody>(c), ctx.idempotencyKey));

export const addCollateral: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.borrow.addCollateral(ctx.db, ctx.principal, body<AddCollateralBody>(c), ctx.idempotencyKey));

export const removeCollateral: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.borrow.removeCollateral(ctx.db, ctx.principal, body<RemoveCollateralBody>(c), ctx.idempotencyKey));
