// Tag x402: sign an x402 payment, quote an x402 resource, purchase one (spec 4.1, contract §13).
import type { LooseRequest } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { LooseHandler, RequestContext } from '../http/types.js';
import type { X402PurchaseBody, X402QuoteBody, X402SignBody } from '../services/x402.service.js';

const body = <T>(c: LooseRequest): T => (c.body && typeof c.body === 'object' ? c.body : {}) as T;
const who = (ctx: RequestContext) => ({ agentId: ctx.principal.agentId, walletId: ctx.principal.walletId });

export const signX402Payment: LooseHandler = async (c, ctx) => answer(await ctx.services.x402.sign(ctx.db, who(ctx), body<X402SignBody>(c), ctx.idempotencyKey, { dryRun: ctx.dryRun }));

export const quoteX402: LooseHandler = async (c, ctx) => ({ status: 200, body: await ctx.services.x402.quote(body<X402QuoteBody>(c), ctx.db) });

export const purchaseX402: LooseHandler = async (c, ctx) => answer(await ctx.services.x402.purchase(ctx.db, who(ctx), body<X402PurchaseBody>(c), ctx.idempotencyKey, { dryRun: ctx.dryRun }));
