// Policy replay (issue 28): a candidate policy re-evaluated over an agent's real write history, in lock order, with
// the rules of the live evaluation (policy-rules.ts decidePolicy) fed by a usage accumulator built from that history.
// The candidate's own refusals leave the usage it sees, so one refusal can let a later payment through. Read-only.
import { readOnlyTransaction, type Db } from '../../db/knex.js';
import { readPolicyHistory, sumCountedBefore, type HistoryRow } from '../../db/repositories/policy-history.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import { parsePolicy, periodStart, policyToJson, type Period, type Policy } from './policy-document.js';
import { decidePolicy, requestOf, type PolicyFacts, type PolicyKey } from './policy-rules.js';
import { approvalNeed } from './approval-rules.js';

/** How far back a replay may start. */
export const REPLAY_MAX_DAYS = 90;

/** `approval_required`: allowed, but the candidate's approval keys (issue 27) would have asked the owner first. */
type Outcome = { allowed: boolean; code: string | null; key: PolicyKey | null; approval_required?: boolean };

export interface ReplayedOperation {
  operation_id: string;
  type: string;
  created_at: string;
  asset: string | null;
  amount_usd: string | null;
  /** false: the operation predates recorded policy facts; its inputs were rebuilt from the row. */
  exact: boolean;
  recorded: Outcome;
  candidate: Outcome;
  change: 'unchanged' | 'newly_refused' | 'newly_allowed';
  /** The usage the candidate saw before deciding: its period's sums and the lifetime's. */
  usage: { period_start: string; period_usd: string; period_txs: number; lifetime_usd: string; lifetime_txs: number };
}

export interface ReplayResult {
  agent_id: string;
  since: string;
  until: string;
  policy: Record<string, unknown>;
  counts: { operations: number; unchanged: number; newly_refused: number; newly_allowed: number };
  /** Per period of the candidate's `period`: USD spent under the recorded outcomes and under the candidate. */
  periods: { start: string; recorded_usd: string; candidate_usd: string; cap_usd: string | null }[];
  /** Per UTC day (the console's chart). */
  days: { date: string; recorded_usd: string; candidate_usd: string }[];
  operations: ReplayedOperation[];
}

export interface PolicyReplayService {
  /** `policy`: the candidate (the policy file format); `since`: at most REPLAY_MAX_DAYS back. Writes nothing. */
  replay(db: Db, agentId: string, input: { policy: unknown; since: Date }): Promise<ReplayResult>;
}

const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);

/** Rebuilt inputs for an operation written before policy facts were recorded (exact: false). */
function rebuiltFacts(r: HistoryRow): PolicyFacts {
  const ids = [r.recipient_id, r.destination_id].filter((x): x is string => x !== null);
  return {
    v: 1,
    at: r.created_at.toISOString(),
    type: r.type,
    asset: r.asset_symbol,
    usd_e8: r.amount_usd_e8,
    counts: r.counts_toward_limits || (r.status === 'policy_rejected' && r.amount_usd_e8 !== null),
    recipient: r.to_address || ids.length > 0 ? { ids, address: r.to_address } : null,
    protocol: null,
    slippage_bps: null,
    ltv_bps: null,
    allowed: r.status !== 'policy_rejected',
    code: r.status === 'policy_rejected' ? r.error_code : null,
    key: null,
  };
}

/**
 * Counted usage by period bucket (the start of the candidate's period containing each operation's creation): the
 * live sums count `created_at >= start of the current period`, which is `bucket >= that start`. Operations that
 * later failed leave the sums at the time they ended, as they left the live sums.
 */
