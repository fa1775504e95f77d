// Agent policies and the usage their caps are measured against.
import { multiStatementQueries, statementsIn, type Db, type Knex, type SqlCall, type SqlStatement } from '../knex.js';

export interface PolicyRow {
  agent_id: string;
  policy: Record<string, unknown>;
  updated_at: Date;
}

export async function upsertPolicy(db: Db, agentId: string, policy: Record<string, unknown>, at: Date): Promise<void> {
  await db('agent_policies').insert({ agent_id: agentId, policy: JSON.stringify(policy), updated_at: at }).onConflict('agent_id').merge();
}

export async function findPolicy(db: Db, agentId: string): Promise<PolicyRow | undefined> {
  return db('agent_policies').where({ agent_id: agentId }).first();
}

/** Locks the agent's policy row for the rest of the transaction: writes of one agent evaluate usage one at a time. */
export async function lockPolicy(db: Db, agentId: string): Promise<PolicyRow | undefined> {
  return db('agent_policies').where({ agent_id: agentId }).forUpdate().first();
}

/** Usage toward the caps, read in the round trip of the lock: null for a sum the policy has no cap on. */
export interface LockedUsage {
  period: { usd_e8: bigint; count: number } | null;
  lifetime: { usd_e8: bigint; count: number } | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const COUNTED = `counts_toward_limits AND status IN ('accepted', 'submitted', 'executed')`;

/** Locks the agent's policy row (the first statement of lockPolicyWithUsage's string). */
const LOCK_POLICY: SqlStatement = {
  name: 'agentapi_policy_lock',
  params: ['uuid'],
  text: `SELECT agent_id, policy, updated_at FROM agent_policies WHERE agent_id = $1::uuid FOR UPDATE`,
};

/**
 * The usage sums the locked row's caps need: null for a cap it does not have (no lifetime scan without a lifetime
 * cap). $2-$4: the start of the current day, week and month; the row's period picks one.
 */
const POLICY_USAGE: SqlStatement = {
  name: 'agentapi_policy_usage',
  params: ['uuid', 'timestamptz', 'timestamptz', 'timestamptz'],
  text: `SELECT
      CASE WHEN p.policy->'per_period_usd' IS NOT NULL OR p.policy->'max_txs_per_period' IS NOT NULL THEN
        (SELECT coalesce(sum(amount_usd_e8), 0)::text || ':' || count(*) FROM operations o WHERE o.agent_id = p.agent_id AND ${COUNTED}
           AND o.created_at >= CASE p.policy->>'period' WHEN 'week' THEN $3::timestamptz WHEN 'month' THEN $4::timestamptz ELSE $2::timestamptz END) END AS period,
      CASE WHEN p.policy->'lifetime_usd' IS NOT NULL THEN
        (SELECT coalesce(sum(amount_usd_e8), 0)::text || ':' || count(*) FROM operations o WHERE o.agent_id = p.agent_id AND ${COUNTED}) END AS lifetime
    FROM agent_policies p WHERE p.agent_id = $1::uuid`,
};

/**
 * lockPolicy and the usage its caps need, in ONE round trip but TWO statements: a simple-protocol query string
 * holding the lock statement, then the sums. Under read committed every statement of such a string takes its own
 * snapshot when it starts, so the sums start after the lock was granted and see every operation a writer that held
 * the lock before committed (a sum inside the locking statement would not: its snapshot predates the wait).
 * test/ledger/policy-usage-race.test.ts holds this. The sums re-read the (now locked) row to know which caps exist
 * and the period: `periodStarts` gives the start of each period kind. No bind parameters in a multi-statement
 * string: each statement is `EXECUTE` of one prepared on the connection with literal values (statementsIn; an
 * EXECUTE is a statement of the string as any other, with its own snapshot), the agent id checked to be a UUID and
 * the dates ISO strings we made. PGlite takes one statement per query: there the statements are sent one after
 * the other. `lead`: a read-only statement of the caller's, sent first in the same round trip (its rows are `leadRows`).
 */
export async function lockPolicyWithUsage(db: Db, agentId: string, periodStarts: { day: Date; week: Date; month: Date }, lead?: SqlCall): Promise<{ row: PolicyRow | undefined; usage: LockedUsage; leadRows: unknown[] }> {
  if (!UUID.test(agentId)) throw new Error('lockPolicyWithUsage: the agent id is not a UUID');
  const calls: SqlCall[] = [
    ...(lead ? [lead] : []),
    { statement: LOCK_POLICY, values: [agentId] },
    { statement: POLICY_USAGE, values: [agentId, periodStarts.day.toISOString(), periodStarts.week.toISOString(), periodStarts.month.toISOString()] },
  ];
  const statements = await statementsIn(db, calls);
  let results: { rows: unknown[] }[];
  if (multiStatementQueries(db as Knex)) results = (await db.raw(statements.join(';\n'))) as unknown as { rows: unknown[] }[];
  else {
    results = [];
    for (const sql of statements) results.push(await db.raw(sql));
  }
  const leadRows = lead ? results.shift()!.rows : [];
  const lockRows = results[0]!.rows as PolicyRow[];
  const sumRows = results[1]!.rows as { period: string | null; lifetime: string | null }[];
  const parse = (v: string | null | undefined) => {
    if (v == null) return null;
    const [usd, n] = v.split(':');
    return { usd_e8: BigInt(usd!), count: Number(n) };
  };
  return { row: lockRows[0], usage: { period: parse(sumRows[0]?.period), lifetime: parse(sumRows[0]?.lifetime) }, leadRows };
}

/** Usage toward policy caps: accepted, submitted and executed money-moving operations since `since` (all time when null). */
export async function sumUsage(db: Db, agentId: string, since: Date | null): Promise<{ usd_e8: bigint; count: number }> {
  const q = db('operations').where({ agent_id: agentId, counts_toward_limits: true }).whereIn('status', ['accepted', 'submitted', 'executed']);
  if (since) q.where('created_at', '>=', since);
  const row = await q.first(db.raw('coalesce(sum(amount_usd_e8), 0)::text as usd'), db.raw('count(*)::int as n'));
  return { usd_e8: BigInt((row as { usd: string }).usd), count: Number((row as { n: number }).n) };
}

/** Usage since `since` and over all time in one statement (the limits read); `swaps`: conversions in the period. */
export async function sumUsageSinceAndLifetime(db: Db, agentId: string, since: Date): Promise<{ period: { usd_e8: bigint; count: number; swaps: number }; lifetime: { usd_e8: bigint; count: number } }> {
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
