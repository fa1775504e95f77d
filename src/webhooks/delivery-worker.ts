// The delivery loop: claim due deliveries, attempt each (signed, pinned, one deadline), record, reschedule or finish.
//
// Flow per batch: claim (SKIP LOCKED, lease, claim token; the payloads come with it) -> load the
// batch's endpoints -> per delivery: revalidate URL and DNS -> sign with a fresh timestamp -> POST
// -> record (delivered attempts group-committed; a failure in one short transaction that locks the
// endpoint, applies the fenced result, updates endpoint counters and, on exhaustion, disables the
// endpoint, fails its waiting deliveries and emits `agent.webhook_disabled`: delivery-recorder.ts).
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Knex } from '../db/knex.js';
import * as deliveries from '../db/repositories/delivery.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { noTracing, SpanKind, type Tracing } from '../observability/tracing.js';
import type { WorkerLoop } from '../worker.js';
import { RETRY_HORIZON_MS } from './backoff.js';
import { createRecorder, type Outcome } from './delivery-recorder.js';
import { createWaker, listenForDeliveries } from './delivery-wakeup.js';
import { createSender, MAX_PAYLOAD_BYTES, USER_AGENT, type ErrorClass, type Sender, type SendResult } from './sender.js';
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
  /** Deliveries in flight per worker that have not yet been running `slowAfterMs` (the global cap). */
  concurrency?: number;
  /** Deliveries in flight per endpoint across all workers. */
  perEndpointInFlight?: number;
  /**
   * An attempt still running after this long stops counting against `concurrency` (it waits on a
   * slow receiver, not on this process), so slow endpoints cannot hold the slots others need.
   */
  slowAfterMs?: number;
  /** Most such slow attempts per worker besides `concurrency` (bounds sockets and memory). */
  maxSlow?: number;
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

/** Defaults measured in scripts/bench/webhooks.ts (docs/ARCHITECTURE.md, "Performance: deliveries"). */
export const DEFAULT_CONCURRENCY = 128;
export const DEFAULT_PER_ENDPOINT_IN_FLIGHT = 32;

const noResponse = (errorClass: ErrorClass, message: string | null = null): SendResult => ({ httpStatus: null, responseBody: '', errorClass, retryAfter: null, message });

