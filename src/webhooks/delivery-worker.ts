// The delivery loop: claim due deliveries, attempt each (signed, pinned, one deadline), record, reschedule or finish.
//
// Flow per cycle: one transaction records the delivered attempts finished since the last cycle and
// claims (SKIP LOCKED, lease, claim token; payloads and endpoint secrets come with it) into the slots
// they freed -> per delivery: revalidate URL and DNS -> sign with a fresh timestamp -> POST -> a
// delivered attempt waits for the next cycle; a failure is recorded in one short transaction that locks
// the endpoint, applies the fenced result, updates endpoint counters and, on exhaustion, disables the
// endpoint, fails its waiting deliveries and emits `agent.webhook_disabled` (delivery-recorder.ts).
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Knex } from '../db/knex.js';
import * as deliveries from '../db/repositories/delivery.repository.js';
import { recordAndClaimDeliveries } from '../db/repositories/sql/claim-deliveries.js';
import { completeDeliveredAttempts, type DeliveredAttempt } from '../db/repositories/sql/record-deliveries.js';
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
import { DnsResolutionError, parsePublicHttpsUrl, resolvePublicTarget, UrlRejectedError, type Resolver, type SafeTarget } from './url-safety.js';

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

/** Defaults measured in scripts/bench/webhooks.ts (docs/perf/issue-12-performance.md, "Performance: deliveries"). */
export const DEFAULT_CONCURRENCY = 128;
export const DEFAULT_PER_ENDPOINT_IN_FLIGHT = 32;

