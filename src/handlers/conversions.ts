// Tag conversions: stored single-use quotes and their execution; list and detail return operations.
import type { LooseRequest } from '../http/types.js';
import type { LooseHandler } from '../http/types.js';
import { answer } from '../lib/refusal.js';
import type { QuoteBody } from '../services/defi/conversions/conversion.service.js';

const body = <T>(c: LooseRequest): T => (c.body && typeof c.body === 'object' ? c.body : {}) as T;
const query = (c: LooseRequest, name: string): string | undefined => {
  const v = c.query[name];
  return v === undefined ? undefined : Array.isArray(v) ? String(v[0]) : String(v);
};

export const createConversionQuote: LooseHandler = async (c, ctx) => {
  const quote = await ctx.services.defi.conversions.quote(ctx.db, ctx.principal, body<QuoteBody>(c));
  return { status: 200, body: { ok: true, quote } };
};

export const createConversion: LooseHandler = async (c, ctx) => {
  const result = await ctx.services.defi.conversions.execute(ctx.db, ctx.principal, body<{ quote_id: string }>(c), ctx.idempotencyKey);
  return answer(result);
};

export const listConversions: LooseHandler = async (c, ctx) => {
  const page = await ctx.services.defi.conversions.list(ctx.db, ctx.principal, { cursor: query(c, 'cursor'), limit: query(c, 'limit') });
  return { status: 200, body: page };
};

export const getConversion: LooseHandler = async (c, ctx) => {
  const include = query(c, 'include');
  const operation = await ctx.services.defi.conversions.get(ctx.db, ctx.principal, String(c.params.id), include ? include.split(',') : undefined);
  return { status: 200, body: { ok: true, operation } };
};
