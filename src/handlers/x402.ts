// Tag x402: sign an x402 payment, quote an x402 resource, purchase one (spec 4.1, contract §13).
import type { Handler, RequestContext } from '../http/types.js';
import { answer } from '../lib/refusal.js';

const who = (ctx: RequestContext) => ({ agentId: ctx.principal.agentId, walletId: ctx.principal.walletId });

export const signX402Payment: Handler<'signX402Payment'> = async (req, ctx) => answer(await ctx.services.x402.sign(ctx.db, who(ctx), req.body, ctx.idempotencyKey, { dryRun: ctx.dryRun }));

export const quoteX402: Handler<'quoteX402'> = async (req, ctx) => ({ status: 200, body: await ctx.services.x402.quote(req.body, ctx.db) });

export const purchaseX402: Handler<'purchaseX402'> = async (req, ctx) => answer(await ctx.services.x402.purchase(ctx.db, who(ctx), req.body, ctx.idempotencyKey, { dryRun: ctx.dryRun }));
