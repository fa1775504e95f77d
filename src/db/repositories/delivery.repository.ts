// Webhook delivery records: fan-out from the outbox, attempt results, recovery, listing. The hot statements of the
// delivery loop are files of their own: sql/claim-deliveries.ts (fenced claims with leases), sql/record-deliveries.ts.
import type { Schema } from '../../lib/contract.js';
import { rows, type Db } from '../knex.js';
import { prepared, sql } from '../sql.js';

export const DELIVERY_CHANNEL = 'webhook_deliveries';
type DeliveryStatus = Schema<'DeliveryStatus'>;

export interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  agent_id: string;
  event_type: string;
  event_created_at: Date;
  status: DeliveryStatus;
  attempt: number;
  http_status: number | null;
  error_class: string | null;
  latency_ms: number | null;
  response_body: string | null;
  next_attempt_at: Date | null;
  first_attempt_at: Date | null;
  last_attempt_at: Date | null;
  terminal_at: Date | null;
  deadline_at: Date | null;
  claim_token: string | null;
  lease_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Fan-out, in the caller's (event's) transaction: one row per subscribed enabled endpoint of the
 * agent; `webhook.test` goes only to the tested endpoint, whatever its event types. The unique
 * (event_id, endpoint_id) makes a repeat a no-op. NOTIFY is delivered at commit, waking workers.
 */
export async function insertDeliveriesForEvent(db: Db, event: { id: string; agentId: string; type: string; resource: { type: string; id: string }; createdAt: Date }): Promise<number> {
  const isTest = event.type === 'webhook.test';
  const result = await db.raw(
    `WITH ins AS (
       INSERT INTO webhook_deliveries (id, event_id, endpoint_id, agent_id, event_type, event_created_at, status, attempt, next_attempt_at, created_at, updated_at)
       SELECT gen_random_uuid(), :eventId, e.id, e.agent_id, :type, :createdAt, 'pending', 0, :createdAt, :createdAt, :createdAt
       FROM webhook_endpoints e
       WHERE e.agent_id = :agentId
         AND ${isTest ? 'e.id::text = :resourceId' : 'e.enabled AND :type = ANY(e.event_types)'}
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
       RETURNING 1
     )
     SELECT count(*)::int AS n, CASE WHEN count(*) > 0 THEN pg_notify('${DELIVERY_CHANNEL}', '') END AS notified FROM ins`,
    { eventId: event.id, type: event.type, createdAt: event.createdAt, agentId: event.agentId, resourceId: event.resource.id },
  );
  return Number(result.rows[0]?.n ?? 0);
}

/** The columns of a claimed delivery that its attempt and its recording use (the claim returns only these). */
export type ClaimedRow = Pick<DeliveryRow, 'id' | 'event_id' | 'endpoint_id' | 'event_type' | 'attempt' | 'deadline_at' | 'claim_token'>;

/** A claimed delivery with what its attempt needs: the stored payload and its endpoint's target and secrets. */
export type ClaimedDelivery = ClaimedRow & {
  payload: string;
  endpoint: { id: string; url: string; enabled: boolean; sealed_secret: string; sealed_previous_secret: string | null; previous_secret_expires_at: Date | null };
};

export interface ClaimOptions {
  now: Date;
  leaseUntil: Date;
  token: string;
  batch: number;
  perEndpointCap: number;
  deadlineMs: number;
}

/**
 * When the next delivery falls due: the earliest pending/retrying `next_attempt_at` (index
 * webhook_deliveries_due) or in-flight lease expiry, whichever is first; null when nothing waits.
 * The loop sleeps until then instead of a whole poll interval.
 */
export async function nextDueAt(db: Db): Promise<Date | null> {
  const result = await db.raw(
    `SELECT LEAST(
       (SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status IN ('pending', 'retrying')),
       (SELECT min(lease_until) FROM webhook_deliveries WHERE status = 'in_flight')
     ) AS at`,
  );
  const at = (result.rows as { at: Date | null }[])[0]?.at;
  return at ? new Date(at) : null;
}

