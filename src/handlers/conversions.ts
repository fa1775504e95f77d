// Tag conversions: stored single-use quotes and their execution; list and detail return operations.
import type { Handler, LooseHandler, LooseRequest } from '../http/types.js';
import { answer } from '../lib/refusal.js';

export const createConversionQuote: Handler<'createConversionQuote'> = async (req, ctx) => {
  const quote = await ctx.services.defi.conversions.quote(ctx.db, ctx.principal, req.body);
  return { status: 200, body: { ok: true, quote } };
};

export const createConversion: Handler<'createConversion'> = async (req, ctx) => answer(await ctx.services.defi.conversions.execute(ctx.db, ctx.principal, req.body, ctx.idempotencyKey));

// Loose until PublicOperation (operation.service.ts, the ledger's) is the document's Operation: its `type` is a string.
const firstQuery = (c: LooseRequest, name: string): string | undefined => {
  const v = c.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};

export const listConversions: LooseHandler = async (c, ctx) => {
  const page = await ctx.services.defi.conversions.list(ctx.db, ctx.principal, { cursor: firstQuery(c, 'cursor'), limit: firstQuery(c, 'limit') });
  return { status: 200, body: page };
};

export const getConversion: LooseHandler = async (c, ctx) => {
  const include = firstQuery(c, 'include');
  const operation = await ctx.services.defi.conversions.get(ctx.db, ctx.principal, String(c.params.id), include ? include.split(',') : undefined);
  return { status: 200, body: { ok: true, operation } };
};
