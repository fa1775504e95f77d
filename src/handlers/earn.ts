// Tag earn: vault positions and opportunities; deposit, withdraw, move and claim rewards.
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';

export const listEarnPositions: Handler<'listEarnPositions'> = async (req, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listPositions(ctx.db, ctx.principal, req.query) });

export const getEarnPosition: Handler<'getEarnPosition'> = async (req, ctx) => ({
  status: 200,
  body: { ok: true, position: await ctx.services.defi.earn.getPosition(ctx.db, ctx.principal, req.params.id) },
});

export const listEarnOpportunities: Handler<'listEarnOpportunities'> = async (req, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listOpportunities(ctx.db, ctx.principal, req.query) });

export const createEarnDeposit: Handler<'createEarnDeposit'> = async (req, ctx) => answer(await ctx.services.defi.earn.deposit(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const createEarnWithdrawal: Handler<'createEarnWithdrawal'> = async (req, ctx) => answer(await ctx.services.defi.earn.withdraw(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const createEarnMove: Handler<'createEarnMove'> = async (req, ctx) => answer(await ctx.services.defi.earn.move(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const claimEarnRewards: Handler<'claimEarnRewards'> = async (req, ctx) => answer(await ctx.services.defi.earn.claimRewards(ctx.db, ctx.principal, req.body ?? {}, ctx.idempotencyKey));