export function createDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const { db, clock, log, sealer } = deps;
  const sender = deps.sender ?? createSender({ ca: deps.ca });
  const concurrency = deps.concurrency ?? DEFAULT_CONCURRENCY;
  const perEndpointInFlight = deps.perEndpointInFlight ?? DEFAULT_PER_ENDPOINT_IN_FLIGHT;
  const slowAfterMs = deps.slowAfterMs ?? 1000;
  const maxSlow = deps.maxSlow ?? 4 * concurrency;
  const idleMs = deps.idleMs ?? 1000;
  const tracing = deps.tracing ?? noTracing;
  const recorder = createRecorder({ db, clock, log, random: deps.random ?? Math.random, metrics: deps.metrics });

  /** The `now` of the latest claim: a delivery due after it fell due since, and is not held back by a cap. */
  let lastClaimAt = 0;

  /** One claim per batch; each delivery then runs on what it returned. */
  async function claim(batch: number): Promise<Array<() => Promise<void>>> {
    const now = clock.now();
    lastClaimAt = now.getTime();
    const rows = await deliveries.claimDueDeliveries(db, {
      now,
      leaseUntil: new Date(now.getTime() + deps.leaseMs),
      token: randomUUID(),
      batch,
      perEndpointCap: perEndpointInFlight,
      deadlineMs: RETRY_HORIZON_MS,
    });
    return rows.map((row) => () => process(row));
  }

  async function attempt(row: deliveries.DeliveryRow, endpoint: deliveries.ClaimedDelivery['endpoint'], payload: string): Promise<Outcome> {
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
        const sent = await sender.send({ target, body: payload, signal, headers, poolKey: endpoint.id });
        if (tracing.enabled) span.setAttributes({ 'http.response.status_code': sent.httpStatus ?? 0, 'agentapi.error_class': sent.errorClass ?? 'none' });
        return sent;
      },
      SpanKind.CLIENT,
    );
    return { result, latencyMs: elapsed() };
  }

  /** One delivery attempt, as a root span when tracing is on (its queries and the POST are its children). */
  function process(row: deliveries.ClaimedDelivery): Promise<void> {
    return tracing.span('webhook delivery', { 'agentapi.delivery_id': row.id, 'agentapi.event_type': row.event_type }, () => processDelivery(row));
  }

  async function processDelivery(row: deliveries.ClaimedDelivery): Promise<void> {
    const token = row.claim_token!;
    const endpoint = row.endpoint;
    try {
      let outcome: Outcome;
      if (!endpoint.enabled && row.event_type !== 'webhook.test') outcome = { result: noResponse('endpoint_disabled'), latencyMs: null };
      else outcome = await attempt(row, endpoint, row.payload);
      await recorder.record(row, token, outcome);
    } catch (err) {
      // Left in flight: the lease expires and another claim retries it.
      log.error({ err, deliveryId: row.id }, 'webhook delivery attempt failed unexpectedly');
    }
  }

  async function runOnce(): Promise<number> {
    const tasks = await claim(concurrency);
    await Promise.all(tasks.map((run) => run()));
    return tasks.length;
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
      // `active` attempts count against `concurrency`; after `slowAfterMs` one moves to `slow`,
      // which has its own bound, so receivers that answer slowly do not block the others.
      const active = new Set<Promise<void>>();
      const slow = new Set<Promise<void>>();
      const waker = createWaker();
      if (deps.databaseUrl) listenForDeliveries({ databaseUrl: deps.databaseUrl, connectTimeoutMs: deps.connectTimeoutMs, log, onNotify: () => waker.wake(), signal });
      // Claims are serialised in this loop, in batches: finishing attempts wake it once half of
      // those active after the last claim are done (or none is left), whether the global cap or
      // the endpoints' caps limited that claim; a claim for every finished attempt would cost a
      // transaction each. NOTIFY (new work) and a delivery falling due wake it at once.
      let activeAfterClaim = 0;
      let freedSinceClaim = 0;
      const freed = () => {
        freedSinceClaim++;
        if (active.size === 0 || 2 * freedSinceClaim >= activeAfterClaim) waker.wake();
      };
      const start = (run: () => Promise<void>) => {
        const task: Promise<void> = run().finally(() => {
          clearTimeout(timer);
          if (active.delete(task)) freed();
          else if (slow.delete(task)) waker.wake(); // room under maxSlow
        });
        const timer = setTimeout(() => {
          if (!active.delete(task)) return;
          slow.add(task);
          freed();
        }, slowAfterMs);
        active.add(task);
      };
      while (!signal.aborted) {
        const room = Math.min(concurrency - active.size, concurrency + maxSlow - active.size - slow.size);
        let claimed = 0;
        if (room > 0) {
          freedSinceClaim = 0;
          try {
            const tasks = await claim(room);
            claimed = tasks.length;
            for (const run of tasks) start(run);
          } catch (err) {
            log.error({ err }, 'webhook claim failed');
          }
          activeAfterClaim = active.size;
        }
        // Nothing claimable: sleep until the next delivery falls due. Otherwise attempts are in
        // flight and each one finishing wakes the loop (as do NOTIFY and slow attempts).
        await waker.wait(claimed === 0 && room > 0 ? await untilNextDue() : idleMs, signal);
      }
      // SIGTERM: no new claims; attempts in flight finish within their deadline and are recorded.
      await Promise.allSettled([...active, ...slow]);
      // Then the pooled keep-alive sockets go, so nothing holds the process open.
      sender.close();
    },
  };

  return { runOnce, loop, close: () => sender.close() };
}
