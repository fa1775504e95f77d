// Prometheus metrics (prom-client) on their own registry per process; a no-op object when METRICS_PORT is unset.
import type { Server } from 'node:http';
import type { Knex } from 'knex';
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import { observeOperationEntries } from '../db/knex.js';
import * as repo from '../db/repositories/metrics.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';

export type IdempotencyOutcome = 'replayed' | 'key_reuse_mismatch' | 'request_in_progress';
export type DeliveryOutcome = 'delivered' | 'retrying' | 'failed';

export interface Metrics {
  /** Null when metrics are off: callers that would do work only for metrics check this. */
  readonly registry: Registry | null;
  observeRequest(operation: string, status: number, seconds: number): void;
  rateLimitRefused(rateClass: string): void;
  idempotency(outcome: IdempotencyOutcome): void;
  webhookAttempt(outcome: DeliveryOutcome, errorClass: string | null): void;
  /** Gauges read at scrape time from this process's database pool, Redis client and tables. */
  watch(deps: { db: Knex; isRedisReady: (() => boolean) | null; clock: Clock; log: Logger }): void;
}

const noop = () => {};

/** prom-client (~1.7 MB of heap with what it imports) loads only when metrics are on (synchronously: createMetrics is). */
const promClient = (
  (load) => () =>
    load('prom-client') as typeof PromClient
)(createRequire(import.meta.url));

/** Metrics off: every method does nothing, so the hot paths pay one call. */
export const noMetrics: Metrics = { registry: null, observeRequest: noop, rateLimitRefused: noop, idempotency: noop, webhookAttempt: noop, watch: noop };

/** Table aggregates are cached this long, so a fast scraper (or several) cannot turn them into load. */
const AGGREGATE_TTL_MS = 10_000;

interface TarnPool {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  on(event: 'acquireFail', listener: (eventId: number, err: Error) => void): void;
}