export type AttemptResultPatch = Partial<Pick<DeliveryRow, 'status' | 'http_status' | 'error_class' | 'latency_ms' | 'response_body' | 'next_attempt_at' | 'terminal_at'>> & { updated_at: Date };

/** Fenced completion: applies only while this claim still holds the delivery. */
export async function completeClaimedDelivery(db: Db, id: string, token: string, patch: AttemptResultPatch): Promise<DeliveryRow | undefined> {
  const [row] = await db('webhook_deliveries')
    .where({ id, claim_token: token, status: 'in_flight' })
    .update({ ...patch, claim_token: null, lease_until: null })
    .returning('*');
  return row as DeliveryRow | undefined;
}

/** On auto-disable: every not-yet-attempted or waiting delivery of the endpoint fails. */
export async function failWaitingDeliveries(db: Db, endpointId: string, errorClass: string, at: Date): Promise<number> {
  return db('webhook_deliveries')
    .where({ endpoint_id: endpointId })
    .whereIn('status', ['pending', 'retrying'])
    .update({ status: 'failed', error_class: errorClass, next_attempt_at: null, terminal_at: at, updated_at: at });
}

/**
 * Event recovery for one endpoint (owner re-enable): every event of the agent since `since`, of a
 * subscribed type, that failed terminally at this endpoint (re-queued) or never reached it because
 * it was disabled (queued now). Delivered events are left alone. Each carries its event's seq so the
 * claim keeps their original order. Returns how many were queued. A re-queued delivery keeps its
 * history: `attempt` counts on, the outcome fields stay those of its latest attempt until the next
 * one, and every earlier attempt stays in webhook_delivery_attempts; only the 72 h deadline restarts.
 */
export async function requeueForRecovery(db: Db, endpoint: { id: string; agent_id: string; event_types: string[] }, since: Date, now: Date): Promise<number> {
  const requeued = await db.raw(
    `UPDATE webhook_deliveries d
     SET status = 'pending', next_attempt_at = :now, terminal_at = NULL, deadline_at = NULL, recovery_seq = e.seq, updated_at = :now
     FROM events e
     WHERE d.endpoint_id = :endpointId AND d.status = 'failed' AND e.id = d.event_id AND e.created_at >= :since
       AND e.type = ANY(:types)
     RETURNING 1`,
    { now, endpointId: endpoint.id, since, types: endpoint.event_types },
  );
  const inserted = await db.raw(
    `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, agent_id, event_type, event_created_at, status, attempt, next_attempt_at, recovery_seq, created_at, updated_at)
     SELECT gen_random_uuid(), e.id, :endpointId, e.agent_id, e.type, e.created_at, 'pending', 0, :now, e.seq, :now, :now
     FROM events e
     WHERE e.agent_id = :agentId AND e.created_at >= :since AND e.type = ANY(:types)
       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.event_id = e.id AND x.endpoint_id = :endpointId)
     ON CONFLICT (event_id, endpoint_id) DO NOTHING
     RETURNING 1`,
    { now, endpointId: endpoint.id, agentId: endpoint.agent_id, since, types: endpoint.event_types },
  );
  const count = (requeued.rows?.length ?? 0) + (inserted.rows?.length ?? 0);
  if (count > 0) await db.raw(`SELECT pg_notify('${DELIVERY_CHANNEL}', '')`);
  return count;
}

/**
 * A new attempt of one delivery now (agent retry): a finished one is queued again, a waiting one is due at once.
 * Its history stays (as requeueForRecovery's); the retry series' deadline restarts with the next claim.
 */
export async function requeueDelivery(db: Db, id: string, now: Date): Promise<DeliveryRow | undefined> {
  const [row] = await db('webhook_deliveries')
    .where({ id })
    .whereIn('status', ['pending', 'retrying', 'delivered', 'failed'])
    .update({ status: 'pending', next_attempt_at: now, deadline_at: null, terminal_at: null, recovery_seq: null, updated_at: now })
    .returning('*');
  if (row) await db.raw(`SELECT pg_notify('${DELIVERY_CHANNEL}', '')`);
  return row as DeliveryRow | undefined;
}