/** Most delivered attempts one cycle records (the JSON parameter stays well under a megabyte of response bodies). */
const MAX_GROUP = 200;
/** Opened signing secrets kept (one or two per endpoint recently delivered to); cleared whole when full. */
const MAX_OPENED_SECRETS = 2048;
/** Parsed endpoint URLs kept (one per endpoint recently delivered to). */
const MAX_PARSED_URLS = 2048;

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
  /** Wakes the loop: a delivered attempt to record, a cycle done, a failure recorded, a slow attempt, NOTIFY. */
  const waker = createWaker();
  /**
   * Set when a claim may find something the last one did not: start, NOTIFY, a due time reached, a
   * failure recorded or an attempt gone to the slow lane (a slot freed), a cycle that filled its batch.
   * A delivered attempt does not set it: the next cycle records it and claims into its slot anyway.
   */
  let wantClaim = true;
  const claimSoon = () => {
    wantClaim = true;
    waker.wake();
  };

  /** The `now` of the latest claim: a delivery due after it fell due since, and is not held back by a cap. */
  let lastClaimAt = 0;
  /**
   * Delivered attempts waiting for the next cycle: their slots are free once it commits. Group commit
   * without a timer: those that finish while one cycle runs go together in the next.
   */
  let delivered: DeliveredAttempt[] = [];

  const takeDelivered = (): DeliveredAttempt[] => {
    const group = delivered.length <= MAX_GROUP ? delivered : delivered.slice(0, MAX_GROUP);
    delivered = delivered.length <= MAX_GROUP ? [] : delivered.slice(MAX_GROUP);
    return group;
  };

  const countRecorded = (recorded: string[]) => {
    for (let i = 0; i < recorded.length; i++) deps.metrics?.webhookAttempt('delivered', null);
  };

  /**
   * One cycle: records what was delivered since the last and claims up to `batch` in the same
   * transaction; each claimed delivery then runs on what the claim returned. A failed cycle leaves
   * its delivered attempts in flight: their leases expire and they are attempted again.
   */
  async function cycle(batch: number): Promise<{ recorded: number; tasks: Array<() => Promise<void>> }> {
    const group = takeDelivered();
    const now = clock.now();
    lastClaimAt = now.getTime();
    try {
      // Its own root span (the queries are its children): it serves many deliveries at once.
      const { recorded, claimed } = await tracing.span('webhook claim', { 'agentapi.recorded': group.length, 'agentapi.batch': batch }, () =>
        recordAndClaimDeliveries(
          db,
          { now, leaseUntil: new Date(now.getTime() + deps.leaseMs), token: randomUUID(), batch, perEndpointCap: perEndpointInFlight, deadlineMs: RETRY_HORIZON_MS },
          group.length > 0 ? { attempts: group, at: now } : undefined,
        ),
      );
      countRecorded(recorded);
      return { recorded: recorded.length, tasks: claimed.map((row) => () => process(row)) };
    } catch (err) {
      if (group.length > 0) log.error({ err, deliveries: group.length }, 'recording delivered webhook attempts failed');
      throw err;
    }
  }

  /** Records what is still waiting, without claiming (end of runOnce, shutdown). */
  async function flushDelivered(): Promise<void> {
    while (delivered.length > 0) {
      const group = takeDelivered();
      try {
        countRecorded(await completeDeliveredAttempts(db, group, clock.now()));
      } catch (err) {
        log.error({ err, deliveries: group.length }, 'recording delivered webhook attempts failed');
      }
    }
  }

  /** Secrets opened once per sealed value, not once per attempt (AES-GCM and a base64 decode each). */
  const opened = new Map<string, string>();
  const open = (sealed: string): string => {
    let secret = opened.get(sealed);
    if (secret === undefined) {
      if (opened.size >= MAX_OPENED_SECRETS) opened.clear();
      secret = sealer.open(sealed);
      opened.set(sealed, secret);
    }
    return secret;
  };

  /**
   * parsePublicHttpsUrl's result per URL string (pure: it depends on the string and allowLoopback only);
   * a refused URL is not kept and throws again. Cleared whole when full.
   */
  const parsedUrls = new Map<string, SafeTarget>();
  const parseUrl = (url: string): SafeTarget => {
    let target = parsedUrls.get(url);
    if (target === undefined) {
      target = parsePublicHttpsUrl(url, { allowLoopback: deps.allowLoopback });
      if (parsedUrls.size >= MAX_PARSED_URLS) parsedUrls.clear();
      parsedUrls.set(url, target);
    }
    return target;
  };

  async function attempt(row: deliveries.ClaimedRow, endpoint: deliveries.ClaimedDelivery['endpoint'], payload: string): Promise<Outcome> {
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) return { result: noResponse('payload_too_large'), latencyMs: null };
    // The attempt's one deadline, aborted as AbortSignal.timeout would (same reason), but by a timer
    // cleared when the attempt ends: AbortSignal.timeout's own timer outlives a fast attempt, then fires.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), deps.attemptTimeoutMs);
    timer.unref();
    try {
      return await attemptWithin(row, endpoint, payload, deadline.signal);
    } finally {
      clearTimeout(timer);
    }
  }

  async function attemptWithin(row: deliveries.ClaimedRow, endpoint: deliveries.ClaimedDelivery['endpoint'], payload: string, signal: AbortSignal): Promise<Outcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let target;
    try {
      // The URL's parse and static checks are kept per URL string; a name is resolved and its addresses
      // checked again on every attempt (resolvePublicTarget), as a DNS answer may change.
      target = await resolvePublicTarget(parseUrl(endpoint.url), { resolver: deps.resolver, signal });
    } catch (err) {
      if (err instanceof UrlRejectedError || err instanceof DnsResolutionError) log.info({ endpointId: endpoint.id, detail: err.detail }, 'webhook target refused');
      if (err instanceof UrlRejectedError) return { result: noResponse('url_rejected', err.reason), latencyMs: elapsed() };
      if (err instanceof DnsResolutionError) return { result: noResponse(signal.aborted ? 'timeout' : 'dns_error', err.message), latencyMs: elapsed() };
      throw err;
    }
    const now = clock.now();
    const secrets = [open(endpoint.sealed_secret)];
    if (endpoint.sealed_previous_secret && endpoint.previous_secret_expires_at && new Date(endpoint.previous_secret_expires_at) > now) {
      secrets.push(open(endpoint.sealed_previous_secret));
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

  /**
   * One delivery attempt, as a root span when tracing is on: the POST is its child, as are the queries
   * recording a failure; a delivered attempt is recorded by the next cycle's `webhook claim` span.
   */
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
      const { result, latencyMs } = outcome;
      if (result.errorClass === null) {
        delivered.push({ id: row.id, token, httpStatus: result.httpStatus, latencyMs, responseBody: result.responseBody });
        waker.wake();
      } else {
        await recorder.recordFailure(row, token, outcome);
        claimSoon();
      }
    } catch (err) {
      // Left in flight: the lease expires and another claim retries it.
      log.error({ err, deliveryId: row.id }, 'webhook delivery attempt failed unexpectedly');
    }
  }

  async function runOnce(): Promise<number> {
    const { tasks } = await cycle(concurrency);
    await Promise.all(tasks.map((run) => run()));
    await flushDelivered();
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
      if (deps.databaseUrl) listenForDeliveries({ databaseUrl: deps.databaseUrl, connectTimeoutMs: deps.connectTimeoutMs, log, onNotify: claimSoon, signal });
      const start = (run: () => Promise<void>) => {
        const task: Promise<void> = run().finally(() => {
          clearTimeout(timer);
          if (!active.delete(task)) slow.delete(task);
        });
        const timer = setTimeout(() => {
          if (!active.delete(task)) return;
          slow.add(task);
          claimSoon();
        }, slowAfterMs);
        active.add(task);
      };
      // Each cycle records every delivered attempt that finished while the one before ran and claims
      // into the room left. Up to two run at once: when attempts finish while one is running, a
      // second goes out at once with them and waits on the claim lock in Postgres, instead of waiting
      // here for the first's answer and only then making its own round trip (a slot is idle for
      // about one cycle between two attempts, so every round trip saved is throughput).
      const cycles = new Set<Promise<void>>();
      let cycling = 0;
      let reserved = 0; // room promised to the cycles running
      let foundNothing = false; // the last cycle claimed and recorded nothing: sleep until the next is due
      const runCycle = async (batch: number) => {
        cycling++;
        reserved += batch;
        try {
          const done = await cycle(batch);
          for (const run of done.tasks) start(run);
          // Claim again when it filled its batch (more may be due) or refilled fewer slots than it
          // recorded (the successor of a recovered delivery waits for its predecessor's commit).
          if ((batch > 0 && done.tasks.length === batch) || done.tasks.length < done.recorded) wantClaim = true;
          foundNothing = done.recorded === 0 && done.tasks.length === 0;
        } catch (err) {
          log.error({ err }, 'webhook claim failed');
          foundNothing = true; // the database is away: poll at the idle pace (untilNextDue fails too)
        } finally {
          cycling--;
          reserved -= batch;
          waker.wake();
        }
      };
      while (!signal.aborted) {
        const room = Math.max(0, Math.min(concurrency - active.size, concurrency + maxSlow - active.size - slow.size) - reserved);
        if (cycling < 2 && (delivered.length > 0 || (cycling === 0 && room > 0 && wantClaim))) {
          // Let the answers that arrived together finish first (one poll phase), so they go in one cycle.
          await new Promise((resolve) => setImmediate(resolve));
          wantClaim = false;
          // Half the global room at most per cycle, so a second cycle still has room to refill the
          // slots it records while the first is running.
          const running = runCycle(Math.min(room, Math.ceil(concurrency / 2)));
          cycles.add(running);
          void running.finally(() => cycles.delete(running));
          continue;
        }
        // Nothing claimable: sleep until the next delivery falls due. Otherwise attempts (or a cycle)
        // are running and each one finishing wakes the loop, as do NOTIFY and slow attempts.
        const woken = await waker.wait(cycling === 0 && room > 0 && foundNothing ? await untilNextDue() : idleMs, signal);
        if (!woken) wantClaim = true; // a due time, or the poll fallback
      }
      await Promise.allSettled([...cycles]); // their claims start attempts, awaited below
      // SIGTERM: no new claims; attempts in flight finish within their deadline and are recorded.
      await Promise.allSettled([...active, ...slow]);
      await flushDelivered();
      // Then the pooled keep-alive sockets go, so nothing holds the process open.
      sender.close();
    },
  };

  return { runOnce, loop, close: () => sender.close() };
}
