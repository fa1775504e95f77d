// Tag withdrawals: to the owner's bank methods and to confirmed trusted destinations (details return operations).
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { WithdrawalBody } from '../services/ledger/withdrawals.js';
import { body, ok, pageQuery, param, query, who } from './ledger-common.js';

const TYPES = ['withdrawal.bank', 'withdrawal.crypto'];

export const createBankWithdrawal: LooseHandler = async (c, ctx) => answer(await ctx.services.ledger.withdrawals.createBankWithdrawal(ctx.db, who(ctx), body<WithdrawalBody & { method_id: string }>(c), ctx.idempotencyKey));

export const createCryptoWithdrawal: LooseHandler = async (c, ctx) => answer(await ctx.services.ledger.withdrawals.createCryptoWithdrawal(ctx.db, who(ctx), body<WithdrawalBody & { destination_id: string }>(c), ctx.idempotencyKey));

export const listWithdrawals: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...pageQuery(c), types: TYPES }));

export const getWithdrawal: LooseHandler = async (c, ctx) => {
  const include = query(c, 'include');
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, param(c, 'id'), { types: TYPES, include: include ? [include] : [] }) });
};

export const listWithdrawalMethods: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.withdrawals.listMethods(ctx.db, ctx.principal.ownerId, pageQuery(c)));
