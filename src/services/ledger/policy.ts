// Per-agent policy (contract §9): default deny, allow-lists, USD caps and counts evaluated under a row lock.
import type { Db } from '../../db/knex.js';
import { findPolicy, lockPolicy, sumUsageSinceAndLifetime, upsertPolicy, type LockedUsage, type PolicyRow } from '../../db/repositories/policy.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { ErrorCode } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import { COOLDOWN_BLOCK_SECONDS, effectiveLimits, hightopLimits, parsePolicy, periodStart, policyToJson, type Period, type Policy, type PolicyLimits } from './policy-format.js';

export { effectiveLimits, hightopLimits, parsePolicy, periodStart, policyToJson, type Period, type Policy, type PolicyLimits };

export interface PolicyRequest {
  type: string;
  asset?: string | null;
  /** USD value (8 decimals) counted toward caps; null for operations that move no money. */
  usdE8?: bigint | null;
  /** Recipient identity: the recipient or destination id and/or the address; any listed one allows. */
  recipient?: { ids: string[]; address: string | null } | null;
  protocol?: string | null;
  slippageBps?: number | null;
  ltvBps?: number | null;
}

const usd = (units: bigint) => formatAmount(units, USD_DECIMALS);

export type PolicyDecision = { allowed: true } | { allowed: false; code: ErrorCode; message: string; details: Record<string, unknown> };

/** The policy row locked by this transaction, with the usage its caps need (PolicyService.lock). */
export interface LockedPolicy {
  row: PolicyRow | undefined;
  usage: LockedUsage;
}

/** The caps and usage alone (what the chain mirror reads from an account in evm mode). */
export type CoreLimits = Pick<PolicyLimits, 'limits' | 'usage'>;

/**
 * Where the policy is authoritative on chain (issue 24, agent accounts): `onSet` relays the owner's signed policy to
 * the agent's account before the database mirrors it (throws when it cannot), `limits` reads the account's caps and
 * usage (undefined: the agent's wallet is not an account).
 */
export interface PolicyChainMirror {
  onSet(db: Db, agentId: string, policy: Policy, signature?: unknown): Promise<void>;
  limits(db: Db, agentId: string, mirror: CoreLimits): Promise<CoreLimits | undefined>;
  /** Where the database's mirror differs from the accounts (agentctl chain reconcile). */
  drift(db: Db, agentId?: string): Promise<Record<string, unknown>[]>;
}

export interface PolicyService {
  /** Validates the JSON policy file format (amounts as decimal strings); throws `validation_failed` listing problems. */
  parse(input: unknown): Policy;
  /** `signature`: the owner's EIP-712 signature of the proposed policy (evm mode, agent accounts). */
  set(db: Db, agentId: string, input: unknown, signature?: unknown): Promise<Policy>;
  /** Installs the chain mirror (evm mode with agent accounts). */
  mirrorOnChain(mirror: PolicyChainMirror): void;
  /** Policy drift between the database and the agents' accounts; empty without agent accounts. */
  chainDrift(db: Db, agentId?: string): Promise<Record<string, unknown>[]>;
  allowAll(db: Db, agentId: string): Promise<Policy>;
  get(db: Db, agentId: string): Promise<Policy | null>;
  /**
   * THE policy lock, which every money path takes first (payments, conversions, earn, borrow): locks the agent's
   * policy row for the rest of the write transaction and reads the usage its caps need (one round trip).
   */
  lock(trx: Db, agentId: string): Promise<LockedPolicy>;
  /** Locks the agent's policy row (or takes the `locked` one this transaction already holds), then decides. Must run inside the write transaction. */
  evaluate(trx: Db, agentId: string, request: PolicyRequest, locked?: LockedPolicy): Promise<PolicyDecision>;
  limits(db: Db, agentId: string): Promise<PolicyLimits>;
}

function fromStored(stored: Record<string, unknown>): Policy {
  return parsePolicy(stored);
}

/**
 * fromStored for the write path, remembered by the stored JSON's text: every write of an agent parses the same
 * policy again otherwise. Bounded (cleared when full); a Policy is never mutated after parsing.
 */
