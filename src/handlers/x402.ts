// Tag x402: sign an x402 payment, quote an x402 resource, purchase one (spec 4.1, contract §13).
import type { Context } from 'openapi-backend';
import type { Handler, RequestContext } from '../http/types.js';
import type { X402PurchaseBody, X402QuoteBody, X402SignBody } from '../services/x402.service.js';

const body = <T>(c: Context): T => (c.request.requestBody && typeof c.request.requestBody === 'object' ? c.request.requestBody : {}) as T;
const who = (ctx: RequestContext) => ({ agentId: ctx.principal.agentId, walletId: ctx.principal.walletId });

export const signX402Payment: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.x402.sign(ctx.db, who(ctx), body<X402SignBody>(c), ctx.idempotencyKey, { dryRun: ctx.dryRun }) });

export const quoteX402: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.x402.quote(body<X402QuoteBody>(c), ctx.db) });

export const purchaseX402: Handler = async (c, ctx) => ({ status: 200, body: await ctx.services.x402.purchase(ctx.db, who(ctx), body<X402PurchaseBody>(c), ctx.idempotencyKey, { dryRun: ctx.dryRun }) });
