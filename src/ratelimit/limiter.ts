// Per-key rate limiting: a token bucket of capacity `burst` refilled at limit/window per second,
// AND at most `limit` accepted in any rolling window (contract §6). Redis (atomic Lua) or memory.
import { createHash } from 'node:crypto';
import type { RateRule } from './classes.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  burst: number;
  windowSeconds: number;
  remaining: number;
  /** When the bucket is full again (ISO 8601 in headers). */
  resetAt: Date;
  /** Whole seconds to wait before a retry can succeed (≥ 1 when refused). */
  retryAfterSeconds: number;
  /** Requests in the current rolling window, this one included. */
  attemptedCount: number;
}

export interface RateLimiter {
  /** Charges one request (cost 1) or only reads the state (cost 0). */
  consume(key: string, rule: RateRule, cost?: 0 | 1): Promise<RateDecision>;
  close(): Promise<void>;
}

interface RawDecision {
  allowed: number;
  tokensMilli: number;
  count: number;
  retryMs: number;
  resetMs: number;
  nowMs: number;
}

/** One token, in the milli-tokens the buckets count (integer arithmetic in Lua and JavaScript alike). */
const TOKEN = 1000;
const MS_PER_SECOND = 1000;

function toDecision(raw: RawDecision, rule: RateRule): RateDecision {
  const tokens = Math.floor(raw.tokensMilli / TOKEN);
  return {
    allowed: raw.allowed === 1,
    limit: rule.limit,
    burst: rule.burst,
    windowSeconds: rule.windowSeconds,
    remaining: Math.max(0, Math.min(tokens, rule.limit - raw.count)),
    resetAt: new Date(raw.nowMs + raw.resetMs),
    retryAfterSeconds: raw.allowed === 1 ? 0 : Math.max(1, Math.ceil(raw.retryMs / MS_PER_SECOND)),
    attemptedCount: raw.count + (raw.allowed === 1 ? 0 : 1),
  };
}

/**
 * The decision, shared by both implementations. Tokens are kept in thousandths so the
 * arithmetic stays in integers in Lua and in JavaScript alike.
 */
const LUA = `
local TOKEN = ${TOKEN}
local bucket, log = KEYS[1], KEYS[2]
local limit, burst, window_ms, cost, member, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local cap = burst * TOKEN
local state = redis.call('HMGET', bucket, 'tokens', 'ts')
local tokens = tonumber(state[1]) or cap
local ts = tonumber(state[2]) or now
if now > ts then tokens = math.min(cap, tokens + math.floor((now - ts) * limit * TOKEN / window_ms)) end
redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window_ms)
local count = redis.call('ZCARD', log)
local allowed = 0
if cost > 0 and tokens >= TOKEN and count < limit then
  allowed = 1
  tokens = tokens - TOKEN
  redis.call('ZADD', log, now, member)
  count = count + 1
end
local retry = 0
if allowed == 0 then
  if tokens < TOKEN then retry = math.ceil((TOKEN - tokens) * window_ms / (limit * TOKEN)) end
  if count >= limit then
    local oldest = redis.call('ZRANGE', log, 0, count - limit, 'WITHSCORES')
    local w = tonumber(oldest[#oldest]) + window_ms - now
    if w > retry then retry = w end
  end
end
local reset = math.ceil((cap - tokens) * window_ms / (limit * TOKEN))
if cost > 0 then
  redis.call('HSET', bucket, 'tokens', tokens, 'ts', now)
  redis.call('PEXPIRE', bucket, window_ms * 2)
  redis.call('PEXPIRE', log, window_ms * 2)
end
return {allowed, tokens, count, retry, reset, now}
`;

const LUA_SHA = createHash('sha1').update(LUA).digest('hex');

export interface RedisLike {
  /** node-redis takes per-command options; `timeout: 0` turns its own per-command timer off. */
  sendCommand(args: string[], options?: { timeout?: number }): Promise<unknown>;
  close?(): Promise<unknown>;
}

/** Redis did not answer within the limiter's bound (a silent network); callers treat it as Redis down. */
export class RedisTimeoutError extends Error {}

/**
 * node-redis times out a command only while it waits to be written; once sent, a command to a
 * server behind a silent network waits forever. `timeoutMs` bounds every call (REDIS_COMMAND_TIMEOUT_MS).
 *
 * `now` is the injected clock (milliseconds), passed to the script rather than read there with Redis `TIME`, so the
 * limiter runs on the same time as everything else (tests move it instead of sleeping). Replicas' clocks differ by
 * NTP's few milliseconds at most; a clock seen going back refills nothing (`now > ts` in the script).
 */
