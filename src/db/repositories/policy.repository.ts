// Agent policies and the usage their caps are measured against.
import { batch, rows, type Db } from '../knex.js';
import { prepared, sql } from '../sql.js';

export interface PolicyRow {
  agent_id: string;
  policy: Record<string, unknown>;
  updated_at: Date;
  /** A candidate evaluated beside the live policy on every write, never deciding (issue 28). */
  shadow_policy: Record<string, unknown> | null;
}

export async function upsertPolicy(db: Db, agentId: string, policy: Record<string, unknown>, at: Date): Promise<void> {
  await db('agent_policies')
    .insert({ agent_id: agentId, policy: JSON.stringify(policy), updated_at: at })
    .onConflict('agent_id')
    .merge();
}

export async function findPolicy(db: Db, agentId: string): Promise<PolicyRow | undefined> {
  return db('agent_policies').where({ agent_id: agentId }).first();
}

/** Usage toward the caps, read in the round trip of the lock: null for a sum the policy has no cap on. */
export interface LockedUsage {
  /** `swaps`: conversions in the period. */
  period: { usd_e8: bigint; count: number; swaps: number } | null;
  lifetime: { usd_e8: bigint; count: number } | null;
  /** When the last counted operation was created (null: none, or the policy has no cooldown). */
  lastCountedAt: Date | null;
}

const COUNTED = sql`counts_toward_limits AND status IN ('accepted', 'submitted', 'executed')`;

/**
 * The usage sums the locked row's caps need: null for a cap it does not have (no lifetime scan without a lifetime
 * cap). The start of the current day, week and month are given; the row's period picks one.
 */
const usageStatement = (agentId: string, starts: { day: Date; week: Date; month: Date }) =>
  prepared(
    sql<{ period: string | null; lifetime: string | null; last_at: Date | null }>`SELECT
      CASE WHEN p.policy->'per_period_usd' IS NOT NULL OR p.policy->'max_txs_per_period' IS NOT NULL OR p.policy->'max_swaps_per_period' IS NOT NULL THEN
        (SELECT coalesce(sum(amount_usd_e8), 0)::text || ':' || count(*) || ':' || count(*) FILTER (WHERE o.type = 'conversion') FROM operations o WHERE o.agent_id = p.agent_id AND ${COUNTED}
           AND o.created_at >= CASE p.policy->>'period' WHEN 'week' THEN ${starts.week}::timestamptz WHEN 'month' THEN ${starts.month}::timestamptz ELSE ${starts.day}::timestamptz END) END AS period,
      CASE WHEN p.policy->'lifetime_usd' IS NOT NULL THEN
        (SELECT coalesce(sum(amount_usd_e8), 0)::text || ':' || count(*) FROM operations o WHERE o.agent_id = p.agent_id AND ${COUNTED}) END AS lifetime,
      CASE WHEN p.policy->'tx_cooldown_blocks' IS NOT NULL THEN
        (SELECT max(created_at) FROM operations o WHERE o.agent_id = p.agent_id AND ${COUNTED}) END AS last_at
    FROM agent_policies p WHERE p.agent_id = ${agentId}::uuid`,
    'agentapi_policy_usage',
  );

/**
 * THE policy lock (every money path takes it, through PolicyService.lock): locks the agent's policy row for the rest
 * of the transaction, so writes of one agent evaluate usage one at a time, and reads the usage its caps need. One
 * round trip but TWO statements (a batch): under read committed each statement takes its own snapshot when it starts,
 * so the sums start after the lock was granted and see every operation a writer that held the lock before committed
 * (a sum inside the locking statement would not: its snapshot predates the wait). test/ledger/policy-usage-race.test.ts
 * holds this. The sums re-read the (now locked) row to know which caps exist and the period.
 */
export async function lockPolicy(trx: Db, agentId: string, periodStarts: { day: Date; week: Date; month: Date }): Promise<{ row: PolicyRow | undefined; usage: LockedUsage }> {
  const [locked, sums] = await batch(trx, [
    prepared(sql<PolicyRow>`SELECT agent_id, policy, updated_at, shadow_policy FROM agent_policies WHERE agent_id = ${agentId}::uuid FOR UPDATE`, 'agentapi_policy_lock_v2'),
    usageStatement(agentId, periodStarts),
  ]);
  const parse = (v: string | null | undefined) => {
    if (v == null) return null;
    const [usd, n, swaps] = v.split(':');
    return { usd_e8: BigInt(usd!), count: Number(n), swaps: Number(swaps ?? 0) };
  };
  const lifetime = parse(sums[0]?.lifetime);
  const lastAt = sums[0]?.last_at;
  return {
    row: locked[0],
    usage: { period: parse(sums[0]?.period), lifetime: lifetime && { usd_e8: lifetime.usd_e8, count: lifetime.count }, lastCountedAt: lastAt == null ? null : new Date(lastAt) },
  };
}

