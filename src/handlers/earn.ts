// Tag earn: vault positions and opportunities; deposit, withdraw, move and claim rewards.
import type { Context } from 'openapi-backend';
import type { Handler } from '../http/types.js';
import type { DepositBody, MoveBody, WithdrawBody } from '../services/earn.service.js';

const body = <T>(c: Context): T => (c.request.requestBody && typeof c.request.requestBody === 'object' ? c.request.requestBody : {}) as T;
const query = (c: Context, name: string): string | undefined => {
  const v = c.request.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};
const page = (c: Context) => ({ cursor: query(c, 'cursor'), limit: query(c, 'limit') });

export const listEarnPositions: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listPositions(ctx.db, ctx.principal, page(c)) });

export const getEarnPosition: Handler = async (c, ctx) => ({ status: 200, body: { ok: true, position: await ctx.services.defi.earn.getPosition(ctx.db, ctx.principal, String(c.request.params.id)) } });

export const listEarnOpportunities: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listOpportunities(ctx.db, ctx.principal, page(c)) });

export const createEarnDeposit: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.deposit(ctx.db, ctx.principal, body<DepositBody>(c), ctx.idempotencyKey) });

export const createEarnWithdrawal: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.withdraw(ctx.db, ctx.principal, body<WithdrawBody>(c), ctx.idempotencyKey) });

export const createEarnMove: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.move(ctx.db, ctx.principal, body<MoveBody>(c), ctx.idempotencyKey) });

export const claimEarnRewards: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.claimRewards(ctx.db, ctx.principal, body<{ protocols?: string[] }>(c), ctx.idempotencyKey) });
