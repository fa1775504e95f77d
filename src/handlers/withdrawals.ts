// Tag withdrawals: to the owner's bank methods and to confirmed trusted destinations (details return operations).
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import { getOperationOf, listOperationsOf, ok, who } from './ledger-common.js';

const TYPES = ['withdrawal.bank', 'withdrawal.crypto'];

export const createBankWithdrawal: Handler<'createBankWithdrawal'> = async (req, ctx) =>
  answer(await ctx.services.ledger.withdrawals.createBankWithdrawal(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const createCryptoWithdrawal: Handler<'createCryptoWithdrawal'> = async (req, ctx) =>
  answer(await ctx.services.ledger.withdrawals.createCryptoWithdrawal(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const listWithdrawals: Handler<'listWithdrawals'> = listOperationsOf(TYPES);

export const getWithdrawal: Handler<'getWithdrawal'> = getOperationOf(TYPES);

export const listWithdrawalMethods: Handler<'listWithdrawalMethods'> = async (req, ctx) => ok(await ctx.services.ledger.withdrawals.listMethods(ctx.db, ctx.principal.ownerId, req.query));
