// The delivery loop: claim due deliveries, attempt each (signed, pinned, one deadline), record, reschedule or finish.
//
// Flow per delivery: claim (SKIP LOCKED, lease, claim token) -> load endpoint + stored payload ->
// revalidate URL and DNS -> sign with a fresh timestamp -> POST -> one short transaction that
// locks the endpoint, applies the fenced result, updates endpoint counters and, on exhaustion,
// disables the endpoint, fails its waiting deliveries and emits `agent.webhook_disabled`.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { Knex } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as deliveries from '../db/repositories/delivery.repository.js';
import * as endpoints from '../db/repositories/webhook.repository.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { appendEvent } from '../db/repositories/event.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { noTracing, SpanKind, type Tracing } from '../observability/tracing.js';
import type { WorkerLoop } from '../worker.js';
import { nextAttemptAt, parseRetryAfter, RETRY_HORIZON_MS } from './backoff.js';
import { createSender, isRetryable, MAX_PAYLOAD_BYTES, USER_AGENT, type ErrorClass, type Sender, type SendResult } from './sender.js';
import { signatureHeader } from './signing.js';
import { assertPublicHttpsUrl, DnsResolutionError, UrlRejectedError, type Resolver } from './url-safety.js';

export interface DeliveryWorkerDeps {
  db: Knex;
  clock: Clock;
  log: Logger;
  sealer: Sealer;
  /** Lease on a claimed delivery; well above the attempt deadline (config WEBHOOK_LEASE_MS). */
  leaseMs: number;
  /** One deadline for DNS, connect, TLS, headers and body (config WEBHOOK_ATTEMPT_TIMEOUT_MS). */
  attemptTimeoutMs: number;
  allowLoopback: boolean;
  resolver?: Resolver;
  sender?: Sender;
  /** Extra trusted CAs for the default sender (tests). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Deliveries in flight per worker. */
  concurrency?: number;
  /** Deliveries in flight per endpoint across all workers. */
  perEndpointInFlight?: number;
  /** Longest idle sleep; the loop wakes earlier when the next delivery falls due, and on LISTEN/NOTIFY. */
  idleMs?: number;
  /** When set, the loop LISTENs on this Postgres for new deliveries. */
  databaseUrl?: string | null;
  /** Bound on opening the LISTEN connection (config DB_CONNECT_TIMEOUT_MS); none when absent. */
  connectTimeoutMs?: number;
  random?: () => number;
  metrics?: Pick<Metrics, 'webhookAttempt'>;
  tracing?: Tracing;
}

export interface DeliveryWorker {
  /** Claims one batch and runs it to completion; returns how many deliveries were attempted. */
  runOnce(): Promise<number>;
  /** The background loop for src/worker.ts. */
  loop: WorkerLoop;
  close(): void;
}

interface Outcome {
  result: SendResult;
  latencyMs: number | null;
}

const noResponse = (errorClass: ErrorClass, message: string | null = null): SendResult => ({ httpStatus: null, responseBody: '', errorClass, retryAfter: null, message });

/** A one-shot wake-up: `wait` resolves on `wake`, on timeout or on abort; a wake while not waiting is remembered. */
function createWaker() {
  let pending = false;
  let resolveWait: (() => void) | null = null;
  return {
    wake() {
      if (resolveWait) resolveWait();
      else pending = true;
    },
    wait(ms: number, signal: AbortSignal): Promise<void> {
      if (pending || signal.aborted) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolveWait = null;
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener('abort', done, { once: true });
        resolveWait = done;
      });
    },
  };
}

