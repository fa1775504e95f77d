import { expect } from 'chai';
import { createClient } from 'redis';
import { createMemoryLimiter, createRedisLimiter, type RateLimiter } from '../../src/ratelimit/limiter.js';
import { testEnv } from '../setup.js';

// The limiters take `now` from the caller's clock: the tests move it instead of sleeping.
let nowMs = Date.UTC(2026, 0, 1);
const now = () => nowMs;
const advance = (ms: number) => {
  nowMs += ms;
};

describe('rate limiter', () => {
  const redis = createClient({ url: testEnv.redisUrl });
  before(() => redis.connect());
  after(() => redis.quit());

  const variants: [string, () => RateLimiter][] = [
    ['redis', () => createRedisLimiter(redis, `${testEnv.redisPrefix}lim:${Math.random()}:`, { now })],
    ['memory', () => createMemoryLimiter(now)],
  ];

  for (const [name, make] of variants) {
    describe(name, () => {
      it('accepts exactly `burst` requests at once and refuses the next with Retry-After >= 1', async () => {
        const limiter = make();
        const rule = { limit: 6, burst: 3, windowSeconds: 60 };
        const decisions = [];
        for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('k', rule));
        expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, true, false]);
        expect(decisions.map((d) => d.remaining)).to.deep.equal([2, 1, 0, 0]);
        const refused = decisions[3]!;
        expect(refused.retryAfterSeconds).to.be.at.least(1).and.at.most(10);
        expect(refused.attemptedCount).to.equal(4);
        expect(refused.limit).to.equal(6);
      });

      it('never accepts more than `limit` in a rolling window even when tokens refill', async () => {
        const limiter = make();
        // 4 per 2 s with burst 4: tokens refill at 2/s, but the window still holds 4 accepted.
        const rule = { limit: 4, burst: 4, windowSeconds: 2 };
        for (let i = 0; i < 4; i++) expect((await limiter.consume('w', rule)).allowed).to.equal(true);
        advance(1100);
        const mid = await limiter.consume('w', rule);
        expect(mid.allowed, 'rolling window must still be full').to.equal(false);
        advance(1100);
        expect((await limiter.consume('w', rule)).allowed).to.equal(true);
      });

      it('does not charge refused requests, so a waiting client recovers', async () => {
        const limiter = make();
        const rule = { limit: 60, burst: 1, windowSeconds: 6 }; // 10 tokens per second
        expect((await limiter.consume('r', rule)).allowed).to.equal(true);
        for (let i = 0; i < 5; i++) await limiter.consume('r', rule);
        advance(150);
        expect((await limiter.consume('r', rule)).allowed).to.equal(true);
      });

      it('reads the state without charging when cost is 0', async () => {
        const limiter = make();
        const rule = { limit: 10, burst: 5, windowSeconds: 60 };
        await limiter.consume('p', rule);
        const peek1 = await limiter.consume('p', rule, 0);
        const peek2 = await limiter.consume('p', rule, 0);
        expect(peek1.remaining).to.equal(4);
        expect(peek2.remaining).to.equal(4);
      });
    });
  }

  it('keeps keys separate per agent and class', async () => {
    const limiter = createRedisLimiter(redis, `${testEnv.redisPrefix}sep:`, { now });
    const rule = { limit: 1, burst: 1, windowSeconds: 60 };
    expect((await limiter.consume('agent:a:write', rule)).allowed).to.equal(true);
    expect((await limiter.consume('agent:a:write', rule)).allowed).to.equal(false);
    expect((await limiter.consume('agent:a:read', rule)).allowed).to.equal(true);
    expect((await limiter.consume('agent:b:write', rule)).allowed).to.equal(true);
  });
});
