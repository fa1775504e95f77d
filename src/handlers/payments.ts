// Tag payments: payments, one-off payments and recurring payments (details and lists return operations).
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import { getOperationOf, listOperationsOf, ok, who } from './ledger-common.js';

const PAYMENT = ['payment'];
const ONE_OFF = ['one_off_payment.create'];

export const createPayment: Handler<'createPayment'> = async (req, ctx) => answer(await ctx.services.ledger.payments.createPayment(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const listPayments: Handler<'listPayments'> = listOperationsOf(PAYMENT);

export const getPayment: Handler<'getPayment'> = getOperationOf(PAYMENT);

export const createOneOffPayment: Handler<'createOneOffPayment'> = async (req, ctx) => answer(await ctx.services.ledger.payments.createOneOffPayment(ctx.db, who(ctx), req.body, ctx.idempotencyKey));

export const listOneOffPayments: Handler<'listOneOffPayments'> = listOperationsOf(ONE_OFF);

export const getOneOffPayment: Handler<'getOneOffPayment'> = getOperationOf(ONE_OFF);

export const listRecurringPayments: Handler<'listRecurringPayments'> = async (req, ctx) => ok(await ctx.services.ledger.payments.listRecurring(ctx.db, ctx.principal.agentId, req.query));

export const getRecurringPayment: Handler<'getRecurringPayment'> = async (req, ctx) =>
  ok({ recurring_payment: await ctx.services.ledger.payments.getRecurring(ctx.db, ctx.principal.agentId, req.params.id) });
