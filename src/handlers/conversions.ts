// Tag conversions: stored single-use quotes and their execution; list and detail return operations.
import type { Handler } from '../http/types.js';
import { answer } from '../lib/refusal.js';

export const createConversionQuote: Handler<'createConversionQuote'> = async (req, ctx) => {
  const quote = await ctx.services.defi.conversions.quote(ctx.db, ctx.principal, req.body);
  return { status: 200, body: { ok: true, quote } };
};

export const createConversion: Handler<'createConversion'> = async (req, ctx) => answer(await ctx.services.defi.conversions.execute(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

export const listConversions: Handler<'listConversions'> = async (req, ctx) => ({ status: 200, body: await ctx.services.defi.conversions.list(ctx.db, ctx.principal, req.query) });

export const getConversion: Handler<'getConversion'> = async (req, ctx) => {
  const include = req.query.include;
  const operation = await ctx.services.defi.conversions.get(ctx.db, ctx.principal, req.params.id, include ? [include] : undefined);
  return { status: 200, body: { ok: true, operation } };
};
