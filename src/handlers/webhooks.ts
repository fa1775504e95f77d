// Tag webhooks: endpoint management, test events and the delivery log (spec 4.2-4.4, contract §11, §14).
import type { Handler } from '../http/types.js';

export const createWebhook: Handler<'createWebhook'> = async (req, ctx) => {
  const created = await ctx.services.webhooks.create(ctx.db, ctx.principal, req.body);
  return { status: 200, body: { ok: true, webhook: created.webhook, signing_secret: created.signing_secret } };
};

export const listWebhooks: Handler<'listWebhooks'> = async (req, ctx) => {
  const page = await ctx.services.webhooks.list(ctx.db, ctx.principal, req.query);
  return { status: 200, body: { ok: true, ...page } };
};

export const getWebhook: Handler<'getWebhook'> = async (req, ctx) => {
  const webhook = await ctx.services.webhooks.get(ctx.db, ctx.principal, req.params.id, { includeRecentDeliveries: req.query.include === 'recent_deliveries' });
  return { status: 200, body: { ok: true, webhook } };
};

export const updateWebhook: Handler<'updateWebhook'> = async (req, ctx) => {
  const webhook = await ctx.services.webhooks.update(ctx.db, ctx.principal, req.params.id, req.body);
  return { status: 200, body: { ok: true, webhook } };
};

export const deleteWebhook: Handler<'deleteWebhook'> = async (req, ctx) => {
  await ctx.services.webhooks.remove(ctx.db, ctx.principal, req.params.id);
  return { status: 200, body: { ok: true } };
};

export const rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async (req, ctx) => {
  const rotated = await ctx.services.webhooks.rotateSecret(ctx.db, ctx.principal, req.params.id);
  return { status: 200, body: { ok: true, webhook: rotated.webhook, signing_secret: rotated.signing_secret } };
};

export const testWebhook: Handler<'testWebhook'> = async (req, ctx) => {
  const { event_id } = await ctx.services.webhooks.sendTest(ctx.db, ctx.principal, req.params.id);
  return { status: 200, body: { ok: true, event_id } };
};

export const listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async (req, ctx) => {
  const page = await ctx.services.webhooks.listDeliveries(ctx.db, ctx.principal, req.params.id, req.query);
  return { status: 200, body: { ok: true, ...page } };
};

export const retryWebhookDelivery: Handler<'retryWebhookDelivery'> = async (req, ctx) => {
  const delivery = await ctx.services.webhooks.retryDelivery(ctx.db, ctx.principal, req.params.id, req.params.delivery_id);
  return { status: 200, body: { ok: true, delivery } };
};

export const listWebhookDeliveryAttempts: Handler<'listWebhookDeliveryAttempts'> = async (req, ctx) => {
  const page = await ctx.services.webhooks.listDeliveryAttempts(ctx.db, ctx.principal, req.params.id, req.params.delivery_id, req.query);
  return { status: 200, body: { ok: true, ...page } };
};
