// Agent policies and the usage their caps are measured against.
import type { Db } from '../knex.js';

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

/** Usage toward policy caps: accepted, submitted and executed money-moving operations since `since` (all time when null). */
export async function sumUsage(db: Db, agentId: string, since: Date | null): Promise<{ usd_e8: bigint; count: number }> {
  const q = db('operations').where({ agent_id: agentId, counts_toward_limits: true }).whereIn('status', ['accepted', 'submitted', 'executed']);
  if (since) q.where('created_at', '>=', since);
  const row = await q.first(db.raw('coalesce(sum(amount_usd_e8), 0)::text as usd'), db.raw('count(*)::int as n'));
  return { usd_e8: BigInt((row as { usd: string }).usd), count: Number((row as { n: number }).n) };
}

/** Usage since `since` and over all time in one statement (the limits read). */
export async function sumUsageSinceAndLifetime(db: Db, agentId: string, since: Date): Promise<{ period: { usd_e8: bigint; count: number }; lifetime: { usd_e8: bigint } }> {
  const row = (await db('operations')
    .where({ agent_id: agentId, counts_toward_limits: true })
    .whereIn('status', ['accepted', 'submitted', 'executed'])
    .first(
      db.raw('coalesce(sum(amount_usd_e8) FILTER (WHERE created_at >= ?), 0)::text as period_usd', [since]),
      db.raw('(count(*) FILTER (WHERE created_at >= ?))::int as period_n', [since]),
      db.raw('coalesce(sum(amount_usd_e8), 0)::text as lifetime_usd'),
    )) as { period_usd: string; period_n: number; lifetime_usd: string };
  return { period: { usd_e8: BigInt(row.period_usd), count: Number(row.period_n) }, lifetime: { usd_e8: BigInt(row.lifetime_usd) } };
}
