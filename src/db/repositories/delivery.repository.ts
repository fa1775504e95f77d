// Webhook delivery records: fan-out from the outbox, fenced claims with leases, attempt results, listing.
import type { Schema } from '../../lib/contract.js';
import pg from 'pg';
import { multiStatementQueries, prepared, withTransaction, type Db } from '../knex.js';

const { escapeLiteral } = pg;

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
export async function insertDeliveriesForEvent(
  db: Db,
  event: { id: string; agentId: string; type: string; resource: { type: string; id: string }; createdAt: Date },
): Promise<number> {
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

/** The advisory lock key that serialises delivery claimers (transaction-scoped); no other lock may use it. */
const CLAIM_LOCK_KEY = 7411003;
/**
 * Most endpoints with due work one claim looks at (the loose index scan stops there): bounds the
 * claim's cost when many endpoints are due; the rest wait for the next claim.
 */
const CLAIM_ENDPOINT_SCAN = 1000;

/** The first statement of a claim (bindings as in recordAndClaimDeliveries): the expired-lease reset and the claim lock. */
const LOCK_SQL = `WITH expired AS (
       UPDATE webhook_deliveries SET status = 'retrying', claim_token = NULL, lease_until = NULL, updated_at = :now
       WHERE status = 'in_flight' AND lease_until <= :now
     )
     SELECT pg_advisory_xact_lock(${CLAIM_LOCK_KEY}), set_config('synchronous_commit', 'off', true)`;

/** Delivered attempts recorded by a claim before it counts its endpoints' free slots. */
export interface DeliveredBatch {
  attempts: DeliveredAttempt[];
  at: Date;
}

/**
 * Claims due deliveries (pending/retrying whose time has come; in_flight rows whose lease
 * expired are first put back) with FOR UPDATE SKIP LOCKED, at most `perEndpointCap` in flight per endpoint
 * (counting live leases), so one slow receiver cannot take every slot. A transaction-scoped
 * advisory lock serialises claimers, which keeps the per-endpoint count exact across workers:
 * the claim statement takes its snapshot after the lock, so it sees every claim committed before.
 * The claim token fences completions: a worker whose lease was taken over cannot record its result.
 *
 * `delivered`: the caller's delivered attempts, recorded in the same statement (as
 * `completeDeliveredAttempts`) before the slots are counted, so a finished attempt frees its slot in
 * the claim that records it: one transaction per cycle instead of a write and then a claim.
 *
 * Every claim commits with `synchronous_commit` off (no wait for the WAL flush before the POSTs
 * start): a commit lost in a Postgres crash only means a delivery is attempted once more (its claim or
 * its result undone), which at-least-once allows; leases and claim tokens still fence every worker.
 */
export async function claimDueDeliveries(db: Db, options: ClaimOptions, delivered?: DeliveredBatch): Promise<ClaimedDelivery[]> {
  return (await recordAndClaimDeliveries(db, options, delivered)).claimed;
}

/** `claimDueDeliveries` that also returns which of `delivered` were recorded (the others were fenced out). */
export async function recordAndClaimDeliveries(db: Db, options: ClaimOptions, delivered?: DeliveredBatch): Promise<{ recorded: string[]; claimed: ClaimedDelivery[] }> {
  const attempts = delivered?.attempts ?? [];
  const at = delivered?.at ?? options.now;
  const bindings = {
    now: options.now,
    leaseUntil: options.leaseUntil,
    token: options.token,
    batch: options.batch,
    cap: options.perEndpointCap,
    scan: CLAIM_ENDPOINT_SCAN,
    deadline: new Date(options.now.getTime() + options.deadlineMs),
    rows: JSON.stringify(attempts.map(toRecordRow)),
    at,
    stale: new Date(at.getTime() - 1000),
  };
  if (multiStatementQueries(db)) {
    // One round trip: both statements in one simple-protocol message, which Postgres runs as one
    // implicit transaction, each statement with its own snapshot (so the claim still sees every claim
    // committed before it took the lock). That protocol takes no parameters: values go in as literals.
    const results = (await db.raw(`${inlinedLock(bindings)};\n${inlinedClaim(bindings)}`)) as unknown as Array<{ rows: ClaimResultRow[] }>;
    return splitClaimResult(results[results.length - 1]!.rows);
  }
  return withTransaction(db, async (trx) => {
    // Embedded: the same two statements as a transaction (PGlite has one connection, no contention).
    await trx.raw(LOCK_SQL, bindings);
    const result = await trx.raw(CLAIM_SQL, bindings);
    return splitClaimResult(result.rows);
  });
}
/** The stored payload (exact bytes to send) for a delivery. */
export async function findEventPayload(db: Db, eventId: string): Promise<string | undefined> {
  const row = await db('events').where({ id: eventId }).first('payload');
  return row?.payload as string | undefined;
}

export type AttemptResultPatch = Partial<
  Pick<DeliveryRow, 'status' | 'http_status' | 'error_class' | 'latency_ms' | 'response_body' | 'next_attempt_at' | 'terminal_at'>
> & { updated_at: Date };

/** Fenced completion: applies only while this claim still holds the delivery. */
export async function completeClaimedDelivery(db: Db, id: string, token: string, patch: AttemptResultPatch): Promise<DeliveryRow | undefined> {
  const [row] = await db('webhook_deliveries')
    .where({ id, claim_token: token, status: 'in_flight' })
    .update({ ...patch, claim_token: null, lease_until: null })
    .returning('*');
  return row as DeliveryRow | undefined;
}

export interface DeliveredAttempt {
  id: string;
  token: string;
  httpStatus: number | null;
  latencyMs: number | null;
  responseBody: string;
}

/**
 * Records many delivered attempts in one statement (its own transaction, one round trip), committed
 * without waiting for the WAL flush: losing it in a crash only means one more (deduplicated) delivery,
 * which at-least-once allows. Each is fenced by its claim token (a delivery
 * taken over by another worker is left alone), and the endpoints that received one have their
 * failure state cleared; an endpoint row is written only when that state must change or
 * last_delivered_at is over a second old, so a busy endpoint is not rewritten on every delivery.
 * Returns the ids that were recorded.
 */
export async function completeDeliveredAttempts(db: Db, attempts: DeliveredAttempt[], at: Date): Promise<string[]> {
  if (attempts.length === 0) return [];
  const result = await db.raw(
    `WITH async AS (
       SELECT set_config('synchronous_commit', 'off', true)
     ), ${RECORD_DELIVERED_CTES}
     SELECT done.id FROM async, done`,
    { rows: JSON.stringify(attempts.map(toRecordRow)), at, stale: new Date(at.getTime() - 1000) },
  );
  return (result.rows as { id: string }[]).map((r) => r.id);
}

const toRecordRow = (a: DeliveredAttempt) => ({ id: a.id, token: a.token, http_status: a.httpStatus, latency_ms: a.latencyMs, response_body: a.responseBody });

/**
 * Delivered attempts (`:rows`, JSON of toRecordRow) applied at `:at`, fenced by claim token; `done`
 * has the recorded ids. An endpoint row is written only when its failure state must change or
 * last_delivered_at is over a second old (`:stale`), so a busy endpoint is not rewritten every time.
 */
const RECORD_DELIVERED_CTES = `v AS (
       SELECT v.* FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS v(id uuid, token uuid, http_status int, latency_ms int, response_body text)
     ), done AS (
       UPDATE webhook_deliveries w
       SET status = 'delivered', http_status = v.http_status, latency_ms = v.latency_ms, response_body = v.response_body,
           error_class = NULL, next_attempt_at = NULL, terminal_at = :at, updated_at = :at, claim_token = NULL, lease_until = NULL
       FROM v WHERE w.id = v.id AND w.claim_token = v.token AND w.status = 'in_flight'
       RETURNING w.id, w.endpoint_id
     ), cleared AS (
       UPDATE webhook_endpoints e
       SET consecutive_failures = 0, failing_since = NULL, last_delivered_at = :at, updated_at = :at
       WHERE e.id IN (SELECT endpoint_id FROM done)
         AND (e.consecutive_failures <> 0 OR e.failing_since IS NOT NULL OR e.last_delivered_at IS NULL OR e.last_delivered_at < :stale)
     )`;

type ClaimResultRow = ClaimedRow & {
  recorded_id: string | null;
  payload: string;
  ep_url: string;
  ep_enabled: boolean;
  ep_sealed_secret: string;
  ep_sealed_previous_secret: string | null;
  ep_previous_secret_expires_at: Date | null;
};

function splitClaimResult(rows: ClaimResultRow[]): { recorded: string[]; claimed: ClaimedDelivery[] } {
  const recorded: string[] = [];
  const claimed: ClaimedDelivery[] = [];
  for (const { recorded_id, ep_url, ep_enabled, ep_sealed_secret, ep_sealed_previous_secret, ep_previous_secret_expires_at, ...row } of rows) {
    if (recorded_id !== null) {
      recorded.push(recorded_id);
      continue;
    }
    claimed.push({
      ...row,
      endpoint: { id: row.endpoint_id, url: ep_url, enabled: ep_enabled, sealed_secret: ep_sealed_secret, sealed_previous_secret: ep_sealed_previous_secret, previous_secret_expires_at: ep_previous_secret_expires_at },
    });
  }
  return { recorded, claimed };
}

/**
 * The claim (bindings as in recordAndClaimDeliveries), after the lock statement. It records the
 * delivered attempts first (RECORD_DELIVERED_CTES, empty `:rows` for none), then counts slots.
 */
const CLAIM_SQL = `WITH RECURSIVE ${RECORD_DELIVERED_CTES}, walk AS (
     -- Loose index scan (index webhook_deliveries_endpoint_due): one probe per endpoint with due
     -- work, so a huge backlog on one endpoint costs one step, not a scan of all its rows.
     (SELECT d.endpoint_id FROM webhook_deliveries d
      WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= :now
      ORDER BY d.endpoint_id LIMIT 1)
     UNION ALL
     SELECT (SELECT d.endpoint_id FROM webhook_deliveries d
             WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= :now AND d.endpoint_id > walk.endpoint_id
             ORDER BY d.endpoint_id LIMIT 1)
     FROM walk WHERE walk.endpoint_id IS NOT NULL
   ), inflight AS (
     -- The snapshot predates this statement's own writes: attempts recorded above (done) still
     -- read as in flight here, and no longer hold a slot.
     SELECT endpoint_id, count(*)::int AS n FROM webhook_deliveries
     WHERE status = 'in_flight' AND lease_until > :now AND id NOT IN (SELECT id FROM done) GROUP BY endpoint_id
   ), eps AS (
     SELECT endpoint_id FROM walk WHERE endpoint_id IS NOT NULL LIMIT :scan
   ), slots AS (
     SELECT eps.endpoint_id, GREATEST(:cap - COALESCE(i.n, 0), 0) AS free
     FROM eps LEFT JOIN inflight i ON i.endpoint_id = eps.endpoint_id
   ), cand AS (
     SELECT c.id, c.next_attempt_at FROM slots
     CROSS JOIN LATERAL (
       SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
       WHERE d.endpoint_id = slots.endpoint_id AND d.status IN ('pending', 'retrying') AND d.next_attempt_at <= :now
         -- Recovered deliveries go one at a time in event order: none while an earlier one waits
         -- (one recorded by this statement still reads as in flight: the next claim sends its successor).
         AND (d.recovery_seq IS NULL OR NOT EXISTS (
           SELECT 1 FROM webhook_deliveries p
           WHERE p.endpoint_id = d.endpoint_id AND p.recovery_seq < d.recovery_seq AND p.status IN ('pending', 'retrying', 'in_flight')))
       -- The index's own order (endpoint_id, next_attempt_at): the scan stops after free rows. A
       -- tie-break on id here made it read and sort the endpoint's whole due backlog on every claim.
       ORDER BY d.next_attempt_at LIMIT slots.free
     ) c
     WHERE slots.free > 0 AND :batch > 0
   ), picked AS (
     -- Only the rows taken are locked (a lock is a heap write): locking every endpoint's
     -- candidates cost up to endpoints x cap row locks per claim (measured: 45 endpoints at
     -- cap 32 locked ~1,400 rows to take 64). Claimers are serialised, so a row skipped here is
     -- held by a requeue or a failure being recorded; the status is checked again once locked.
     -- Driven from the few candidates (primary key probes): as id IN (...) the planner could
     -- hash-join against every due row when its statistics lag a growing backlog.
     SELECT d.id FROM (SELECT id FROM cand ORDER BY next_attempt_at, id LIMIT :batch) c
     JOIN webhook_deliveries d ON d.id = c.id
     WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= :now
     FOR UPDATE OF d SKIP LOCKED
   ), claimed AS (
     UPDATE webhook_deliveries w
     SET status = 'in_flight', claim_token = :token, lease_until = :leaseUntil, attempt = w.attempt + 1,
         first_attempt_at = COALESCE(w.first_attempt_at, :now), last_attempt_at = :now,
         deadline_at = COALESCE(w.deadline_at, :deadline), updated_at = :now
     FROM picked, events ev, webhook_endpoints ep
     WHERE w.id = picked.id AND ev.id = w.event_id AND ep.id = w.endpoint_id
     -- What the attempts need comes back with the claim (both rows exist: the foreign keys cascade); only
     -- the columns they use (ClaimedRow): node-postgres parses every returned value, seven timestamps a row for w.*.
     RETURNING w.id, w.event_id, w.endpoint_id, w.event_type, w.attempt, w.deadline_at, w.claim_token, ev.payload, ep.url AS ep_url, ep.enabled AS ep_enabled, ep.sealed_secret AS ep_sealed_secret,
       ep.sealed_previous_secret AS ep_sealed_previous_secret, ep.previous_secret_expires_at AS ep_previous_secret_expires_at
   )
   -- The recorded ids ride in the same result, one row each with only recorded_id set
   -- (a full join on ids that never match: a recorded row was in flight, a claimed one was not).
   SELECT claimed.*, done.id AS recorded_id FROM claimed FULL JOIN done ON done.id = claimed.id`;

const inlinedLock = inlinedStatement(LOCK_SQL);
const inlinedClaim = inlinedStatement(CLAIM_SQL);

/**
 * Named bindings (`:name`, not `::type`) as SQL literals, for the simple query protocol: strings
 * through pg's escapeLiteral, dates as timestamptz, integers checked. Only for values this module builds.
 * The text is split at its binding names once; each call joins the pieces with the literals, each
 * literal made once however often its name appears (the claim names `:now` a dozen times).
 */
function inlinedStatement(sql: string): (bindings: Record<string, Date | string | number>) => string {
  // Odd indexes hold the names, even ones the text between them.
  const pieces = sql.split(/(?<!:):([a-zA-Z]\w*)/);
  return (bindings) => {
    const literals = new Map<string, string>();
    let out = pieces[0]!;
    for (let i = 1; i < pieces.length; i += 2) {
      const name = pieces[i]!;
      let literal = literals.get(name);
      if (literal === undefined) {
        literal = Object.hasOwn(bindings, name) ? toLiteral(name, bindings[name]!) : `:${name}`;
        literals.set(name, literal);
      }
      out += literal + pieces[i + 1]!;
    }
    return out;
  };
}

function toLiteral(name: string, value: Date | string | number): string {
  if (value instanceof Date) return `${escapeLiteral(value.toISOString())}::timestamptz`;
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new Error(`binding ${name} is not an integer`);
    return String(value);
  }
  return escapeLiteral(value);
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

/** A delivery's recorded attempts, newest first, those numbered below `before` when given (keyset on attempt, id). */
export async function listDeliveryAttempts(db: Db, deliveryId: string, options: { before?: number; limit: number }): Promise<DeliveryAttemptRow[]> {
  const query = db('webhook_delivery_attempts')
    .where({ delivery_id: deliveryId })
    .select('attempt', 'attempted_at', 'finished_at', 'outcome', 'http_status', 'error_class', 'latency_ms', 'response_body', 'lease_expired');
  if (options.before !== undefined) query.andWhere('attempt', '<', options.before);
  return query.orderBy([{ column: 'attempt', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(options.limit);
}

/** Newest first, keyset on (created_at, id), exclusive of `after`. */
/**
 * The first page of an endpoint's deliveries, newest first, if the endpoint belongs to `agentId`: one statement (the
 * ownership check and the list), prepared. `undefined` when the agent has no such endpoint; `[]` when it has no
 * deliveries (under these filters).
 */
export async function listOwnedDeliveries(db: Db, agentId: string, endpointId: string, options: { status?: string; eventId?: string; limit: number }): Promise<DeliveryRow[] | undefined> {
  const filters = `${options.status !== undefined ? ' AND status = ?' : ''}${options.eventId !== undefined ? ' AND event_id = ?' : ''}`;
  const bindings = [...(options.status !== undefined ? [options.status] : []), ...(options.eventId !== undefined ? [options.eventId] : []), options.limit, endpointId, agentId];
  const { rows } = (await prepared(
    db.raw(
      `SELECT e.id AS owned_endpoint_id, d.* FROM webhook_endpoints e
        LEFT JOIN LATERAL (SELECT * FROM webhook_deliveries WHERE endpoint_id = e.id${filters} ORDER BY created_at DESC, id DESC LIMIT ?) d ON true
        WHERE e.id = ? AND e.agent_id = ?`,
      bindings,
    ),
  )) as { rows: (DeliveryRow & { owned_endpoint_id: string; id: string | null })[] };
  if (rows.length === 0) return undefined;
  return rows.filter((r) => r.id !== null).map(({ owned_endpoint_id: _e, ...row }) => row as DeliveryRow);
}

export async function listDeliveries(
  db: Db,
  endpointId: string,
  options: { status?: string; eventId?: string; after?: { created_at: Date; id: string }; limit: number },
): Promise<DeliveryRow[]> {
  const query = db('webhook_deliveries').where({ endpoint_id: endpointId });
  if (options.status) query.andWhere({ status: options.status });
  if (options.eventId) query.andWhere({ event_id: options.eventId });
  if (options.after) {
    const { created_at, id } = options.after;
    query.andWhere((q) => q.where('created_at', '<', created_at).orWhere((q2) => q2.where('created_at', '=', created_at).andWhere('id', '<', id)));
  }
  return query.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(options.limit);
}