function createAccumulator(period: Period, lifetime: { usd_e8: bigint; count: number }, lastBase: Date | null) {
  const buckets = new Map<number, { usd: bigint; count: number; swaps: number }>();
  const keys: number[] = [];
  const ends: { at: number; key: number; usd: bigint; swap: number; created: number }[] = [];
  /** Creation times of the writes counting now, ascending (the last one is the cooldown's reference). */
  const counting: number[] = [];
  const life = { ...lifetime };
  const move = (key: number, value: bigint, n: number, swaps: number) => {
    let b = buckets.get(key);
    if (!b) {
      b = { usd: 0n, count: 0, swaps: 0 };
      buckets.set(key, b);
      let i = keys.length;
      while (i > 0 && keys[i - 1]! > key) i--;
      keys.splice(i, 0, key);
    }
    b.usd += value;
    b.count += n;
    b.swaps += swaps;
    life.usd_e8 += value;
    life.count += n;
  };
  const insertSorted = (list: number[], v: number) => {
    let i = list.length;
    while (i > 0 && list[i - 1]! > v) i--;
    list.splice(i, 0, v);
  };
  return {
    /** Drops what ended before `at` (an end at the same instant as a decision is taken to follow it: a settlement pass runs after the writes it finds). */
    advance(at: number) {
      while (ends.length > 0 && ends[0]!.at < at) {
        const e = ends.shift()!;
        move(e.key, -e.usd, -1, -e.swap);
        const i = counting.lastIndexOf(e.created);
        if (i >= 0) counting.splice(i, 1);
      }
    },
    add(createdAt: Date, value: bigint, endedAt: Date | null, swap: boolean) {
      const key = periodStart(period, createdAt).getTime();
      move(key, value, 1, swap ? 1 : 0);
      insertSorted(counting, createdAt.getTime());
      if (endedAt) {
        const at = endedAt.getTime();
        let i = ends.length;
        while (i > 0 && ends[i - 1]!.at > at) i--;
        ends.splice(i, 0, { at, key, usd: value, swap: swap ? 1 : 0, created: createdAt.getTime() });
      }
    },
    usage(start: number) {
      let value = 0n;
      let count = 0;
      let swaps = 0;
      for (let i = keys.length - 1; i >= 0 && keys[i]! >= start; i--) {
        const b = buckets.get(keys[i]!)!;
        value += b.usd;
        count += b.count;
        swaps += b.swaps;
      }
      const last = counting.length > 0 ? new Date(counting[counting.length - 1]!) : lastBase;
      return { period: { usd_e8: value, count, swaps }, lifetime: { ...life }, lastCountedAt: last };
    },
  };
}

/** Spend by a key (period start or day), recorded and candidate. */
function spendBy(keyOf: (d: Date) => string) {
  const m = new Map<string, { recorded: bigint; candidate: bigint }>();
  return {
    add(at: Date, recorded: bigint, candidate: bigint) {
      const k = keyOf(at);
      const e = m.get(k) ?? { recorded: 0n, candidate: 0n };
      e.recorded += recorded;
      e.candidate += candidate;
      m.set(k, e);
    },
    entries: () => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  };
}

