// Per-agent rules (defaults overridden in Postgres) and charging, with the Redis-down policy of contract §6.
import type { Db } from '../db/knex.js';
import { listRateLimitOverrides, type RateLimitOverrideRow } from '../db/repositories/agent.repository.js';
import type { Logger } from '../lib/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { DEFAULT_RULES, RATE_CLASSES, type RateClass, type RateRule } from './classes.js';
import type { RateDecision, RateLimiter } from './limiter.js';

export class LimiterUnavailableError extends Error {}

/** A per-agent override of one class's rule (stored in rate_limit_overrides). */
export type RateOverride = Pick<RateLimitOverrideRow, 'class' | 'limit' | 'burst' | 'window_seconds'>;

export interface RateLimitService {
  rulesFor(overrides: RateOverride[]): Record<RateClass, RateRule>;
  /** Charges one request of `cls` to the agent. Throws LimiterUnavailableError when writes cannot be limited. */
  charge(agentId: string, cls: RateClass, rule: RateRule): Promise<RateDecision>;
  /** Charges a per-address bucket (failed authentications, public routes); degrades to memory. */
  chargeAddress(bucket: string, address: string, rule: RateRule): Promise<RateDecision>;
  usage(db: Db, agentId: string): Promise<Record<RateClass, RateDecision>>;
  overridesFor(db: Db, agentId: string): Promise<RateOverride[]>;
}

export function createRateLimitService(deps: { primary: RateLimiter; fallback: RateLimiter; log: Logger; metrics?: Pick<Metrics, 'rateLimitRefused'> }): RateLimitService {
  const { primary, fallback, log } = deps;
  const counted = (bucket: string, decision: RateDecision): RateDecision => {
    if (!decision.allowed) deps.metrics?.rateLimitRefused(bucket);
    return decision;
  };
  let warned = false;
  const degrade = (err: unknown) => {
    if (!warned) log.error({ err }, 'rate limiter unreachable: reads use the in-process limiter, writes answer 503');
    warned = true;
  };
  const withFallback = async (key: string, rule: RateRule, cost: 0 | 1 = 1) => {
    try {
      const decision = await primary.consume(key, rule, cost);
      warned = false;
      return decision;
    } catch (err) {
      degrade(err);
      return fallback.consume(key, rule, cost);
    }
  };

  const rulesFor = (overrides: RateOverride[]) => {
    const rules = { ...DEFAULT_RULES };
    for (const o of overrides) {
      if ((RATE_CLASSES as readonly string[]).includes(o.class)) rules[o.class as RateClass] = { limit: o.limit, burst: o.burst, windowSeconds: o.window_seconds };
    }
    return rules;
  };

  return {
    rulesFor,
    async charge(agentId, cls, rule) {
      const key = `agent:${agentId}:${cls}`;
      if (cls === 'read') return counted(cls, await withFallback(key, rule));
      try {
        return counted(cls, await primary.consume(key, rule, 1));
      } catch (err) {
        degrade(err);
        throw new LimiterUnavailableError('rate limiter unavailable');
      }
    },
    chargeAddress: async (bucket, address, rule) => counted(bucket, await withFallback(`${bucket}:${address}`, rule)),
    overridesFor: (db, agentId) => listRateLimitOverrides(db, agentId),
    async usage(db, agentId) {
      const rules = rulesFor(await listRateLimitOverrides(db, agentId));
      const entries = await Promise.all(RATE_CLASSES.map(async (cls) => [cls, await withFallback(`agent:${agentId}:${cls}`, rules[cls], 0)] as const));
      return Object.fromEntries(entries) as Record<RateClass, RateDecision>;
    },
  };
}