/** Usage since `since` and over all time in one statement (the limits read); `swaps`: conversions in the period. */
export async function sumUsageSinceAndLifetime(
  db: Db,
  agentId: string,
  since: Date,
): Promise<{ period: { usd_e8: bigint; count: number; swaps: number }; lifetime: { usd_e8: bigint; count: number } }> {
  const row = (await db('operations')
    .where({ agent_id: agentId, counts_toward_limits: true })
    .whereIn('status', ['accepted', 'submitted', 'executed'])
    .first(
      db.raw('coalesce(sum(amount_usd_e8) FILTER (WHERE created_at >= ?), 0)::text as period_usd', [since]),
      db.raw('(count(*) FILTER (WHERE created_at >= ?))::int as period_n', [since]),
      db.raw(`(count(*) FILTER (WHERE created_at >= ? AND type = 'conversion'))::int as period_swaps`, [since]),
      db.raw('coalesce(sum(amount_usd_e8), 0)::text as lifetime_usd'),
      db.raw('count(*)::int as lifetime_n'),
    )) as { period_usd: string; period_n: number; period_swaps: number; lifetime_usd: string; lifetime_n: number };
  return { period: { usd_e8: BigInt(row.period_usd), count: Number(row.period_n), swaps: Number(row.period_swaps) }, lifetime: { usd_e8: BigInt(row.lifetime_usd), count: Number(row.lifetime_n) } };
}

/** Sets (or with null drops) the agent's shadow policy; false when the agent has no policy row. */
export async function setShadowPolicy(db: Db, agentId: string, shadow: Record<string, unknown> | null, at: Date): Promise<boolean> {
  const n = await db('agent_policies')
    .where({ agent_id: agentId })
    .update({ shadow_policy: shadow === null ? null : JSON.stringify(shadow), shadow_updated_at: shadow === null ? null : at });
  return Number(n) > 0;
}

/** The policy row locked for a change of the live or shadow policy (the writes' lock, so no write decides half-way). */
export async function findPolicyForUpdate(db: Db, agentId: string): Promise<PolicyRow | undefined> {
  return db('agent_policies').where({ agent_id: agentId }).forUpdate().first();
}

/**
 * The counted usage since `since` (null: no period sum) and over all time (when `lifetime`), for a policy whose caps
 * the lock's sums did not cover (a shadow policy with another period). Run under the policy lock, after it.
 */
export async function sumUsage(db: Db, agentId: string, since: Date | null, lifetime: boolean): Promise<LockedUsage> {
  const from = since ?? new Date(0);
  const [row] = await rows(
    db,
    sql<{ period_usd: string; period_n: number; period_swaps: number; lifetime_usd: string; lifetime_n: number; last_at: Date | null }>`SELECT
      coalesce(sum(amount_usd_e8) FILTER (WHERE created_at >= ${from}::timestamptz), 0)::text AS period_usd,
      (count(*) FILTER (WHERE created_at >= ${from}::timestamptz))::int AS period_n,
      (count(*) FILTER (WHERE created_at >= ${from}::timestamptz AND type = 'conversion'))::int AS period_swaps,
      coalesce(sum(amount_usd_e8), 0)::text AS lifetime_usd, count(*)::int AS lifetime_n, max(created_at) AS last_at
    FROM operations WHERE agent_id = ${agentId}::uuid AND ${COUNTED}`,
  );
  const r = row!;
  return {
    period: since ? { usd_e8: BigInt(r.period_usd), count: Number(r.period_n), swaps: Number(r.period_swaps) } : null,
    lifetime: lifetime ? { usd_e8: BigInt(r.lifetime_usd), count: Number(r.lifetime_n) } : null,
    lastCountedAt: r.last_at == null ? null : new Date(r.last_at),
  };
}

/** USD counted against the caps per UTC day since `since` (days without spending absent), oldest first: the spending chart. */
export async function sumUsageByDay(db: Db, agentId: string, since: Date): Promise<{ date: string; usd_e8: bigint; count: number }[]> {
  const found = (await db('operations')
    .where({ agent_id: agentId, counts_toward_limits: true })
    .whereIn('status', ['accepted', 'submitted', 'executed'])
    .where('created_at', '>=', since)
    .groupByRaw('1')
    .orderByRaw('1')
    .select(db.raw(`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS date`), db.raw('coalesce(sum(amount_usd_e8), 0)::text AS usd'), db.raw('count(*)::int AS n'))) as {
    date: string;
    usd: string;
    n: number;
  }[];
  return found.map((r) => ({ date: r.date, usd_e8: BigInt(r.usd), count: Number(r.n) }));
}
