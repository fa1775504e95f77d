// Tag borrow: the Aave-style account summary and collateral; borrow, repay, deleverage, collateral add/remove.
import type { Context } from 'openapi-backend';
import type { Handler } from '../http/types.js';
import type { AddCollateralBody, BorrowBody, DeleverageBody, RemoveCollateralBody, RepayBody } from '../services/borrow.service.js';

const body = <T>(c: Context): T => (c.request.requestBody && typeof c.request.requestBody === 'object' ? c.request.requestBody : {}) as T;
const query = (c: Context, name: string): string | undefined => {
  const v = c.request.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};

export const getBorrowSummary: Handler = async (_c, ctx) => ({ status: 200, body: { ok: true, borrow: await ctx.services.defi.borrow.summary(ctx.db, ctx.principal) } });

export const listCollateral: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.listCollateral(ctx.db, ctx.principal, { cursor: query(c, 'cursor'), limit: query(c, 'limit') }) });

export const createBorrow: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.borrow(ctx.db, ctx.principal, body<BorrowBody>(c), ctx.idempotencyKey) });

export const createRepayment: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.repay(ctx.db, ctx.principal, body<RepayBody>(c), ctx.idempotencyKey) });

export const createDeleverage: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.deleverage(ctx.db, ctx.principal, body<DeleverageBody>(c), ctx.idempotencyKey) });

export const addCollateral: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.addCollateral(ctx.db, ctx.principal, body<AddCollateralBody>(c), ctx.idempotencyKey) });

export const removeCollateral: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.removeCollateral(ctx.db, ctx.principal, body<RemoveCollateralBody>(c), ctx.idempotencyKey) });
