// Tag earn: vault positions and opportunities; deposit, withdraw, move and claim rewards.
import type { LooseRequest } from '../http/types.js';
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { DepositBody, MoveBody, WithdrawBody } from '../services/defi/earn/earn.service.js';

const body = <T>(c: LooseRequest): T => (c.body && typeof c.body === 'object' ? c.body : {}) as T;
const query = (c: LooseRequest, name: string): string | undefined => {
  const v = c.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};
const page = (c: LooseRequest) => ({ cursor: query(c, 'cursor'), limit: query(c, 'limit') });

export const listEarnPositions: LooseHandler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listPositions(ctx.db, ctx.principal, page(c)) });

export const getEarnPosition: LooseHandler = async (c, ctx) => ({ status: 200, body: { ok: true, position: await ctx.services.defi.earn.getPosition(ctx.db, ctx.principal, String(c.params.id)) } });

export const listEarnOpportunities: LooseHandler = async (c, ctx) => ({ status: 200, body: await ctx.services.defi.earn.listOpportunities(ctx.db, ctx.principal, page(c)) });

export const createEarnDeposit: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.earn.deposit(ctx.db, ctx.principal, body<DepositBody>(c), ctx.idempotencyKey));

export const createEarnWithdrawal: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.earn.withdraw(ctx.db, ctx.principal, body<WithdrawBody>(c), ctx.idempotencyKey));

export const createEarnMove: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.earn.move(ctx.db, ctx.principal, body<MoveBody>(c), ctx.idempotencyKey));

export const claimEarnRewards: LooseHandler = async (c, ctx) => answer(await ctx.services.defi.earn.claimRewards(ctx.db, ctx.principal, body<{ protocols?: string[] }>(c), ctx.idempotencyKey));
