// The policy's rules as one pure function (contract §9): what a live write evaluates under the policy lock, what a
// shadow policy evaluates beside it and what a replay evaluates over history. One copy of the rules, so a replay of
// the live policy reproduces every live decision by construction (test/ledger/policy-replay.property.test.ts).
import type { ErrorCode } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import type { LockedUsage, PolicyRow } from '../../db/repositories/policy.repository.js';
import { USD_DECIMALS } from './ledger.js';
import type { ApprovalNeed } from './approval-rules.js';
import { COOLDOWN_BLOCK_SECONDS, type Policy, type PolicyRequest } from './policy-document.js';

/** The policy key that decided a refusal (`policy`: the agent has none; null when allowed). */
export type PolicyKey =
  | 'policy'
  | 'operation_types'
  | 'allowed_assets'
  | 'allowed_recipients'
  | 'allowed_protocols'
  | 'max_slippage_bps'
  | 'per_tx_usd'
  | 'max_txs_per_period'
  | 'per_period_usd'
  | 'lifetime_usd'
  | 'max_ltv_bps'
  | 'tx_cooldown_blocks'
  | 'max_swaps_per_period'
  | 'fail_on_zero_price';

/** The policy row locked by this transaction, with the usage its caps need and when it was read (PolicyService.lock). */
export interface LockedPolicy {
  row: PolicyRow | undefined;
  usage: LockedUsage;
  /** The clock when the lock was taken: the periods of the usage sums are the ones containing it. */
  at: Date;
}

/** `approval`: allowed, but the owner must approve it first (issue 27; set by the live write path, not by the rules). */
export type RuleDecision = { allowed: true; key: null; approval?: ApprovalNeed } | { allowed: false; code: ErrorCode; message: string; details: Record<string, unknown>; key: PolicyKey };

const usd = (units: bigint) => formatAmount(units, USD_DECIMALS);
const listed = (list: string[] | 'all' | undefined, value: string): boolean => list === undefined || list === 'all' || list.includes(value);
const deny = (key: PolicyKey, code: ErrorCode, message: string, details: Record<string, unknown> = {}): RuleDecision => ({ allowed: false, code, message, details, key });

/** Which usage sums a policy's caps need (the lock reads only these). */
export function usageNeeds(p: Policy | null): { period: boolean; lifetime: boolean; last: boolean } {
  return {
    period: p !== null && (p.per_period_usd !== undefined || p.max_txs_per_period !== undefined || p.max_swaps_per_period !== undefined),
    lifetime: p?.lifetime_usd !== undefined,
    last: p?.tx_cooldown_blocks !== undefined,
  };
}

/**
 * Decides `req` under `p` (null: the agent has no policy, every operation is denied) at `at` (the lock's time) given
 * the usage counted before it: the period's sums (in `p.period`'s window), the lifetime's and the last counted
 * operation's time, each needed only when `p` caps it.
 */
