// Tag payments: payments, one-off payments and recurring payments (details and lists return operations).
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import { ok, who } from './ledger-common.js';

const PAYMENT = ['payment'];
const ONE_OFF = ['one_off_payment.create'];

export const createPayment: Handler<'createPayment'> = async (req, ctx) => answer(await ctx.services.ledger.payments.createPayment(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const listPayments: Handler<'listPayments'> = async (req, ctx) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...req.query, types: PAYMENT }));

export const getPayment: Handler<'getPayment'> = async (req, ctx) => {
  const { include } = req.query;
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, req.params.id, { types: PAYMENT, include: include ? [include] : [] }) });
};

export const createOneOffPayment: Handler<'createOneOffPayment'> = async (req, ctx) => answer(await ctx.services.ledger.payments.createOneOffPayment(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const listOneOffPayments: Handler<'listOneOffPayments'> = async (req, ctx) => ok(await ctx.services.ledger.operations.list(ctx.db, ctx.principal.agentId, { ...req.query, types: ONE_OFF }));

export const getOneOffPayment: Handler<'getOneOffPayment'> = async (req, ctx) => {
  const { include } = req.query;
  return ok({ operation: await ctx.services.ledger.operations.get(ctx.db, ctx.principal.agentId, req.params.id, { types: ONE_OFF, include: include ? [include] : [] }) });
};

export const listRecurringPayments: Handler<'listRecurringPayments'> = async (req, ctx) => ok(await ctx.services.ledger.payments.listRecurring(ctx.db, ctx.principal.agentId, req.query));

export const getRecurringPayment: Handler<'getRecurringPayment'> = async (req, ctx) => ok({ recurring_payment: await ctx.services.ledger.payments.getRecurring(ctx.db, ctx.principal.agentId, req.params.id) });