export function createRedisLimiter(client: RedisLike, prefix: string, opts: { timeoutMs?: number; now?: () => number } = {}): RateLimiter {
  const now = opts.now ?? (() => Date.now());
  let counter = 0;
  const send = (command: string[]): Promise<unknown> => {
    if (!opts.timeoutMs) return client.sendCommand(command);
    // Our timer bounds the call, so node-redis's own (an AbortSignal.timeout per command, 5 s by default, whose
    // timer fires and builds a DOMException even after the reply came) is turned off: ~2 % of a read's CPU.
    const reply = client.sendCommand(command, { timeout: 0 });
    let timer: NodeJS.Timeout | undefined;
    const expiry = new Promise<never>((_, reject) => {
      // setImmediate: after a blocked event loop, timers run before pending socket reads; give a
      // reply that has already arrived the chance to win (the poll phase comes before immediates).
      timer = setTimeout(() => setImmediate(() => reject(new RedisTimeoutError(`redis did not answer within ${opts.timeoutMs} ms`))), opts.timeoutMs);
    });
    reply.catch(() => undefined); // a late failure after the timeout is nobody's to handle
    return Promise.race([reply, expiry]).finally(() => clearTimeout(timer));
  };
  const run = async (keys: string[], args: string[]): Promise<number[]> => {
    try {
      return (await send(['EVALSHA', LUA_SHA, String(keys.length), ...keys, ...args])) as number[];
    } catch (err) {
      if (!String((err as Error).message).includes('NOSCRIPT')) throw err;
      return (await send(['EVAL', LUA, String(keys.length), ...keys, ...args])) as number[];
    }
  };
  return {
    async consume(key, rule, cost = 1) {
      // One hash tag per key keeps both keys in one Cluster slot.
      const tag = `${prefix}{${key}}`;
      const member = `${process.pid}:${Date.now()}:${counter++}:${Math.random().toString(36).slice(2)}`;
      const [allowed, tokensMilli, count, retryMs, resetMs, nowMs] = await run(
        [`${tag}:b`, `${tag}:w`],
        [String(rule.limit), String(rule.burst), String(rule.windowSeconds * MS_PER_SECOND), String(cost), member, String(now())],
      );
      return toDecision({ allowed: allowed!, tokensMilli: tokensMilli!, count: count!, retryMs: retryMs!, resetMs: resetMs!, nowMs: nowMs! }, rule);
    },
    async close() {},
  };
}

/** The same algorithm in process memory: the embedded default and the read fallback when Redis is down. */
export function createMemoryLimiter(now: () => number = () => Date.now()): RateLimiter {
  const buckets = new Map<string, { tokens: number; ts: number; log: number[] }>();
  return {
    async consume(key, rule, cost = 1) {
      const t = now();
      const windowMs = rule.windowSeconds * MS_PER_SECOND;
      const cap = rule.burst * TOKEN;
      const state = buckets.get(key) ?? { tokens: cap, ts: t, log: [] };
      let tokens = state.tokens;
      if (t > state.ts) tokens = Math.min(cap, tokens + Math.floor(((t - state.ts) * rule.limit * TOKEN) / windowMs));
      const log = state.log.filter((at) => at > t - windowMs);
      let allowed = 0;
      if (cost > 0 && tokens >= TOKEN && log.length < rule.limit) {
        allowed = 1;
        tokens -= TOKEN;
        log.push(t);
      }
      let retry = 0;
      if (allowed === 0) {
        if (tokens < TOKEN) retry = Math.ceil(((TOKEN - tokens) * windowMs) / (rule.limit * TOKEN));
        if (log.length >= rule.limit) retry = Math.max(retry, log[log.length - rule.limit]! + windowMs - t);
      }
      const reset = Math.ceil(((cap - tokens) * windowMs) / (rule.limit * TOKEN));
      if (cost > 0) {
        buckets.set(key, { tokens, ts: t, log });
        if (buckets.size > 100_000) buckets.delete(buckets.keys().next().value as string);
      }
      return toDecision({ allowed, tokensMilli: tokens, count: log.length, retryMs: retry, resetMs: reset, nowMs: t }, rule);
    },
    async close() {
      buckets.clear();
    },
  };
}
