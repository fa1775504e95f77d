// Claiming due webhook deliveries: the expired-lease reset and the claimers' lock, then the fenced claim (which also
// records the delivered attempts of the cycle before), as one batch of two statements.
import { batch, type Db } from '../../knex.js';
import { prepared, sql } from '../../sql.js';
import type { ClaimedDelivery, ClaimedRow, ClaimOptions } from '../delivery.repository.js';
import { recordDeliveredCtes, type DeliveredAttempt } from './record-deliveries.js';

/** The advisory lock key that serialises delivery claimers (transaction-scoped); no other lock may use it. */
const CLAIM_LOCK_KEY = 7411003;
/**
 * Most endpoints with due work one claim looks at (the loose index scan stops there): bounds the
 * claim's cost when many endpoints are due; the rest wait for the next claim.
 */
const CLAIM_ENDPOINT_SCAN = 1000;

/** The first statement of a claim: the expired-lease reset and the claim lock (synchronous commit off, below). */
const lockStatement = (o: ClaimOptions) => sql`WITH expired AS (
       UPDATE webhook_deliveries SET status = 'retrying', claim_token = NULL, lease_until = NULL, updated_at = ${o.now}
       WHERE status = 'in_flight' AND lease_until <= ${o.now}
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
export async function recordAndClaimDeliveries(db: Db, o: ClaimOptions, delivered?: DeliveredBatch): Promise<{ recorded: string[]; claimed: ClaimedDelivery[] }> {
  // One batch: under read committed the claim takes its snapshot after the lock statement has finished, so it sees
  // every claim committed before it took the lock. On the pool: BEGIN, then both statements with the COMMIT.
  // Both are named statements (one text each): parsing and planning the claim afresh cost ~1.1 ms of Postgres CPU
  // per cycle, a third of it; prepared, Postgres plans it five times per connection, then keeps a generic plan,
  // which the claim's shape keeps on indexes (claimStatement).
  const [, claimed] = await batch(db, [prepared(lockStatement(o), 'claim_lock'), prepared(claimStatement(o, delivered?.attempts ?? [], delivered?.at ?? o.now), 'claim_deliveries')]);
  return splitClaimResult(claimed);
}

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
      endpoint: {
        id: row.endpoint_id,
        url: ep_url,
        enabled: ep_enabled,
        sealed_secret: ep_sealed_secret,
        sealed_previous_secret: ep_sealed_previous_secret,
        previous_secret_expires_at: ep_previous_secret_expires_at,
      },
    });
  }
  return { recorded, claimed };
}

/**
 * The claim, after the lock statement. It records the delivered attempts first (recordDeliveredCtes; none is an
 * empty set), then counts slots.
 */
const claimStatement = (o: ClaimOptions, attempts: readonly DeliveredAttempt[], at: Date) => sql<ClaimResultRow>`WITH RECURSIVE ${recordDeliveredCtes(attempts, at)}, walk AS (
     -- Loose index scan (index webhook_deliveries_endpoint_due): one probe per endpoint with due
     -- work, so a huge backlog on one endpoint costs one step, not a scan of all its rows.
     (SELECT d.endpoint_id FROM webhook_deliveries d
      WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ${o.now}
      ORDER BY d.endpoint_id LIMIT 1)
     UNION ALL
     SELECT (SELECT d.endpoint_id FROM webhook_deliveries d
             WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ${o.now} AND d.endpoint_id > walk.endpoint_id
             ORDER BY d.endpoint_id LIMIT 1)
     FROM walk WHERE walk.endpoint_id IS NOT NULL
   ), inflight AS (
     -- The snapshot predates this statement's own writes: attempts recorded above (done) still
     -- read as in flight here, and no longer hold a slot.
     SELECT endpoint_id, count(*)::int AS n FROM webhook_deliveries
     WHERE status = 'in_flight' AND lease_until > ${o.now} AND id NOT IN (SELECT id FROM done) GROUP BY endpoint_id
   ), eps AS (
     SELECT endpoint_id FROM walk WHERE endpoint_id IS NOT NULL LIMIT ${CLAIM_ENDPOINT_SCAN}
   ), slots AS (
     SELECT eps.endpoint_id, GREATEST(${o.perEndpointCap} - COALESCE(i.n, 0), 0) AS free
     FROM eps LEFT JOIN inflight i ON i.endpoint_id = eps.endpoint_id
   ), cand AS (
     SELECT c.id, c.next_attempt_at FROM slots
     CROSS JOIN LATERAL (
       SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
       WHERE d.endpoint_id = slots.endpoint_id AND d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ${o.now}
         -- Recovered deliveries go one at a time in event order: none while an earlier one waits
         -- (one recorded by this statement still reads as in flight: the next claim sends its successor).
         AND (d.recovery_seq IS NULL OR NOT EXISTS (
           SELECT 1 FROM webhook_deliveries p
           WHERE p.endpoint_id = d.endpoint_id AND p.recovery_seq < d.recovery_seq AND p.status IN ('pending', 'retrying', 'in_flight')))
       -- The index's own order (endpoint_id, next_attempt_at): the scan stops after free rows. A
       -- tie-break on id here made it read and sort the endpoint's whole due backlog on every claim.
       ORDER BY d.next_attempt_at LIMIT slots.free
     ) c
     WHERE slots.free > 0 AND ${o.batch} > 0
   ), picked AS (
     -- Only the rows taken are locked (a lock is a heap write): locking every endpoint's
     -- candidates cost up to endpoints x cap row locks per claim (measured: 45 endpoints at
     -- cap 32 locked ~1,400 rows to take 64). Claimers are serialised, so a row skipped here is
     -- held by a requeue or a failure being recorded; the status is checked again once locked.
     -- Driven from the few candidates, one primary key probe each: the locking subquery is not
     -- flattened, so no plan (the generic one of the prepared statement included) can hash-join the
     -- candidates against every due row instead (a generic plan did: 3,600 rows read to take 32).
     SELECT p.id FROM (SELECT id FROM cand ORDER BY next_attempt_at, id LIMIT ${o.batch}) c
     CROSS JOIN LATERAL (
       SELECT d.id FROM webhook_deliveries d
       WHERE d.id = c.id AND d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ${o.now}
       FOR UPDATE SKIP LOCKED
     ) p
   ), claimed AS (
     UPDATE webhook_deliveries w
     SET status = 'in_flight', claim_token = ${o.token}, lease_until = ${o.leaseUntil}, attempt = w.attempt + 1,
         first_attempt_at = COALESCE(w.first_attempt_at, ${o.now}), last_attempt_at = ${o.now},
         deadline_at = COALESCE(w.deadline_at, ${new Date(o.now.getTime() + o.deadlineMs)}), updated_at = ${o.now}
     FROM events ev, webhook_endpoints ep
     -- The picked ids as an array: an index lookup whatever the estimate (joined to picked, plans seq-scanned
     -- and hashed the whole table for 32 rows).
     WHERE w.id = ANY (ARRAY(SELECT id FROM picked)) AND ev.id = w.event_id AND ep.id = w.endpoint_id
     -- What the attempts need comes back with the claim (both rows exist: the foreign keys cascade); only
     -- the columns they use (ClaimedRow): node-postgres parses every returned value, seven timestamps a row for w.*.
     RETURNING w.id, w.event_id, w.endpoint_id, w.event_type, w.attempt, w.deadline_at, w.claim_token, ev.payload, ep.url AS ep_url, ep.enabled AS ep_enabled, ep.sealed_secret AS ep_sealed_secret,
       ep.sealed_previous_secret AS ep_sealed_previous_secret, ep.previous_secret_expires_at AS ep_previous_secret_expires_at
   )
   -- The recorded ids ride in the same result, one row each with only recorded_id set
   -- (a full join on ids that never match: a recorded row was in flight, a claimed one was not).
   SELECT claimed.*, done.id AS recorded_id FROM claimed FULL JOIN done ON done.id = claimed.id`;
