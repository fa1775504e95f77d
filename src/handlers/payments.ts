// Tag payments: payments, one-off payments and recurring payments (details and lists return operations).
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { OneOffBody } from '../services/ledger/one-off-payments.js';
import type { PaymentBody } from '../services/ledger/payments.js';
import { body, ok, pageQuery, param, query, who } from './ledger-common.js';

const operationList = (types: string[]): LooseHandler => async (c, ctx) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...pageQuery(c), types }));

const operationDetail = (types: string[]): LooseHandler => async (c, ctx) => {
  const include = query(c, 'include');
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, param(c, 'id'), { types, include: include ? [include] : [] }) });
};

export const createPayment: LooseHandler = async (c, ctx) => answer(await ctx.services.ledger.payments.createPayment(ctx.db, who(ctx), body<PaymentBody>(c), ctx.idempotencyKey));

export const listPayments: LooseHandler = operationList(['payment']);

export const getPayment: LooseHandler = operationDetail(['payment']);

export const createOneOffPayment: LooseHandler = async (c, ctx) => answer(await ctx.services.ledger.payments.createOneOffPayment(ctx.db, who(ctx), body<OneOffBody>(c), ctx.idempotencyKey));

export const listOneOffPayments: LooseHandler = operationList(['one_off_payment.create']);

export const getOneOffPayment: LooseHandler = operationDetail(['one_off_payment.create']);

export const listRecurringPayments: LooseHandler = async (c, ctx) => ok(await ctx.services.ledger.payments.listRecurring(ctx.db, ctx.principal.agentId, pageQuery(c)));

export const getRecurringPayment: LooseHandler = async (c, ctx) => ok({ recurring_payment: await ctx.services.ledger.payments.getRecurring(ctx.db, ctx.principal.agentId, param(c, 'id')) });