export function replayHistory(
  candidate: Policy,
  history: HistoryRow[],
  since: Date,
  lifetimeBase: { usd_e8: bigint; count: number; lastAt?: Date | null },
): Omit<ReplayResult, 'agent_id' | 'since' | 'until' | 'policy'> {
  const acc = createAccumulator(candidate.period, { usd_e8: lifetimeBase.usd_e8, count: lifetimeBase.count }, lifetimeBase.lastAt ?? null);
  const periods = spendBy((d) => periodStart(candidate.period, d).toISOString());
  const days = spendBy((d) => d.toISOString().slice(0, 10));
  const counts = { operations: 0, unchanged: 0, newly_refused: 0, newly_allowed: 0 };
  const operations: ReplayedOperation[] = [];
  /** Payees the history paid so far (approve_new_payees asks for the first payment to one). */
  const paid = new Set<string>();
  for (const row of history) {
    const stored = row.policy_facts as PolicyFacts | null;
    const facts = stored ?? rebuiltFacts(row);
    const at = new Date(facts.at);
    acc.advance(at.getTime());
    const recorded: Outcome = { allowed: row.status !== 'policy_rejected', code: row.status === 'policy_rejected' ? row.error_code : null, key: facts.key };
    const value = facts.usd_e8 === null ? 0n : BigInt(facts.usd_e8);
    // Before `since` (the period's start up to it), and writes no policy decided, keep what happened.
    const replayed = row.created_at >= since && !facts.skipped;
    const start = periodStart(candidate.period, at);
    const usage = acc.usage(start.getTime());
    let candidateOutcome = recorded;
    const payee = facts.recipient?.address?.toLowerCase() ?? null;
    if (replayed) {
      const request = requestOf(facts);
      const d = decidePolicy(candidate, request, usage, at);
      candidateOutcome = d.allowed ? { allowed: true, code: null, key: null } : { allowed: false, code: d.code, key: d.key };
      // Approvals: over the threshold, or a first payment to a payee this history has not paid yet.
      const need = d.allowed ? approvalNeed(candidate, request) : undefined;
      if (need) candidateOutcome.approval_required = need.thresholdUsd !== null || (need.checkNewPayee && payee !== null && !paid.has(payee));
    }
    if (recorded.allowed && payee !== null) paid.add(payee);
    // A write the candidate allows counts from its creation, and leaves the sums when it ended (failed) in history;
    // one the recorded policy refused would have been accepted: it counts from then on.
    const counted = candidateOutcome.allowed && facts.counts;
    if (counted) acc.add(row.created_at, value, recorded.allowed ? row.ended_at : null, facts.type === 'conversion');
    if (!replayed) continue;
    const spentRecorded = recorded.allowed && facts.counts && row.ended_at === null ? value : 0n;
    const spentCandidate = counted && (!recorded.allowed || row.ended_at === null) ? value : 0n;
    periods.add(row.created_at, spentRecorded, spentCandidate);
    days.add(row.created_at, spentRecorded, spentCandidate);
    const change = recorded.allowed === candidateOutcome.allowed ? 'unchanged' : recorded.allowed ? 'newly_refused' : 'newly_allowed';
    counts.operations++;
    counts[change]++;
    operations.push({
      operation_id: row.id,
      type: row.type,
      created_at: row.created_at.toISOString(),
      asset: row.asset_symbol,
      amount_usd: facts.usd_e8 === null ? null : usd(value),
      exact: stored !== null,
      recorded,
      candidate: candidateOutcome,
      change,
      usage: { period_start: start.toISOString(), period_usd: usd(usage.period.usd_e8), period_txs: usage.period.count, lifetime_usd: usd(usage.lifetime.usd_e8), lifetime_txs: usage.lifetime.count },
    });
  }
  const cap = candidate.per_period_usd === undefined ? null : usd(candidate.per_period_usd);
  return {
    counts,
    periods: periods.entries().map(([start, s]) => ({ start, recorded_usd: usd(s.recorded), candidate_usd: usd(s.candidate), cap_usd: cap })),
    days: days.entries().map(([date, s]) => ({ date, recorded_usd: usd(s.recorded), candidate_usd: usd(s.candidate) })),
    operations,
  };
}

export function createPolicyReplay(deps: { clock: Clock }): PolicyReplayService {
  return {
    async replay(db, agentId, input) {
      const candidate = parsePolicy(input.policy);
      const now = deps.clock.now();
      const since = input.since;
      if (Number.isNaN(since.getTime()) || since.getTime() > now.getTime()) throw new ApiError('validation_failed', 'since must be a time in the past', { field: 'since' });
      if (now.getTime() - since.getTime() > REPLAY_MAX_DAYS * 86_400_000) throw new ApiError('validation_failed', `since must be at most ${REPLAY_MAX_DAYS} days back`, { field: 'since' });
      // The candidate's period containing `since` counts what happened in it before `since` (as recorded).
      const from = periodStart(candidate.period, since);
      const [history, base] = await readOnlyTransaction(db, async (trx) => [await readPolicyHistory(trx, agentId, from), await sumCountedBefore(trx, agentId, from)] as const);
      return { agent_id: agentId, since: since.toISOString(), until: now.toISOString(), policy: policyToJson(candidate), ...replayHistory(candidate, history, since, base) };
    },
  };
}