export function createMetrics(enabled: boolean): Metrics {
  if (!enabled) return noMetrics;
  const { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } = promClient();
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({ name: 'agentapi_http_requests_total', help: 'HTTP requests answered, by operationId (or route family) and status', labelNames: ['operation', 'status'], registers });
  const latency = new Histogram({
    name: 'agentapi_http_request_duration_seconds',
    help: 'Time from the first byte read to the response written, by operationId and status',
    labelNames: ['operation', 'status'],
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const refused = new Counter({ name: 'agentapi_rate_limit_refusals_total', help: 'Requests refused with 429, by rate-limit class (or per-address bucket)', labelNames: ['class'], registers });
  const idempotency = new Counter({ name: 'agentapi_idempotency_total', help: 'Idempotency-Key outcomes other than a first execution: replays and conflicts', labelNames: ['outcome'], registers });
  const attempts = new Counter({ name: 'agentapi_webhook_delivery_attempts_total', help: 'Webhook delivery attempts by outcome and error class', labelNames: ['outcome', 'error_class'], registers });

  return {
    registry,
    observeRequest(operation, status, seconds) {
      const labels = { operation, status: String(status) };
      requests.inc(labels);
      latency.observe(labels, seconds);
    },
    rateLimitRefused: (rateClass) => refused.inc({ class: rateClass }),
    idempotency: (outcome) => idempotency.inc({ outcome }),
    webhookAttempt: (outcome, errorClass) => attempts.inc({ outcome, error_class: errorClass ?? 'none' }),
    watch(deps) {
      watchPool(registry, deps.db);
      // Counted where the rows change, after their commit: a scrape reads no table for it. Per process from 0 at start
      // (Prometheus counter semantics): sum the processes' rates, e.g. sum by (type, status) (increase(...[1h])).
      const operations = new Counter({
        name: 'agentapi_operations_total',
        help: 'Operations that entered a status (created in it or moved to it) in this process, by type and status',
        labelNames: ['type', 'status'],
        registers,
      });
      observeOperationEntries(deps.db, (entered) => {
        for (const e of entered) operations.inc({ type: e.type, status: e.status });
      });
      new Gauge({
        name: 'agentapi_redis_up',
        help: '1 when this process has a ready Redis connection, 0 when not; absent in the embedded mode',
        registers,
        collect() {
          if (deps.isRedisReady) this.set(deps.isRedisReady() ? 1 : 0);
        },
      });
      watchTables(registry, deps);
    },
  };
}

function watchPool(registry: Registry, db: Knex): void {
  const { Counter, Gauge } = promClient();
  const registers = [registry];
  const pool = () => (db.client as { pool?: TarnPool }).pool;
  new Gauge({
    name: 'agentapi_db_pool_connections',
    help: 'Database pool connections by state (used, free) and requests waiting for one (waiting)',
    labelNames: ['state'],
    registers,
    collect() {
      const p = pool();
      if (!p) return;
      this.set({ state: 'used' }, p.numUsed());
      this.set({ state: 'free' }, p.numFree());
      this.set({ state: 'waiting' }, p.numPendingAcquires());
    },
  });
  const timeouts = new Counter({
    name: 'agentapi_db_timeouts_total',
    help: 'Pool acquire timeouts (kind=acquire) and statements cancelled by statement_timeout (kind=statement)',
    labelNames: ['kind'],
    registers,
  });
  timeouts.inc({ kind: 'acquire' }, 0);
  timeouts.inc({ kind: 'statement' }, 0);
  pool()?.on('acquireFail', (_id, err) => {
    if (err?.name === 'TimeoutError' || err?.name === 'KnexTimeoutError') timeouts.inc({ kind: 'acquire' });
  });
  db.on('query-error', (err: { code?: string }) => {
    if (err?.code === '57014') timeouts.inc({ kind: 'statement' });
  });
}

function watchTables(registry: Registry, deps: { db: Knex; clock: Clock; log: Logger }): void {
  const { Gauge } = promClient();
  const registers = [registry];
  let cached: { at: number; value: Promise<Aggregates> } | null = null;
  const aggregates = (): Promise<Aggregates> => {
    const now = Date.now();
    if (!cached || now - cached.at > AGGREGATE_TTL_MS) {
      const value = readAggregates(deps.db, deps.clock.now()).catch((err: unknown) => {
        deps.log.warn({ err }, 'metrics: table aggregates unavailable');
        cached = null;
        return null;
      });
      cached = { at: now, value: value as Promise<Aggregates> };
    }
    return cached.value;
  };
  new Gauge({
    name: 'agentapi_settlement_lag_seconds',
    help: 'Age of the oldest operation past its settle_after and not yet settled (0 when none)',
    registers,
    async collect() {
      const a = await aggregates();
      if (a) this.set(a.settlementLag);
    },
  });
  new Gauge({
    name: 'agentapi_webhook_queue_depth',
    help: 'Live webhook deliveries by endpoint state (enabled, disabled) and status (pending, retrying, in_flight)',
    labelNames: ['endpoint_state', 'status'],
    registers,
    async collect() {
      const a = await aggregates();
      this.reset();
      for (const r of a?.queue ?? []) this.set({ endpoint_state: r.endpoint_state, status: r.status }, r.count);
    },
  });
  new Gauge({
    name: 'agentapi_webhook_oldest_due_age_seconds',
    help: 'Age of the oldest due, unclaimed delivery per endpoint state (0 when none is due)',
    labelNames: ['endpoint_state'],
    registers,
    async collect() {
      const a = await aggregates();
      if (!a) return;
      const now = deps.clock.now().getTime();
      for (const state of ['enabled', 'disabled'] as const) {
        const oldest = a.queue.filter((r) => r.endpoint_state === state && r.oldest_due).map((r) => r.oldest_due!.getTime());
        this.set({ endpoint_state: state }, oldest.length ? Math.max(0, (now - Math.min(...oldest)) / 1000) : 0);
      }
    },
  });
}

interface Aggregates {
  settlementLag: number;
  queue: repo.DeliveryQueueRow[];
}

/** The scrape's database work: two bounded reads on partial indexes (unsettled operations, live deliveries). */
export async function readAggregates(db: Knex, now: Date): Promise<Aggregates> {
  const [settlementLag, queue] = await Promise.all([repo.settlementLagSeconds(db, now), repo.deliveryQueue(db, now)]);
  return { settlementLag, queue };
}

/** Serves `GET /metrics` from `registry` on its own port (never the API port, so it need not be exposed publicly). */
export async function startMetricsServer(registry: Registry, port: number, host: string): Promise<Server> {
  // Not an ESM import of node:http, which would load Node's bundled undici at start (src/http/http-server.ts).
  const server = process.getBuiltinModule('node:http').createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics collection failed: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/** The label for requests outside the /v1/agent pipeline (no operationId): one per route family, so cardinality stays fixed. */
export function routeFamily(path: string): string {
  if (path === '/healthz') return 'getHealth';
  if (path === '/readyz') return 'getReadiness';
  if (path === '/docs' || path.startsWith('/docs/')) return 'getDocs';
  if (path === '/skill.md') return 'getSkill';
  if (path === '/llms.txt') return 'getLlmsTxt';
  if (path === '/mcp' || path.startsWith('/mcp/')) return 'mcp';
  if (path.startsWith('/oauth/') || path.startsWith('/.well-known/')) return 'oauth';
  if (path.startsWith('/connect/')) return 'connect';
  return 'unmatched';
}
