// Per-agent policy (contract §9): default deny, allow-lists, USD caps and counts evaluated under a row lock.
import type { Schema } from '../../lib/contract.js';
import { OPERATION_TYPES } from '../../../generated/vocabulary.js';
import type { Db } from '../../db/knex.js';
import { findPolicy, lockPolicy, sumUsageSinceAndLifetime, upsertPolicy } from '../../db/repositories/policy.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { ErrorCode } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { formatAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import { approvalNeed, DEFAULT_APPROVAL_TTL_SECONDS, type ApprovalNeed } from './approval-rules.js';

export type { ApprovalNeed } from './approval-rules.js';
import { createParsedPolicyCache, parsePolicy, periodStart, policyToJson, type Policy, type PolicyRequest } from './policy-document.js';
import { createPolicyReplay, type PolicyReplayService } from './policy-replay.js';
import { decidePolicy, factsOf, type LockedPolicy, type PolicyFacts, type RuleDecision } from './policy-rules.js';
import { createShadowPolicies, type ShadowPolicyService } from './policy-shadow.js';

export { parsePolicy, periodStart, policyToJson, type Period, type Policy, type PolicyRequest } from './policy-document.js';
export type { LockedPolicy, PolicyFacts, PolicyKey, RuleDecision } from './policy-rules.js';

export type PolicyDecision = { allowed: true; approval?: ApprovalNeed } | { allowed: false; code: ErrorCode; message: string; details: Record<string, unknown> };

export type PolicyLimits = Omit<Schema<'LimitsResponse'>, 'ok'>;
/**
 * The caps and usage alone (what the chain mirror reads from an account in evm mode), with the account's exposure:
 * its remaining allowance, what a compromised server could still move (docs/CUSTODY.md); absent off chain.
 */
export type CoreLimits = Pick<PolicyLimits, 'limits' | 'usage'> & {
  exposure_usd?: string | null;
  /** The account's swap cap and swaps this period (evm mode, issue 26): shown as swap_limits and current_usage. */
  swaps?: { max_swaps_per_period: number | null; swaps_in_period: number };
};

/**
 * Where the policy is authoritative on chain (issue 24, agent accounts): `onSet` relays the owner's signed policy to
 * the agent's account before the database mirrors it (throws when it cannot), `limits` reads the account's caps and
 * usage (undefined: the agent's wallet is not an account).
 */
export interface PolicyChainMirror {
  onSet(db: Db, agentId: string, policy: Policy, signature?: unknown): Promise<void>;
  /** `policy` with `address` among its payees relayed to the account (nothing to do when the account holds it already). */
  onPayeeAdded(db: Db, agentId: string, policy: Policy, address: string, signature?: unknown): Promise<void>;
  limits(db: Db, agentId: string, mirror: CoreLimits): Promise<CoreLimits | undefined>;
  /** Where the database's mirror differs from the accounts (agentctl chain reconcile). */
  drift(db: Db, agentId?: string): Promise<Record<string, unknown>[]>;
}

export interface PolicyService extends ShadowPolicyService, PolicyReplayService {
  /** Validates the JSON policy file format (amounts as decimal strings); throws `validation_failed` listing problems. */
  parse(input: unknown): Policy;
  /** `signature`: the owner's EIP-712 signature of the proposed policy (evm mode, agent accounts). */
  set(db: Db, agentId: string, input: unknown, signature?: unknown): Promise<Policy>;
  /**
   * Before the owner adds a recipient at `address` (evm mode, agent accounts): when the policy has no
   * allowed_recipients, the account's payees are the recipients' addresses, so the owner's re-signed policy with this
   * one among them is relayed first (428 `owner_signature_required` without a signature or the development key).
   */
  addPayee(db: Db, agentId: string, address: string, signature?: unknown): Promise<void>;
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
  /**
   * A write's decision (allowed, unevaluated, when the owner acts out of band: `skip`), the facts it decided on (the
   * operation keeps them as policy_facts, so a replay decides on the same inputs), and the shadow policy's decision
   * under the same lock (recorded when it differs; it never changes this one and never throws).
   */
  decideWrite(
    trx: Db,
    write: { agentId: string; operationId: string; request: PolicyRequest; counts: boolean; skip: boolean; locked?: LockedPolicy },
  ): Promise<{ decision: RuleDecision; facts: PolicyFacts }>;
  /** evaluate, with the deciding key and the lock it decided under (what a write records and its shadow reuses). */
  decide(trx: Db, agentId: string, request: PolicyRequest, locked?: LockedPolicy): Promise<{ decision: RuleDecision; locked: LockedPolicy }>;
  limits(db: Db, agentId: string): Promise<PolicyLimits>;
  /** The effective caps and their use (from the account in evm mode) and the exposure (null off chain): the owner's overview. */
  allowance(db: Db, agentId: string): Promise<Pick<PolicyLimits, 'limits' | 'usage'> & { exposure_usd: string | null }>;
}

const usd = (units: bigint) => formatAmount(units, USD_DECIMALS);

