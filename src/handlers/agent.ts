// Tag agent: who am I, my rate-limit state, the capabilities document and the public contract.
import type { Handler, RequestContext } from '../http/types.js';
import { answerDocument } from './document-answer.js';
import type { RateDecision } from '../ratelimit/limiter.js';

export const getSelf: Handler<'getSelf'> = async (_req, ctx) => {
  const self = await ctx.services.self.describe(ctx.db, ctx.principal, await rulesOf(ctx));
  return { status: 200, body: { ok: true, ...self } };
};

async function rulesOf(ctx: RequestContext) {
  const overrides = ctx.principal.snapshot?.rateOverrides ?? (await ctx.services.rateLimits.overridesFor(ctx.db, ctx.principal.agentId));
  return ctx.services.rateLimits.rulesFor(overrides);
}

const usageOf = (d: RateDecision) => ({ limit: d.limit, burst: d.burst, window_seconds: d.windowSeconds, remaining: d.remaining, reset: d.resetAt.toISOString() });

export const getSelfUsage: Handler<'getSelfUsage'> = async (_req, ctx) => {
  const usage = await ctx.services.rateLimits.usage(ctx.db, ctx.principal.agentId);
  // In the document's order of the classes (RATE_CLASSES), each one required.
  const classes = {
    read: usageOf(usage.read),
    write: usageOf(usage.write),
    simulate: usageOf(usage.simulate),
    webhook_management: usageOf(usage.webhook_management),
    bulk_write: usageOf(usage.bulk_write),
  };
  return { status: 200, body: { ok: true, classes } };
};

async function capabilitiesFor(ctx: RequestContext) {
  return { status: 200 as const, body: { ok: true as const, ...ctx.services.self.capabilities(await rulesOf(ctx)) } };
}

export const getCapabilities: Handler<'getCapabilities'> = (_req, ctx) => capabilitiesFor(ctx);

export const getCapabilitiesJson: Handler<'getCapabilitiesJson'> = (_req, ctx) => capabilitiesFor(ctx);

export const getOpenApi: Handler<'getOpenApi'> = async (req, ctx) => answerDocument<'getOpenApi'>(req.headers['if-none-match'], ctx.services.self.publicDocument('agent'));

export const getSelfLimits: Handler<'getSelfLimits'> = async (_req, ctx) => ({ status: 200, body: { ok: true, ...(await ctx.services.ledger.policy.limits(ctx.db, ctx.principal.agentId)) } });