export function decidePolicy(p: Policy | null, req: PolicyRequest, usage: LockedUsage, at: Date): RuleDecision {
  if (!p) return deny('policy', 'permission_not_granted', 'the agent has no policy: every operation is denied by default', { operation_type: req.type });
  if (!listed(p.operation_types, req.type) || (Array.isArray(p.operation_types) && p.operation_types.length === 0)) {
    return deny('operation_types', 'permission_not_granted', `operation type ${req.type} is not allowed for this agent`, { operation_type: req.type });
  }
  if (req.asset && !listed(p.allowed_assets, req.asset)) return deny('allowed_assets', 'asset_not_allowed', `asset ${req.asset} is not allowed for this agent`, { asset: req.asset });
  if (req.recipient && p.allowed_recipients === undefined && req.type === 'payment' && req.recipient.ids.length === 0) {
    // No list: approved payees only (Hightop's rule; issue 26 item 2): the owner's recipients and trusted destinations.
    return deny(
      'allowed_recipients',
      'recipient_not_allowed',
      'the policy pays approved payees only (a recipient or a confirmed trusted destination the owner added); "allowed_recipients": "all" allows any address',
      { recipient: req.recipient.address, rule: 'approved_payees_only' },
    );
  }
  if (req.recipient && p.allowed_recipients !== undefined && p.allowed_recipients !== 'all') {
    const allow = p.allowed_recipients.map((x) => x.toLowerCase());
    const candidates = [...req.recipient.ids, ...(req.recipient.address ? [req.recipient.address] : [])].map((x) => x.toLowerCase());
    if (!candidates.some((c) => allow.includes(c)))
      return deny('allowed_recipients', 'recipient_not_allowed', 'the recipient is not in the allowed recipients', { recipient: req.recipient.address ?? req.recipient.ids[0] ?? null });
  }
  if (req.protocol && !listed(p.allowed_protocols, req.protocol))
    return deny('allowed_protocols', 'protocol_not_allowed', `protocol ${req.protocol} is not allowed for this agent`, { protocol: req.protocol });
  if (req.slippageBps != null && p.max_slippage_bps !== undefined && req.slippageBps > p.max_slippage_bps) {
    return deny('max_slippage_bps', 'limit_exceeded', `slippage of ${req.slippageBps} bps exceeds the cap of ${p.max_slippage_bps} bps`, {
      limit: 'max_slippage_bps',
      cap: p.max_slippage_bps,
      requested: req.slippageBps,
    });
  }
  if (req.usdE8 != null) {
    const value = req.usdE8;
    if (value === 0n && p.fail_on_zero_price)
      return deny('fail_on_zero_price', 'price_stale', 'the operation is valued at 0 USD (no usable price) and the policy sets fail_on_zero_price', {
        limit: 'fail_on_zero_price',
        asset: req.asset ?? null,
      });
    if (p.tx_cooldown_blocks && usage.lastCountedAt) {
      const waitMs = usage.lastCountedAt.getTime() + p.tx_cooldown_blocks * COOLDOWN_BLOCK_SECONDS * 1000 - at.getTime();
      if (waitMs > 0) {
        const retryAfter = Math.ceil(waitMs / 1000);
        return deny('tx_cooldown_blocks', 'cooldown_active', `the policy's cooldown of ${p.tx_cooldown_blocks} blocks has not passed since the last operation: retry in ${retryAfter} s`, {
          limit: 'tx_cooldown_blocks',
          cooldown_blocks: p.tx_cooldown_blocks,
          retry_after_seconds: retryAfter,
        });
      }
    }
    if (req.type === 'conversion' && p.max_swaps_per_period !== undefined) {
      const used = usage.period;
      if (!used) throw new Error('the period usage was not read with the policy lock');
      if (used.swaps + 1 > p.max_swaps_per_period)
        return deny('max_swaps_per_period', 'limit_exceeded', `the ${p.period} conversion count cap of ${p.max_swaps_per_period} is reached`, {
          limit: 'max_swaps_per_period',
          cap: p.max_swaps_per_period,
          used: used.swaps,
        });
    }
    if (p.per_tx_usd !== undefined && value > p.per_tx_usd)
      return deny('per_tx_usd', 'limit_exceeded', `the operation's ${usd(value)} USD exceeds the per-transaction cap of ${usd(p.per_tx_usd)} USD`, {
        limit: 'per_tx_usd',
        cap: usd(p.per_tx_usd),
        requested: usd(value),
      });
    if (p.per_period_usd !== undefined || p.max_txs_per_period !== undefined) {
      const used = usage.period;
      if (!used) throw new Error('the period usage was not read with the policy lock');
      if (p.max_txs_per_period !== undefined && used.count + 1 > p.max_txs_per_period) {
        return deny('max_txs_per_period', 'limit_exceeded', `the ${p.period} transaction count cap of ${p.max_txs_per_period} is reached`, {
          limit: 'max_txs_per_period',
          cap: p.max_txs_per_period,
          used: used.count,
        });
      }
      if (p.per_period_usd !== undefined && used.usd_e8 + value > p.per_period_usd) {
        return deny('per_period_usd', 'limit_exceeded', `the operation would exceed the ${p.period} cap of ${usd(p.per_period_usd)} USD`, {
          limit: 'per_period_usd',
          cap: usd(p.per_period_usd),
          used: usd(used.usd_e8),
          requested: usd(value),
        });
      }
    }
    if (p.lifetime_usd !== undefined) {
      const used = usage.lifetime;
      if (!used) throw new Error('the lifetime usage was not read with the policy lock');
      if (used.usd_e8 + value > p.lifetime_usd)
        return deny('lifetime_usd', 'limit_exceeded', `the operation would exceed the lifetime cap of ${usd(p.lifetime_usd)} USD`, {
          limit: 'lifetime_usd',
          cap: usd(p.lifetime_usd),
          used: usd(used.usd_e8),
          requested: usd(value),
        });
    }
  }
  if (req.ltvBps != null && p.max_ltv_bps !== undefined && req.ltvBps > p.max_ltv_bps) {
    return deny('max_ltv_bps', 'ltv_too_high', `the resulting LTV of ${req.ltvBps} bps exceeds the cap of ${p.max_ltv_bps} bps`, { limit: 'max_ltv_bps', cap: p.max_ltv_bps, requested: req.ltvBps });
  }
  return { allowed: true, key: null };
}

/**
 * What a live evaluation saw, stored with its operation (`operations.policy_facts`) so a replay decides on exactly
 * the same inputs: the request (USD value at the price of the time included), when the lock was taken, whether the
 * operation counts toward the caps, and the outcome with its deciding key. `skipped`: the owner acted out of band,
 * no policy was evaluated.
 */
export interface PolicyFacts {
  v: 1;
  skipped?: true;
  at: string;
  type: string;
  asset: string | null;
  usd_e8: string | null;
  counts: boolean;
  recipient: { ids: string[]; address: string | null } | null;
  protocol: string | null;
  slippage_bps: number | null;
  ltv_bps: number | null;
  allowed: boolean;
  code: string | null;
  key: PolicyKey | null;
}

export function factsOf(req: PolicyRequest, decision: RuleDecision, at: Date, counts: boolean, skipped = false): PolicyFacts {
  return {
    v: 1,
    ...(skipped ? { skipped: true as const } : {}),
    at: at.toISOString(),
    type: req.type,
    asset: req.asset ?? null,
    usd_e8: req.usdE8 == null ? null : req.usdE8.toString(),
    counts,
    recipient: req.recipient ?? null,
    protocol: req.protocol ?? null,
    slippage_bps: req.slippageBps ?? null,
    ltv_bps: req.ltvBps ?? null,
    allowed: decision.allowed,
    code: decision.allowed ? null : decision.code,
    key: decision.key,
  };
}

export function requestOf(f: PolicyFacts): PolicyRequest {
  return { type: f.type, asset: f.asset, usdE8: f.usd_e8 === null ? null : BigInt(f.usd_e8), recipient: f.recipient, protocol: f.protocol, slippageBps: f.slippage_bps, ltvBps: f.ltv_bps };
}