export function createDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const { db, clock, log, sealer } = deps;
  const sender = deps.sender ?? createSender({ ca: deps.ca });
  const concurrency = deps.concurrency ?? 32;
  const perEndpointInFlight = deps.perEndpointInFlight ?? 4;
  const idleMs = deps.idleMs ?? 1000;
  const random = deps.random ?? Math.random;
  const tracing = deps.tracing ?? noTracing;

  /** The `now` of the latest claim: a delivery due after it fell due since, and is not held back by a cap. */
  let lastClaimAt = 0;

  async function claim(batch: number): Promise<deliveries.DeliveryRow[]> {
    const now = clock.now();
    lastClaimAt = now.getTime();
    return deliveries.claimDueDeliveries(db, {
      now,
      leaseUntil: new Date(now.getTime() + deps.leaseMs),
      token: randomUUID(),
      batch,
      perEndpointCap: perEndpointInFlight,
      deadlineMs: RETRY_HORIZON_MS,
    });
  }

  async function attempt(row: deliveries.DeliveryRow, endpoint: endpoints.WebhookEndpointRow, payload: string): Promise<Outcome> {
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) return { result: noResponse('payload_too_large'), latencyMs: null };
    const signal = AbortSignal.timeout(deps.attemptTimeoutMs);
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let target;
    try {
      target = await assertPublicHttpsUrl(endpoint.url, { allowLoopback: deps.allowLoopback, resolver: deps.resolver, signal });
    } catch (err) {
      if (err instanceof UrlRejectedError || err instanceof DnsResolutionError) log.info({ endpointId: endpoint.id, detail: err.detail }, 'webhook target refused');
      if (err instanceof UrlRejectedError) return { result: noResponse('url_rejected', err.reason), latencyMs: elapsed() };
      if (err instanceof DnsResolutionError) return { result: noResponse(signal.aborted ? 'timeout' : 'dns_error', err.message), latencyMs: elapsed() };
      throw err;
    }
    const now = clock.now();
    const secrets = [sealer.open(endpoint.sealed_secret)];
    if (endpoint.sealed_previous_secret && endpoint.previous_secret_expires_at && new Date(endpoint.previous_secret_expires_at) > now) {
      secrets.push(sealer.open(endpoint.sealed_previous_secret));
    }
    const timestamp = Math.floor(now.getTime() / 1000);
    const headers = {
      'User-Agent': USER_AGENT,
      'Service-Webhook-Id': row.event_id,
      'Service-Webhook-Timestamp': String(timestamp),
      'Service-Webhook-Signature': signatureHeader(secrets, timestamp, payload),
      'Content-Type': 'application/json',
    };
    const result = await tracing.span(
      'webhook POST',
      { 'http.request.method': 'POST', 'server.address': target.hostname, 'agentapi.delivery_id': row.id },
      async (span) => {
        const sent = await sender.send({ target, body: payload, signal, headers });
        if (tracing.enabled) span.setAttributes({ 'http.response.status_code': sent.httpStatus ?? 0, 'agentapi.error_class': sent.errorClass ?? 'none' });
        return sent;
      },
      SpanKind.CLIENT,
    );
    return { result, latencyMs: elapsed() };
  }

  /** Applies one attempt's outcome; failures run under the endpoint's row lock (lock order: endpoint, then delivery). */
  async function record(row: deliveries.DeliveryRow, token: string, outcome: Outcome): Promise<void> {
    const { result, latencyMs } = outcome;
    const errorClass = result.errorClass;
    const base = (now: Date) => ({ http_status: result.httpStatus, latency_ms: latencyMs, response_body: result.responseBody, updated_at: now });
    if (errorClass === null) {
      // The hot path takes no endpoint lock: the endpoint row is written only when its failure
      // state must be cleared or last_delivered_at is over a second old, so deliveries to one
      // endpoint do not queue behind each other's commits.
      await withTransaction(db, async (trx) => {
        // Losing this commit in a crash only means one more (deduplicated) delivery, which
        // at-least-once allows; not waiting for the WAL flush doubles throughput (see bench).
        await trx.raw('SET LOCAL synchronous_commit = off');
        const now = clock.now();
        const done = await deliveries.completeClaimedDelivery(trx, row.id, token, { ...base(now), status: 'delivered', error_class: null, next_attempt_at: null, terminal_at: now });
        if (done) await endpoints.recordEndpointSuccess(trx, row.endpoint_id, now);
      });
      deps.metrics?.webhookAttempt('delivered', null);
      return;
    }
    await withTransaction(db, async (trx) => {
      const endpoint = await endpoints.findEndpointById(trx, row.endpoint_id, { forUpdate: true });
      if (!endpoint) return; // deleted meanwhile; its deliveries went with it
      const now = clock.now();
      const baseNow = base(now);
      if (errorClass === 'endpoint_disabled') {
        await deliveries.completeClaimedDelivery(trx, row.id, token, { ...baseNow, status: 'failed', error_class: errorClass, next_attempt_at: null, terminal_at: now });
        deps.metrics?.webhookAttempt('failed', errorClass);
        return;
      }
      let patch: deliveries.AttemptResultPatch;
      let exhausted = false;
      if (isRetryable(errorClass)) {
        const honoursRetryAfter = result.httpStatus === 429 || result.httpStatus === 503;
        const next = nextAttemptAt({
          attempts: row.attempt,
          now,
          deadline: new Date(row.deadline_at ?? now.getTime()),
          retryAfterMs: honoursRetryAfter ? parseRetryAfter(result.retryAfter, now) : null,
          random,
        });
        const stillWanted = endpoint.enabled || row.event_type === 'webhook.test';
        if (next && stillWanted) patch = { ...baseNow, status: 'retrying', error_class: errorClass, next_attempt_at: next };
        else if (!next) {
          exhausted = true;
          patch = { ...baseNow, status: 'failed', error_class: 'retries_exhausted', next_attempt_at: null, terminal_at: now };
        } else patch = { ...baseNow, status: 'failed', error_class: 'endpoint_disabled', next_attempt_at: null, terminal_at: now };
      } else {
        patch = { ...baseNow, status: 'failed', error_class: errorClass, next_attempt_at: null, terminal_at: now };
      }
      const done = await deliveries.completeClaimedDelivery(trx, row.id, token, patch);
      if (!done) return; // fenced out: another worker holds this delivery now
      deps.metrics?.webhookAttempt(patch.status === 'retrying' ? 'retrying' : 'failed', patch.error_class ?? null);
      await endpoints.recordEndpointFailure(trx, endpoint.id, now);
      if (exhausted && (await endpoints.disableEndpointForFailures(trx, endpoint.id, now))) {
        const failed = await deliveries.failWaitingDeliveries(trx, endpoint.id, 'endpoint_disabled', now);
        const wallet = await findWalletByAgent(trx, endpoint.agent_id);
        await appendEvent(trx, {
          type: 'agent.webhook_disabled',
          agentId: endpoint.agent_id,
          walletId: wallet?.id ?? '',
          operationId: null,
          resource: { type: 'webhook_endpoint', id: endpoint.id },
          data: { webhook_id: endpoint.id, url: endpoint.url, disabled_reason: 'sustained_failures', failing_since: endpoint.failing_since ? new Date(endpoint.failing_since).toISOString() : now.toISOString() },
          createdAt: now,
        });
        log.warn({ endpointId: endpoint.id, failedDeliveries: failed }, 'webhook endpoint disabled after sustained failures');
      }
    });
  }

  /** One delivery attempt, as a root span when tracing is on (its queries and the POST are its children). */
  function process(row: deliveries.DeliveryRow): Promise<void> {
    return tracing.span('webhook delivery', { 'agentapi.delivery_id': row.id, 'agentapi.event_type': row.event_type }, () => processDelivery(row));
  }

  async function processDelivery(row: deliveries.DeliveryRow): Promise<void> {
    const token = row.claim_token!;
    try {
      const endpoint = await endpoints.findEndpointById(db, row.endpoint_id);
      if (!endpoint) return;
      let outcome: Outcome;
      if (!endpoint.enabled && row.event_type !== 'webhook.test') outcome = { result: noResponse('endpoint_disabled'), latencyMs: null };
      else {
        const payload = await deliveries.findEventPayload(db, row.event_id);
        if (payload === undefined) return;
        outcome = await attempt(row, endpoint, payload);
      }
      await record(row, token, outcome);
    } catch (err) {
      // Left in flight: the lease expires and another claim retries it.
      log.error({ err, deliveryId: row.id }, 'webhook delivery attempt failed unexpectedly');
    }
  }

  async function runOnce(): Promise<number> {
    const rows = await claim(concurrency);
    await Promise.all(rows.map(process));
    return rows.length;
  }

  function listen(onNotify: () => void, signal: AbortSignal): void {
    if (!deps.databaseUrl) return;
    const connect = async () => {
      while (!signal.aborted) {
        // keepAlive: a LISTEN connection is idle for long stretches; a dead peer must still be noticed.
        const client = new pg.Client({ connectionString: deps.databaseUrl!, connectionTimeoutMillis: deps.connectTimeoutMs, keepAlive: true });
        try {
          const ended = new Promise<void>((resolve) => {
            client.on('error', () => resolve());
            client.on('end', () => resolve());
          });
          await client.connect();
          client.on('notification', onNotify);
          await client.query(`LISTEN ${deliveries.DELIVERY_CHANNEL}`);
          onNotify(); // catch up with anything enqueued while not listening
          const stop = () => void client.end().catch(() => undefined);
          signal.addEventListener('abort', stop, { once: true });
          await ended;
          signal.removeEventListener('abort', stop);
        } catch (err) {
          log.warn({ err }, 'webhook LISTEN connection failed; polling meanwhile');
        }
        await client.end().catch(() => undefined);
        if (!signal.aborted) await new Promise((r) => setTimeout(r, 1000));
      }
    };
    void connect();
  }

  /** How long to sleep: until the next delivery falls due (by the injected clock), at most `idleMs`. */
  async function untilNextDue(): Promise<number> {
    try {
      const at = await deliveries.nextDueAt(db);
      const ms = at ? at.getTime() - clock.now().getTime() : 0;
      if (ms > 0) return Math.min(idleMs, ms);
      // Fell due after the last claim looked (a timer fires a millisecond early, or the claim was slow): claim again now.
      if (at && at.getTime() > lastClaimAt) return 0;
      // Due already but not claimed (its endpoint is at its in-flight cap): a finishing attempt wakes the loop.
      return idleMs;
    } catch {
      return idleMs; // the database is away: poll at the idle pace
    }
  }

  const loop: WorkerLoop = {
    name: 'webhook-deliveries',
    async run(signal) {
      const inflight = new Set<Promise<void>>();
      const waker = createWaker();
      listen(() => waker.wake(), signal);
      // Claim in batches (each claim is a short serialised transaction): only once half the
      // slots are free, or when nothing is in flight.
      const threshold = Math.max(1, Math.floor(concurrency / 2));
      while (!signal.aborted) {
        const room = concurrency - inflight.size;
        let claimed = 0;
        if (room >= threshold || (room > 0 && inflight.size === 0)) {
          try {
            const rows = await claim(room);
            claimed = rows.length;
            for (const row of rows) {
              const task: Promise<void> = process(row).finally(() => {
                inflight.delete(task);
                waker.wake();
              });
              inflight.add(task);
            }
          } catch (err) {
            log.error({ err }, 'webhook claim failed');
          }
        }
        if (claimed < room || inflight.size >= concurrency - threshold + 1) await waker.wait(await untilNextDue(), signal);
      }
      // SIGTERM: no new claims; attempts in flight finish within their deadline and are recorded.
      await Promise.allSettled([...inflight]);
      // Then the pooled keep-alive sockets go, so nothing holds the process open.
      sender.close();
    },
  };

  return { runOnce, loop, close: () => sender.close() };
}