/** Every key of the policy, null for an absent cap, "all" for an absent allow-list, "approved" for absent allowed_recipients (the /self/limits view). */
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
    allowed_recipients: p?.allowed_recipients ?? 'approved',
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
export function hightopLimits(
  p: Policy | null,
  limits: Schema<'Limits'>,
  inPeriod: { usd_e8: bigint; count: number; swaps: number },
  lifetime: { usd_e8: bigint; count: number },
  chainSwaps?: CoreLimits['swaps'],
): Omit<PolicyLimits, 'limits' | 'usage'> {
  const granted: string[] = p?.operation_types === 'all' ? [...OPERATION_TYPES] : (p?.operation_types ?? []);
  return {
    spend_limits: {
      per_tx_usd: limits.per_tx_usd,
      per_period_usd: limits.per_period_usd,
      lifetime_usd: limits.lifetime_usd,
      max_txs_per_period: limits.max_txs_per_period,
      tx_cooldown_blocks: p?.tx_cooldown_blocks ?? null,
      fail_on_zero_price: p?.fail_on_zero_price ?? false,
    },
    swap_limits: { max_slippage_bps: limits.max_slippage_bps, max_swaps_per_period: chainSwaps ? chainSwaps.max_swaps_per_period : (p?.max_swaps_per_period ?? null) },
    permissions: { operation_types: OPERATION_TYPES.filter((t) => granted.includes(t)), cannot: OPERATION_TYPES.filter((t) => !granted.includes(t)) },
    current_usage: {
      txs_in_period: inPeriod.count,
      spent_in_period_usd: usd(inPeriod.usd_e8),
      swaps_in_period: chainSwaps?.swaps_in_period ?? inPeriod.swaps,
      total_txs: lifetime.count,
      total_spent_usd: usd(lifetime.usd_e8),
    },
  };
}

const fromStored = (stored: Record<string, unknown>): Policy => parsePolicy(stored);

export function createPolicyService(deps: { clock: Clock; log?: Logger }): PolicyService {
  const { clock } = deps;
  const parsedPolicy = createParsedPolicyCache();
  let chainMirror: PolicyChainMirror | null = null;
  const setLive: PolicyService['set'] = (db, agentId, input, signature) => service.set(db, agentId, input, signature);

  async function readLimits(db: Db, agentId: string) {
    const policy = await service.get(db, agentId);
    const now = clock.now();
    const period = policy?.period ?? 'day';
    const start = periodStart(period, now);
    const { period: inPeriod, lifetime } = await sumUsageSinceAndLifetime(db, agentId, start);
    const limits = effectiveLimits(policy);
    const mirror: CoreLimits = { limits, usage: { period_start: start.toISOString(), period_usd: usd(inPeriod.usd_e8), period_txs: inPeriod.count, lifetime_usd: usd(lifetime.usd_e8) } };
    // evm mode: the caps and usage the account enforces, read from the chain (the database row is its mirror).
    const shown = (await chainMirror?.limits(db, agentId, mirror)) ?? mirror;
    return { policy, inPeriod, lifetime, shown };
  }

  const service: PolicyService = {
    ...createShadowPolicies({ clock, log: deps.log, setLive, parsedPolicy }),
    ...createPolicyReplay({ clock }),
    parse: parsePolicy,

    async set(db, agentId, input, signature) {
      const policy = parsePolicy(input);
      // The chain first: the database mirrors what the account holds, never the other way round.
      await chainMirror?.onSet(db, agentId, policy, signature);
      await upsertPolicy(db, agentId, policyToJson(policy), clock.now());
      return policy;
    },

    async addPayee(db, agentId, address, signature) {
      if (!chainMirror) return;
      const policy = await service.get(db, agentId);
      // A list names its payees itself; "all" pays anyone; no policy moves nothing.
      if (!policy || policy.allowed_recipients !== undefined) return;
      await chainMirror.onPayeeAdded(db, agentId, policy, address, signature);
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
      const at = clock.now();
      // The lock and the usage sums its caps need in one round trip, the sums after the lock (policy.repository lockPolicy).
      const { row, usage } = await lockPolicy(trx, agentId, { day: periodStart('day', at), week: periodStart('week', at), month: periodStart('month', at) });
      return { row, usage, at };
    },

    async decide(trx, agentId, req, given) {
      const locked = given ?? (await service.lock(trx, agentId));
      return { decision: decidePolicy(locked.row ? parsedPolicy(locked.row.policy) : null, req, locked.usage, locked.at), locked };
    },

    async decideWrite(trx, { agentId, operationId, request, counts, skip, locked: given }) {
      if (skip) return { decision: { allowed: true, key: null }, facts: factsOf(request, { allowed: true, key: null }, clock.now(), counts, true) };
      const { decision, locked } = await service.decide(trx, agentId, request, given);
      await service.shadow(trx, { agentId, operationId, request, live: decision, locked });
      // Allowed, the owner may still have to approve it (issue 27): what the policy's approval keys ask of it.
      const approval = decision.allowed && locked.row ? approvalNeed(parsedPolicy(locked.row.policy), request) : undefined;
      return { decision: approval ? { ...decision, approval } : decision, facts: factsOf(request, decision, locked.at, counts) };
    },

    async evaluate(trx, agentId, req, locked) {
      const { decision, locked: held } = await service.decide(trx, agentId, req, locked);
      if (decision.allowed) {
        const approval = held.row ? approvalNeed(parsedPolicy(held.row.policy), req) : undefined;
        return approval ? { allowed: true, approval } : { allowed: true };
      }
      return { allowed: false, code: decision.code, message: decision.message, details: decision.details };
    },

    async limits(db, agentId) {
      const { policy, inPeriod, lifetime, shown } = await readLimits(db, agentId);
      return { limits: shown.limits, usage: shown.usage, ...hightopLimits(policy, shown.limits, inPeriod, lifetime, shown.swaps) };
    },

    async allowance(db, agentId) {
      const { shown } = await readLimits(db, agentId);
      return { limits: shown.limits, usage: shown.usage, exposure_usd: shown.exposure_usd ?? null };
    },
  };
  return service;
}
