// What a policy replay reads (issue 28): an agent's operations in the order they took its policy lock, with what
// their live evaluation saw, and the usage counted before them.
import { rows, type Db } from '../knex.js';
import { sql } from '../sql.js';

export interface HistoryRow {
  id: string;
  type: string;
  status: string;
  asset_symbol: string | null;
  amount_usd_e8: string | null;
  counts_toward_limits: boolean;
  error_code: string | null;
  to_address: string | null;
  recipient_id: string | null;
  destination_id: string | null;
  policy_facts: Record<string, unknown> | null;
  created_at: Date;
  /** When the operation left the counted statuses (execution_failed, cancelled), if it did. */
  ended_at: Date | null;
}

/**
 * Every operation of the agent created since `from`, in lock order: `policy_seq` is drawn by the insert, which runs
 * under the agent's policy lock, so for one agent it follows the order of the commits (older rows have none and come
 * first, by creation).
 */
export async function readPolicyHistory(db: Db, agentId: string, from: Date): Promise<HistoryRow[]> {
  return rows(
    db,
    sql<HistoryRow>`SELECT id, type, status, asset_symbol, amount_usd_e8::text AS amount_usd_e8, counts_toward_limits, error_code, to_address,
        details->>'recipient_id' AS recipient_id, details->>'trusted_destination_id' AS destination_id, policy_facts, created_at,
        CASE WHEN status IN ('execution_failed', 'cancelled') THEN coalesce(failed_at, updated_at) END AS ended_at
      FROM operations WHERE agent_id = ${agentId}::uuid AND created_at >= ${from}::timestamptz
      ORDER BY policy_seq NULLS FIRST, created_at, id`,
  );
}

/** The usage counted today for operations created before `before` (a replay's lifetime base). */
export async function sumCountedBefore(db: Db, agentId: string, before: Date): Promise<{ usd_e8: bigint; count: number; lastAt: Date | null }> {
  const [row] = await rows(
    db,
    sql<{ usd: string; n: number; last_at: Date | null }>`SELECT coalesce(sum(amount_usd_e8), 0)::text AS usd, count(*)::int AS n, max(created_at) AS last_at FROM operations
      WHERE agent_id = ${agentId}::uuid AND created_at < ${before}::timestamptz AND counts_toward_limits AND status IN ('accepted', 'submitted', 'executed')`,
  );
  return { usd_e8: BigInt(row!.usd), count: Number(row!.n), lastAt: row!.last_at == null ? null : new Date(row!.last_at) };
}
