// Tag webhooks: endpoint management, test events and the delivery log (spec 4.2-4.4, contract §11, §14).
import type { LooseRequest } from '../http/types.js';
import type { LooseHandler } from '../http/types.js';
import { ApiError } from '../lib/errors.js';

const param = (c: LooseRequest, name: string): string => String(c.params[name] ?? '');

function queryString(c: LooseRequest, name: string): string | undefined {
  const value = c.query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new ApiError('validation_failed', `${name} may be given once`, { field: name });
  return String(value);
}

function queryLimit(c: LooseRequest): number | undefined {
  const raw = queryString(c, 'limit');
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new ApiError('validation_failed', 'limit must be an integer', { field: 'limit' });
  return value;
}

const body = (c: LooseRequest): Record<string, unknown> => (c.body && typeof c.body === 'object' ? c.body : {}) as Record<string, unknown>;

export const createWebhook: LooseHandler = async (c, ctx) => {
  const input = body(c);
  const created = await ctx.services.webhooks.create(ctx.db, ctx.principal, {
    url: input.url as string,
    description: input.description as string | undefined,
    event_types: input.event_types as string[],
  });
  return { status: 200, body: { ok: true, webhook: created.webhook, signing_secret: created.signing_secret } };
};

export const listWebhooks: LooseHandler = async (c, ctx) => {
  const page = await ctx.services.webhooks.list(ctx.db, ctx.principal, { cursor: queryString(c, 'cursor'), limit: queryLimit(c) });
  return { status: 200, body: { ok: true, ...page } };
};

export const getWebhook: LooseHandler = async (c, ctx) => {
  const include = queryString(c, 'include');
  if (include !== undefined && include !== 'recent_deliveries') throw new ApiError('validation_failed', 'include must be recent_deliveries', { field: 'include' });
  const webhook = await ctx.services.webhooks.get(ctx.db, ctx.principal, param(c, 'id'), { includeRecentDeliveries: include === 'recent_deliveries' });
  return { status: 200, body: { ok: true, webhook } };
};

export const updateWebhook: LooseHandler = async (c, ctx) => {
  const input = body(c);
  const webhook = await ctx.services.webhooks.update(ctx.db, ctx.principal, param(c, 'id'), {
    url: input.url as string | undefined,
    description: input.description as string | undefined,
    event_types: input.event_types as string[] | undefined,
    enabled: input.enabled as boolean | undefined,
  });
  return { status: 200, body: { ok: true, webhook } };
};

export const deleteWebhook: LooseHandler = async (c, ctx) => {
  await ctx.services.webhooks.remove(ctx.db, ctx.principal, param(c, 'id'));
  return { status: 200, body: { ok: true } };
};

export const rotateWebhookSecret: LooseHandler = async (c, ctx) => {
  const rotated = await ctx.services.webhooks.rotateSecret(ctx.db, ctx.principal, param(c, 'id'));
  return { status: 200, body: { ok: true, webhook: rotated.webhook, signing_secret: rotated.signing_secret } };
};

export const testWebhook: LooseHandler = async (c, ctx) => {
  const { event_id } = await ctx.services.webhooks.sendTest(ctx.db, ctx.principal, param(c, 'id'));
  return { status: 200, body: { ok: true, event_id } };
};

export const listWebhookDeliveries: LooseHandler = async (c, ctx) => {
  const page = await ctx.services.webhooks.listDeliveries(ctx.db, ctx.principal, param(c, 'id'), {
    cursor: queryString(c, 'cursor'),
    limit: queryLimit(c),
    status: queryString(c, 'status'),
    event_id: queryString(c, 'event_id'),
  });
  return { status: 200, body: { ok: true, ...page } };
};

export const retryWebhookDelivery: LooseHandler = async (c, ctx) => {
  const delivery = await ctx.services.webhooks.retryDelivery(ctx.db, ctx.principal, param(c, 'id'), param(c, 'delivery_id'));
  return { status: 200, body: { ok: true, delivery } };
};
