// Tag agent: who am I, my rate-limit state, the capabilities document and the public contract.
import type { LooseHandler } from '../http/types.js';
import { RATE_CLASSES } from '../ratelimit/classes.js';

export const getSelf: LooseHandler = async (_c, ctx) => {
  const self = await ctx.services.self.describe(ctx.db, ctx.principal);
  return { status: 200, body: { ok: true, ...self } };
};

export const getSelfUsage: LooseHandler = async (_c, ctx) => {
  const usage = await ctx.services.rateLimits.usage(ctx.db, ctx.principal.agentId);
  const classes = Object.fromEntries(
    RATE_CLASSES.map((cls) => {
      const d = usage[cls];
      return [cls, { limit: d.limit, burst: d.burst, window_seconds: d.windowSeconds, remaining: d.remaining, reset: d.resetAt.toISOString() }];
    }),
  );
  return { status: 200, body: { ok: true, classes } };
};

export const getCapabilities: LooseHandler = async (_c, ctx) => {
  const overrides = ctx.principal.snapshot?.rateOverrides ?? (await ctx.services.rateLimits.overridesFor(ctx.db, ctx.principal.agentId));
  return { status: 200, body: { ok: true, ...ctx.services.self.capabilities(ctx.services.rateLimits.rulesFor(overrides)) } };
};

export const getCapabilitiesJson: LooseHandler = getCapabilities;

export const getOpenApi: LooseHandler = async (c, ctx) => {
  const { document, etag } = ctx.services.self.publicDocument();
  const headers = { ETag: etag, 'Cache-Control': 'public, max-age=300' };
  const ifNoneMatch = c.headers['if-none-match'];
  if (typeof ifNoneMatch === 'string' && ifNoneMatch.split(',').map((s) => s.trim()).includes(etag)) {
    return { status: 304, body: undefined, headers };
  }
  return { status: 200, body: document, headers };
};

export const getSelfLimits: LooseHandler = async (_c, ctx) => ({ status: 200, body: { ok: true, ...(await ctx.services.ledger.policy.limits(ctx.db, ctx.principal.agentId)) } });