const parsedCache = new Map<string, Policy>();
function parsedPolicy(stored: Record<string, unknown>): Policy {
  const text = JSON.stringify(stored);
  let p = parsedCache.get(text);
  if (!p) {
    p = fromStored(stored);
    if (parsedCache.size >= 1000) parsedCache.clear();
    parsedCache.set(text, p);
  }
  return p;
}

const listed = (list: string[] | 'all' | undefined, value: string): boolean => list === undefined || list === 'all' || list.includes(value);

export function createPolicyService(deps: { clock: Clock }): PolicyService {
  const { clock } = deps;
  const deny = (code: ErrorCode, message: string, details: Record<string, unknown> = {}): PolicyDecision => ({ allowed: false, code, message, details });
  let chainMirror: PolicyChainMirror | null = null;

  const service: PolicyService = {
    parse: parsePolicy,

    async set(db, agentId, input, signature) {
      const policy = parsePolicy(input);
      // The chain first: the database mirrors what the account holds, never the other way round.
      await chainMirror?.onSet(db, agentId, policy, signature);
      await upsertPolicy(db, agentId, policyToJson(policy), clock.now());
      return policy;
    },

    mirrorOnChain(mirror) {
      chainMirror = mirror;
    },

    chainDrift: async (db, agentId) => (chainMirror ? chainMirror.drift(db, agentId) : []),

    allowAll: (db, agentId) => service.set(db, agentId, { operation_types: 'all', allowed_assets: 'all', allowed_recipients: 'all', allowed_protocols: 'all' }),

    async get(db, agentId) {
      const row = await findPolicy(db, agentId);
      return row ? fromStored(row.policy) : null;
    },

    async lock(trx, agentId) {
      const now = clock.now();
      // The lock and the usage sums its caps need in one round trip, the sums after the lock (policy.repository lockPolicy).
      return lockPolicy(trx, agentId, { day: periodStart('day', now), week: periodStart('week', now), month: periodStart('month', now) });
    },

    async evaluate(trx, agentId, req, locked) {
      const { row, usage } = locked ?? (await service.lock(trx, agentId));
      if (!row) return deny('permission_not_granted', 'the agent has no policy: every operation is denied by default', { operation_type: req.type });
      const p = parsedPolicy(row.policy);
      if (!listed(p.operation_types, req.type) || (Array.isArray(p.operation_types) && p.operation_types.length === 0)) {
        return deny('permission_not_granted', `operation type ${req.type} is not allowed for this agent`, { operation_type: req.type });
      }
      if (req.asset && !listed(p.allowed_assets, req.asset)) return deny('asset_not_allowed', `asset ${req.asset} is not allowed for this agent`, { asset: req.asset });
      if (req.recipient && p.allowed_recipients === undefined && req.type === 'payment' && req.recipient.ids.length === 0) {
        // No list: approved payees only (Hightop's rule; issue 26 item 2): the owner's recipients and trusted destinations.
        return deny('recipient_not_allowed', 'the policy pays approved payees only (a recipient or a confirmed trusted destination the owner added); "allowed_recipients": "all" allows any address', { recipient: req.recipient.address, rule: 'approved_payees_only' });
      }
      if (req.recipient && p.allowed_recipients !== undefined && p.allowed_recipients !== 'all') {
        const allow = p.allowed_recipients.map((x) => x.toLowerCase());
        const candidates = [...req.recipient.ids, ...(req.recipient.address ? [req.recipient.address] : [])].map((x) => x.toLowerCase());
        if (!candidates.some((c) => allow.includes(c))) return deny('recipient_not_allowed', 'the recipient is not in the allowed recipients', { recipient: req.recipient.address ?? req.recipient.ids[0] ?? null });
      }
      if (req.protocol && !listed(p.allowed_protocols, req.protocol)) return deny('protocol_not_allowed', `protocol ${req.protocol} is not allowed for this agent`, { protocol: req.protocol });
      if (req.slippageBps != null && p.max_slippage_bps !== undefined && req.slippageBps > p.max_slippage_bps) {
        return deny('limit_exceeded', `slippage of ${req.slippageBps} bps exceeds the cap of ${p.max_slippage_bps} bps`, { limit: 'max_slippage_bps', cap: p.max_slippage_bps, requested: req.slippageBps });
      }
      if (req.usdE8 != null) {
        const value = req.usdE8;
        if (value === 0n && p.fail_on_zero_price) return deny('price_stale', 'the operation is valued at 0 USD (no usable price) and the policy sets fail_on_zero_price', { limit: 'fail_on_zero_price', asset: req.asset ?? null });
        if (p.tx_cooldown_blocks && usage.lastCountedAt) {
          const waitMs = usage.lastCountedAt.getTime() + p.tx_cooldown_blocks * COOLDOWN_BLOCK_SECONDS * 1000 - clock.now().getTime();
          if (waitMs > 0) {
            const retryAfter = Math.ceil(waitMs / 1000);
            return deny('cooldown_active', `the policy's cooldown of ${p.tx_cooldown_blocks} blocks has not passed since the last operation: retry in ${retryAfter} s`, { limit: 'tx_cooldown_blocks', cooldown_blocks: p.tx_cooldown_blocks, retry_after_seconds: retryAfter });
          }
        }
        if (req.type === 'conversion' && p.max_swaps_per_period !== undefined) {
          const used = usage.period;
          if (!used) throw new Error('the period usage was not read with the policy lock');
          if (used.swaps + 1 > p.max_swaps_per_period) return deny('limit_exceeded', `the ${p.period} conversion count cap of ${p.max_swaps_per_period} is reached`, { limit: 'max_swaps_per_period', cap: p.max_swaps_per_period, used: used.swaps });
        }
        if (p.per_tx_usd !== undefined && value > p.per_tx_usd) return deny('limit_exceeded', `the operation's ${usd(value)} USD exceeds the per-transaction cap of ${usd(p.per_tx_usd)} USD`, { limit: 'per_tx_usd', cap: usd(p.per_tx_usd), requested: usd(value) });
        if (p.per_period_usd !== undefined || p.max_txs_per_period !== undefined) {
          const used = usage.period;
          if (!used) throw new Error('the period usage was not read with the policy lock');
          if (p.max_txs_per_period !== undefined && used.count + 1 > p.max_txs_per_period) {
            return deny('limit_exceeded', `the ${p.period} transaction count cap of ${p.max_txs_per_period} is reached`, { limit: 'max_txs_per_period', cap: p.max_txs_per_period, used: used.count });
          }
          if (p.per_period_usd !== undefined && used.usd_e8 + value > p.per_period_usd) {
            return deny('limit_exceeded', `the operation would exceed the ${p.period} cap of ${usd(p.per_period_usd)} USD`, { limit: 'per_period_usd', cap: usd(p.per_period_usd), used: usd(used.usd_e8), requested: usd(value) });
          }
        }
        if (p.lifetime_usd !== undefined) {
          const used = usage.lifetime;
          if (!used) throw new Error('the lifetime usage was not read with the policy lock');
          if (used.usd_e8 + value > p.lifetime_usd) return deny('limit_exceeded', `the operation would exceed the lifetime cap of ${usd(p.lifetime_usd)} USD`, { limit: 'lifetime_usd', cap: usd(p.lifetime_usd), used: usd(used.usd_e8), requested: usd(value) });
        }
      }
      if (req.ltvBps != null && p.max_ltv_bps !== undefined && req.ltvBps > p.max_ltv_bps) {
        return deny('ltv_too_high', `the resulting LTV of ${req.ltvBps} bps exceeds the cap of ${p.max_ltv_bps} bps`, { limit: 'max_ltv_bps', cap: p.max_ltv_bps, requested: req.ltvBps });
      }
      return { allowed: true };
    },

    async limits(db, agentId) {
      const policy = await service.get(db, agentId);
      const now = clock.now();
      const period = policy?.period ?? 'day';
      const start = periodStart(period, now);
      const { period: inPeriod, lifetime } = await sumUsageSinceAndLifetime(db, agentId, start);
      const limits = effectiveLimits(policy);
      const mirror = { limits, usage: { period_start: start.toISOString(), period_usd: usd(inPeriod.usd_e8), period_txs: inPeriod.count, lifetime_usd: usd(lifetime.usd_e8) } };
      // evm mode: the caps and usage the account enforces, read from the chain (the database row is its mirror).
      const shown = (await chainMirror?.limits(db, agentId, mirror)) ?? mirror;
      return { ...shown, ...hightopLimits(policy, shown.limits, inPeriod, lifetime) };
    },
  };
  return service;
}
