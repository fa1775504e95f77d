// Recording delivered webhook attempts: fenced by claim token, one statement, the endpoints' failure state cleared.
import { rows, type Db } from '../../knex.js';
import { sql, type Sql } from '../../sql.js';

export interface DeliveredAttempt {
  id: string;
  token: string;
  httpStatus: number | null;
  latencyMs: number | null;
  responseBody: string;
}

const toRecordRow = (a: DeliveredAttempt) => ({ id: a.id, token: a.token, http_status: a.httpStatus, latency_ms: a.latencyMs, response_body: a.responseBody });

/**
 * Delivered attempts applied at `at`, fenced by claim token, as CTEs for one statement (this file's own, and the claim
 * that records the attempts of the cycle before: claim-deliveries.ts); `done` has the recorded ids. An endpoint row is
 * written only when its failure state must change or last_delivered_at is over a second old, so a busy endpoint is not
 * rewritten every time.
 */
export function recordDeliveredCtes(attempts: readonly DeliveredAttempt[], at: Date): Sql<never> {
  return sql`v AS (
       SELECT v.* FROM jsonb_to_recordset(CAST(${JSON.stringify(attempts.map(toRecordRow))} AS jsonb)) AS v(id uuid, token uuid, http_status int, latency_ms int, response_body text)
     ), done AS (
       UPDATE webhook_deliveries w
       SET status = 'delivered', http_status = v.http_status, latency_ms = v.latency_ms, response_body = v.response_body,
           error_class = NULL, next_attempt_at = NULL, terminal_at = ${at}, updated_at = ${at}, claim_token = NULL, lease_until = NULL
       FROM v WHERE w.id = v.id AND w.claim_token = v.token AND w.status = 'in_flight'
       RETURNING w.id, w.endpoint_id
     ), cleared AS (
       UPDATE webhook_endpoints e
       SET consecutive_failures = 0, failing_since = NULL, last_delivered_at = ${at}, updated_at = ${at}
       WHERE e.id IN (SELECT endpoint_id FROM done)
         AND (e.consecutive_failures <> 0 OR e.failing_since IS NOT NULL OR e.last_delivered_at IS NULL OR e.last_delivered_at < ${new Date(at.getTime() - 1000)})
     )`;
}

/**
 * Records many delivered attempts in one statement (its own transaction, one round trip), committed
 * without waiting for the WAL flush: losing it in a crash only means one more (deduplicated) delivery,
 * which at-least-once allows. Each is fenced by its claim token (a delivery
 * taken over by another worker is left alone), and the endpoints that received one have their
 * failure state cleared (recordDeliveredCtes). Returns the ids that were recorded.
 */
export async function completeDeliveredAttempts(db: Db, attempts: DeliveredAttempt[], at: Date): Promise<string[]> {
  if (attempts.length === 0) return [];
  const done = await rows(
    db,
    sql<{ id: string }>`WITH async AS (
       SELECT set_config('synchronous_commit', 'off', true)
     ), ${recordDeliveredCtes(attempts, at)}
     SELECT done.id FROM async, done`,
  );
  return done.map((r) => r.id);
}