export async function findDelivery(db: Db, id: string): Promise<DeliveryRow | undefined> {
  return db('webhook_deliveries').where({ id }).first();
}

export interface DeliveryAttemptRow {
  attempt: number;
  attempted_at: Date | null;
  finished_at: Date;
  outcome: string;
  http_status: number | null;
  error_class: string | null;
  latency_ms: number | null;
  response_body: string | null;
  lease_expired: boolean;
}

/**
 * Whether the agent owns the endpoint and, if so, the id of the delivery of that endpoint: one statement (the two
 * checks of the attempts read). `undefined` when the agent has no such endpoint; `{ deliveryId: null }` when the
 * endpoint has no such delivery.
 */
export async function findOwnedDeliveryId(db: Db, agentId: string, endpointId: string, deliveryId: string): Promise<{ deliveryId: string | null } | undefined> {
  const [found] = await rows(
    db,
    prepared(
      sql<{ delivery_id: string | null }>`SELECT d.id AS delivery_id FROM webhook_endpoints e
        LEFT JOIN webhook_deliveries d ON d.id = ${deliveryId} AND d.endpoint_id = e.id
        WHERE e.id = ${endpointId} AND e.agent_id = ${agentId}`,
      'find_owned_delivery_id',
    ),
  );
  return found ? { deliveryId: found.delivery_id } : undefined;
}

/** A delivery's recorded attempts, newest first, those numbered below `before` when given (keyset on attempt, id). */
export async function listDeliveryAttempts(db: Db, deliveryId: string, options: { before?: number; limit: number }): Promise<DeliveryAttemptRow[]> {
  const query = db('webhook_delivery_attempts')
    .where({ delivery_id: deliveryId })
    .select('attempt', 'attempted_at', 'finished_at', 'outcome', 'http_status', 'error_class', 'latency_ms', 'response_body', 'lease_expired');
  if (options.before !== undefined) query.andWhere('attempt', '<', options.before);
  return query
    .orderBy([
      { column: 'attempt', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(options.limit);
}

/** Newest first, keyset on (created_at, id), exclusive of `after`. */
/**
 * The first page of an endpoint's deliveries, newest first, if the endpoint belongs to `agentId`: one statement (the
 * ownership check and the list), prepared. `undefined` when the agent has no such endpoint; `[]` when it has no
 * deliveries (under these filters).
 */
export async function listOwnedDeliveries(db: Db, agentId: string, endpointId: string, options: { status?: string; eventId?: string; limit: number }): Promise<DeliveryRow[] | undefined> {
  const filters = sql`${options.status !== undefined ? sql` AND status = ${options.status}` : sql``}${options.eventId !== undefined ? sql` AND event_id = ${options.eventId}` : sql``}`;
  const found = await rows(
    db,
    prepared(
      sql<DeliveryRow & { owned_endpoint_id: string; id: string | null }>`SELECT e.id AS owned_endpoint_id, d.* FROM webhook_endpoints e
        LEFT JOIN LATERAL (SELECT * FROM webhook_deliveries WHERE endpoint_id = e.id${filters} ORDER BY created_at DESC, id DESC LIMIT ${options.limit}) d ON true
        WHERE e.id = ${endpointId} AND e.agent_id = ${agentId}`,
    ),
  );
  if (found.length === 0) return undefined;
  return found.filter((r) => r.id !== null).map(({ owned_endpoint_id: _e, ...row }) => row as DeliveryRow);
}

export async function listDeliveries(db: Db, endpointId: string, options: { status?: string; eventId?: string; after?: { created_at: Date; id: string }; limit: number }): Promise<DeliveryRow[]> {
  const query = db('webhook_deliveries').where({ endpoint_id: endpointId });
  if (options.status) query.andWhere({ status: options.status });
  if (options.eventId) query.andWhere({ event_id: options.eventId });
  if (options.after) {
    const { created_at, id } = options.after;
    query.andWhere((q) => q.where('created_at', '<', created_at).orWhere((q2) => q2.where('created_at', '=', created_at).andWhere('id', '<', id)));
  }
  return query
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(options.limit);
}
