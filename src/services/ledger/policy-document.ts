// The policy document (contract §9): its parsed shape, the JSON file format (amounts as decimal strings), the calendar
// periods its caps count in. Pure: the live evaluation, shadow policies and replays read the same parse.
import type { Schema } from '../../lib/contract.js';
import { OPERATION_TYPES } from '../../../generated/vocabulary.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount, parseAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import type { ApprovalPolicyKeys } from './approval-rules.js';

export type Period = 'day' | 'week' | 'month';

/**
 * The stored, validated policy: caps in USD base units (8 decimals). Absent cap = no cap; absent list = unrestricted,
 * except `allowed_recipients`: absent = approved payees only for payments (issue 26, item 2).
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
  /** Blocks (COOLDOWN_BLOCK_SECONDS each) that must pass after a counted operation before the next (Hightop's key). */
  tx_cooldown_blocks?: number;
  /** Refuse an operation valued at 0 USD (no usable price): `price_stale`. Absent = false. */
  fail_on_zero_price?: boolean;
  /** Conversions per period. */
  max_swaps_per_period?: number;
  /** One-off payments worth less than this (USD, 8 decimals) clear at once; the rest wait out the review delay (Hightop's "instant threshold"). Absent: none is instant while a review delay is set. */
  one_off_instant_threshold_usd?: bigint;
  /** Seconds a one-off payment at or above the instant threshold waits before it can be claimed, owner-cancellable meanwhile (Hightop's "review delay"). Absent or 0: no review. */
  one_off_review_delay_seconds?: number;
}

/** The block time a cooldown is counted in: Base's 2 s blocks (Hightop counts `tx_cooldown_blocks` on Base). */
export const COOLDOWN_BLOCK_SECONDS = 2;

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

/** Every key of the policy file besides operation_types and period, in the order policyToJson writes them. */
const STORED_KEYS = [
  'per_tx_usd',
  'per_period_usd',
  'lifetime_usd',
  'max_txs_per_period',
  'allowed_assets',
  'max_slippage_bps',
  'max_ltv_bps',
  'allowed_recipients',
  'allowed_protocols',
  'tx_cooldown_blocks',
  'fail_on_zero_price',
  'max_swaps_per_period',
  'approval_threshold_usd',
  'approve_new_payees',
  'approval_ttl_seconds',
  'one_off_instant_threshold_usd',
  'one_off_review_delay_seconds',
] as const satisfies readonly (keyof Policy)[];

/** The keys held in USD base units (written as decimal strings). */
const USD_KEYS: ReadonlySet<string> = new Set(['per_tx_usd', 'per_period_usd', 'lifetime_usd', 'approval_threshold_usd', 'one_off_instant_threshold_usd']);

export function policyToJson(p: Policy): Record<string, unknown> {
  const out: Record<string, unknown> = { operation_types: p.operation_types, period: p.period };
  for (const k of STORED_KEYS) {
    const v = p[k];
    if (v !== undefined) out[k] = USD_KEYS.has(k) ? usd(v as bigint) : v;
  }
  return out;
}

export function parsePolicy(input: unknown): Policy {
  const problems: string[] = [];
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ApiError('validation_failed', 'policy must be a JSON object');
  const raw = input as Record<string, unknown>;
  const known = new Set<string>(['operation_types', 'period', ...STORED_KEYS]);
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
  // "approved" (what /self/limits shows for no list) is the same as no list: approved payees only.
  if (raw.allowed_recipients !== 'approved') set('allowed_recipients', list('allowed_recipients'));
  set('allowed_protocols', list('allowed_protocols'));
  set('tx_cooldown_blocks', int('tx_cooldown_blocks', 4_294_967_295));
  set('max_swaps_per_period', int('max_swaps_per_period'));
  if (raw.fail_on_zero_price !== undefined) {
    if (typeof raw.fail_on_zero_price === 'boolean') policy.fail_on_zero_price = raw.fail_on_zero_price;
    else problems.push('fail_on_zero_price must be true or false');
  }
  // Approvals (issue 27): above a USD value, or a first payee, the owner approves; the wait is bounded.
  set('approval_threshold_usd', money('approval_threshold_usd'));
  if (raw.approve_new_payees !== undefined && typeof raw.approve_new_payees !== 'boolean') problems.push('approve_new_payees must be true or false');
  else set('approve_new_payees', raw.approve_new_payees as boolean | undefined);
  // At least a minute (an owner must have time to answer), at most 30 days (a hold does not wait for ever).
  const ttl = int('approval_ttl_seconds', 30 * 86_400);
  if (ttl !== undefined && ttl < 60) problems.push('approval_ttl_seconds must be at least 60');
  else set('approval_ttl_seconds', ttl);
  // One-off payments (issue 26, item 3): the review delay is bounded as the agent's own unlock delay (30 days).
  set('one_off_instant_threshold_usd', money('one_off_instant_threshold_usd'));
  set('one_off_review_delay_seconds', int('one_off_review_delay_seconds', 30 * 86_400));
  if (problems.length > 0) throw new ApiError('validation_failed', `invalid policy: ${problems.join('; ')}`, { problems });
  return policy;
}

/**
 * parsePolicy for the write path, remembered by the stored JSON's text: every write of an agent parses the same policy
 * again otherwise. One cache per policy service (createPolicyService builds it); bounded (cleared when full); a
 * Policy is never mutated after parsing.
 */
export function createParsedPolicyCache(): (stored: Record<string, unknown>) => Policy {
  const parsedCache = new Map<string, Policy>();
  return (stored) => {
    const text = JSON.stringify(stored);
    let p = parsedCache.get(text);
    if (!p) {
      p = parsePolicy(stored);
      if (parsedCache.size >= 1000) parsedCache.clear();
      parsedCache.set(text, p);
    }
    return p;
  };
}
