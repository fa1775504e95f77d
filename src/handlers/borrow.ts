// Tag borrow: the Aave-style account summary and collateral; borrow, repay, deleverage, collateral add/remove.
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';

export const getBorrowSummary: Handler<'getBorrowSummary'> = async (_req, ctx) => ({ status: 200, body: { ok: true, borrow: await ctx.services.defi.borrow.summary(ctx.db, ctx.principal) } });

export const listCollateral: Handler<'listCollateral'> = async (req, ctx) => ({ status: 200, body: await ctx.services.defi.borrow.listCollateral(ctx.db, ctx.principal, req.query) });

export const createBorrow: Handler<'createBorrow'> = async (req, ctx) => answer(await ctx.services.defi.borrow.borrow(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const createRepayment: Handler<'createRepayment'> = async (req, ctx) => answer(await ctx.services.defi.borrow.repay(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const createDeleverage: Handler<'createDeleverage'> = async (req, ctx) => answer(await ctx.services.defi.borrow.deleverage(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const addCollateral: Handler<'addCollateral'> = async (req, ctx) => answer(await ctx.services.defi.borrow.addCollateral(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const removeCollateral: Handler<'removeCollateral'> = async (req, ctx) => answer(await ctx.services.defi.borrow.removeCollateral(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));
