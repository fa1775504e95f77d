// Per-agent policy (contract §9): default deny, allow-lists, USD caps and counts evaluated under a row lock.
import type { Schema } from '../../lib/contract.js';
import { OPERATION_TYPES } from '../../../generated/vocabulary.js';
import type { Db } from '../../db/knex.js';
import { findPolicy, lockPolicy, sumUsageSinceAndLifetime, upsertPolicy, type LockedUsage, type PolicyRow } from '../../db/repositories/policy.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError, type ErrorCode } from '../../lib/errors.js';
import { formatAmount, parseAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import { approvalNeed, DEFAULT_APPROVAL_TTL_SECONDS, type ApprovalNeed, type ApprovalPolicyKeys } from './approval-rules.js';

export type { ApprovalNeed } from './approval-rules.js';

export type Period = 'day' | 'week' | 'month';

/**
 * The stored, validated policy: caps in USD base units (8 decimals). Absent cap = no cap; absent list = unrestricted.
 * The approval keys of issue 27 are in approval-rules.ts.
 */
export interface Policy extends ApprovalPolicyKeys {
  /** Checked against the document's OperationType when parsed. */
  operation_types: Schema<'OperationType'>[] | 'all';
  per_tx_usd?: bigint;
  per_period_usd?: bigint;
  period: Period;
  lifetime_usd?: bigint;
  max_txs_per_period?: number;
  allowed_assets?: string[] | 'all';
  max_slippage_bps?: number;
  max_ltv_bps?: number;
  allowed_recipients?: string[] | 'all';
  allowed_protocols?: string[] | 'all';
}

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

export type PolicyDecision = { allowed: true; approval?: ApprovalNeed } | { allowed: false; code: ErrorCode; message: string; details: Record<string, unknown> };

/** The policy row locked by this transaction, with the usage its caps need (PolicyService.lock). */
export interface LockedPolicy {
  row: PolicyRow | undefined;
  usage: LockedUsage;
}

export type PolicyLimits = Omit<Schema<'LimitsResponse'>, 'ok'>;
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

/** Start of the UTC calendar period containing `at` (weeks start on Monday). */
export function periodStart(period: Period, at: Date): Date {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  if (period === 'month') return new Date(Date.UTC(y, m, 1));
  if (period === 'week') {
    const dow = (at.getUTCDay() + 6) % 7;
    return new Date(Date.UTC(y, m, d - dow));
  }
  return new Date(Date.UTC(y, m, d));
}

const usd = (units: bigint) => formatAmount(units, USD_DECIMALS);

export function policyToJson(p: Policy): Record<string, unknown> {
  const out: Record<string, unknown> = { operation_types: p.operation_types, period: p.period };
  if (p.per_tx_usd !== undefined) out.per_tx_usd = usd(p.per_tx_usd);
  if (p.per_period_usd !== undefined) out.per_period_usd = usd(p.per_period_usd);
  if (p.lifetime_usd !== undefined) out.lifetime_usd = usd(p.lifetime_usd);
  for (const k of ['max_txs_per_period', 'allowed_assets', 'max_slippage_bps', 'max_ltv_bps', 'allowed_recipients', 'allowed_protocols'] as const) {
    if (p[k] !== undefined) out[k] = p[k];
  }
  if (p.approval_threshold_usd !== undefined) out.approval_threshold_usd = usd(p.approval_threshold_usd);
  if (p.approve_new_payees !== undefined) out.approve_new_payees = p.approve_new_payees;
  if (p.approval_ttl_seconds !== undefined) out.approval_ttl_seconds = p.approval_ttl_seconds;
  return out;
}

/** Every key of the policy, null for an absent cap and "all" for an absent allow-list (the /self/limits view). */
export function effectiveLimits(p: Policy | null): Schema<'Limits'> {
  const cap = (v: bigint | undefined) => (v === undefined ? null : usd(v));
  return {
    operation_types: p?.operation_types ?? [],
    per_tx_usd: cap(p?.per_tx_usd),
    per_period_usd: cap(p?.per_period_usd),
    period: p ? p.period : null,
    lifetime_usd: cap(p?.lifetime_usd),
    max_txs_per_period: p?.max_txs_per_period ?? null,
    max_slippage_bps: p?.max_slippage_bps ?? null,
    max_ltv_bps: p?.max_ltv_bps ?? null,
    allowed_assets: p?.allowed_assets ?? 'all',
    allowed_recipients: p?.allowed_recipients ?? 'all',
    allowed_protocols: p?.allowed_protocols ?? 'all',
    approval_threshold_usd: cap(p?.approval_threshold_usd),
    approve_new_payees: p?.approve_new_payees ?? false,
    approval_ttl_seconds: p?.approval_ttl_seconds ?? DEFAULT_APPROVAL_TTL_SECONDS,
  };
}

/**
 * /self/limits in Hightop's shape (issue 26, item 5), beside `limits` and `usage`: null is no cap, and
 * `operation_types` is always a list (`"all"` expanded), `cannot` the types it leaves out.
 */
export function hightopLimits(p: Policy | null, limits: Schema<'Limits'>, inPeriod: { usd_e8: bigint; count: number; swaps: number }, lifetime: { usd_e8: bigint; count: number }): Omit<PolicyLimits, 'limits' | 'usage'> {
  const granted: string[] = p?.operation_types === 'all' ? [...OPERATION_TYPES] : (p?.operation_types ?? []);
  const policyExtra = (p ?? {}) as { tx_cooldown_blocks?: number; fail_on_zero_price?: boolean; max_swaps_per_period?: number };
  return {
    spend_limits: {
      per_tx_usd: limits.per_tx_usd,
      per_period_usd: limits.per_period_usd,
      lifetime_usd: limits.lifetime_usd,
      max_txs_per_period: limits.max_txs_per_period,
      tx_cooldown_blocks: policyExtra.tx_cooldown_blocks ?? null,
      fail_on_zero_price: policyExtra.fail_on_zero_price ?? false,
    },
    swap_limits: { max_slippage_bps: limits.max_slippage_bps, max_swaps_per_period: policyExtra.max_swaps_per_period ?? null },
    permissions: { operation_types: OPERATION_TYPES.filter((t) => granted.includes(t)), cannot: OPERATION_TYPES.filter((t) => !granted.includes(t)) },
    current_usage: { txs_in_period: inPeriod.count, spent_in_period_usd: usd(inPeriod.usd_e8), swaps_in_period: inPeriod.swaps, total_txs: lifetime.count, total_spent_usd: usd(lifetime.usd_e8) },
  };
}

export function parsePolicy(input: unknown): Policy {
  const problems: string[] = [];
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ApiError('validation_failed', 'policy must be a JSON object');
  const raw = input as Record<string, unknown>;
  const known = new Set(['operation_types', 'per_tx_usd', 'per_period_usd', 'period', 'lifetime_usd', 'max_txs_per_period', 'allowed_assets', 'max_slippage_bps', 'max_ltv_bps', 'allowed_recipients', 'allowed_protocols', 'approval_threshold_usd', 'approve_new_payees', 'approval_ttl_seconds']);
  for (const k of Object.keys(raw)) if (!known.has(k)) problems.push(`unknown key ${k}`);

  const list = (k: string, allowed?: readonly string[]): string[] | 'all' | undefined => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (v === 'all') return 'all';
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
      problems.push(`${k} must be an array of strings or "all"`);
      return undefined;
    }
    if (allowed) for (const x of v as string[]) if (!allowed.includes(x)) problems.push(`${k}: unknown value ${x}`);
    return v as string[];
  };
  const money = (k: string): bigint | undefined => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') {
      problems.push(`${k} must be a decimal string`);
      return undefined;
    }
    try {
      return parseAmount(v, USD_DECIMALS);
    } catch {
      problems.push(`${k} must be a non-negative decimal string with at most ${USD_DECIMALS} decimals`);
      return undefined;
    }
  };
  const int = (k: string, max = Number.MAX_SAFE_INTEGER): number | undefined => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) {
      problems.push(`${k} must be an integer in [0, ${max}]`);
      return undefined;
    }
    return v;
  };

  const operationTypes = list('operation_types', OPERATION_TYPES);
  const period = raw.period ?? 'day';
  if (!['day', 'week', 'month'].includes(period as string)) problems.push('period must be day, week or month');
  const policy: Policy = { operation_types: (operationTypes ?? []) as Policy['operation_types'], period: period as Period };
  const set = <K extends keyof Policy>(k: K, v: Policy[K] | undefined) => {
    if (v !== undefined) policy[k] = v;
  };
  set('per_tx_usd', money('per_tx_usd'));
  set('per_period_usd', money('per_period_usd'));
  set('lifetime_usd', money('lifetime_usd'));
  set('max_txs_per_period', int('max_txs_per_period'));
  set('allowed_assets', list('allowed_assets'));
  set('max_slippage_bps', int('max_slippage_bps', 10_000));
  set('max_ltv_bps', int('max_ltv_bps', 10_000));
  set('allowed_recipients', list('allowed_recipients'));
  set('allowed_protocols', list('allowed_protocols'));
  set('approval_threshold_usd', money('approval_threshold_usd'));
  if (raw.approve_new_payees !== undefined && typeof raw.approve_new_payees !== 'boolean') problems.push('approve_new_payees must be true or false');
  else set('approve_new_payees', raw.approve_new_payees as boolean | undefined);
  // At least a minute (an owner must have time to answer), at most 30 days (a hold does not wait for ever).
  const ttl = int('approval_ttl_seconds', 30 * 86_400);
  if (ttl !== undefined && ttl < 60) problems.push('approval_ttl_seconds must be at least 60');
  else set('approval_ttl_seconds', ttl);
  if (problems.length > 0) throw new ApiError('validation_failed', `invalid policy: ${problems.join('; ')}`, { problems });
  return policy;
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
      const approval = approvalNeed(p, req);
      return approval ? { allowed: true, approval } : { allowed: true };
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
