// Webhook delivery benchmark (issue 12, P3), three rows each beside a baseline measured in the same run:
//  (a) one worker's deliveries/s to one loopback HTTPS receiver vs a raw keep-alive HTTPS POST loop to it with
//      as many requests in flight as the worker allows one endpoint, run before and after the worker (target >= 0.50);
//  (b) enqueue (event commit) -> first attempt p99 at a steady 100 events/s (target <= 50 ms);
//  (c) 50 endpoints of which 5 answer after 5 s: deliveries/s to the other 45 vs the same 45 with no slow
//      endpoints (target >= 0.80).
// The worker runs with its production defaults, LISTEN/NOTIFY on, in this process (as does the receiver).
//
// Usage: npm run --silent bench:webhooks  (or: npx tsx scripts/bench/webhooks.ts [--n 2000] [--events-per-agent 30] [--latency-seconds 3])
//   [--tree DIR]: the worker, outbox and services of another checkout against this harness, receiver and raw loop.
// Uses scratch databases on TEST_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type * as KnexModule from '../../src/db/knex.js';
import type { Knex } from '../../src/db/knex.js';
import type * as EventRepository from '../../src/db/repositories/event.repository.js';
import type * as ClockModule from '../../src/lib/clock.js';
import type * as CryptoModule from '../../src/lib/crypto.js';
import type * as LoggerModule from '../../src/lib/logger.js';
import type * as AgentService from '../../src/services/agent.service.js';
import type * as WebhookService from '../../src/services/webhook.service.js';
import type { WebhookCaller } from '../../src/services/webhook.service.js';
import type * as DeliveryWorker from '../../src/webhooks/delivery-worker.js';
import { createTestPki, startReceiver, type Receiver } from '../../test/webhooks/helpers/receiver.js';
import { fromTree, report, row, scratchDatabase, treeOf, type BenchRow } from './support.js';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '2000' },
    'latency-seconds': { type: 'string', default: '3' },
    'events-per-agent': { type: 'string', default: '30' },
    tree: { type: 'string' },
  },
});
const TREE = treeOf(values.tree);
const N = Number(values.n);
const LATENCY_RATE = 100; // events per second while measuring latency
const LATENCY_EVENTS = Number(values['latency-seconds']) * LATENCY_RATE;
const EVENTS_PER_AGENT = Number(values['events-per-agent']);
const SLOW_MS = 5000;
const AGENTS = 5; // 10 endpoints per agent at most: 5 agents x (9 fast + 1 slow) = 50 endpoints
const FAST_PER_AGENT = 9;

/** The service's modules the benchmark drives, from TREE (this checkout, or `--tree DIR`). */
async function loadService() {
  const [knex, events, clocks, crypto, logger, agents, webhooks, worker] = await Promise.all([
    fromTree<typeof KnexModule>(TREE, 'src/db/knex.js'),
    fromTree<typeof EventRepository>(TREE, 'src/db/repositories/event.repository.js'),
    fromTree<typeof ClockModule>(TREE, 'src/lib/clock.js'),
    fromTree<typeof CryptoModule>(TREE, 'src/lib/crypto.js'),
    fromTree<typeof LoggerModule>(TREE, 'src/lib/logger.js'),
    fromTree<typeof AgentService>(TREE, 'src/services/agent.service.js'),
    fromTree<typeof WebhookService>(TREE, 'src/services/webhook.service.js'),
    fromTree<typeof DeliveryWorker>(TREE, 'src/webhooks/delivery-worker.js'),
  ]);
  return { ...knex, ...events, ...logger, ...agents, ...webhooks, ...worker, clock: clocks.systemClock, sealer: crypto.createSealer('bench-master-key-0123456789abcdef012345') };
}
type Service = Awaited<ReturnType<typeof loadService>>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** Counts first arrivals per (event, path) by path prefix, and when each event first arrived anywhere. */
function createTally(receiver: Receiver) {
  const seen = new Set<string>();
  const arrivals = new Map<string, number[]>();
  const firstArrival = new Map<string, number>();
  const slowHeld = new Set<() => void>();
  receiver.handle((req, res) => {
    const id = String(req.headers['service-webhook-id'] ?? '');
    const key = `${id} ${req.path}`;
    const answer = () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    };
    if (!seen.has(key)) {
      seen.add(key);
      const prefix = req.path.split('/')[1]!;
      if (!arrivals.has(prefix)) arrivals.set(prefix, []);
      arrivals.get(prefix)!.push(performance.now());
      if (!firstArrival.has(id)) firstArrival.set(id, performance.now());
    }
    if (!req.path.startsWith('/slow/')) return answer();
    const release = () => {
      clearTimeout(timer);
      slowHeld.delete(release);
      answer();
    };
    const timer = setTimeout(release, SLOW_MS);
    slowHeld.add(release);
  });
  return {
    count: (prefix: string) => arrivals.get(prefix)?.length ?? 0,
    /**
     * Deliveries/s once warm: from the arrival of the first tenth to the last, so the start-up (LISTEN,
     * first claims, a TLS handshake per pooled connection) weighs on no phase more than another.
     */
    steadyRate(prefix: string): number {
      const times = arrivals.get(prefix) ?? [];
      const from = Math.floor(times.length / 10);
      return (times.length - 1 - from) / ((times[times.length - 1]! - times[from]!) / 1000);
    },
    firstArrival,
    /** Answers every held slow request now (end of run), so the worker drains without waiting 5 s. */
    releaseSlow: () => [...slowHeld].forEach((r) => r()),
  };
}

interface Scene {
  db: Knex;
  url: string;
  drop(): Promise<void>;
  newAgent(tag: string): Promise<WebhookCaller>;
  enqueue(caller: WebhookCaller): Promise<{ id: string; at: number }>;
  startWorker(): { stop(): Promise<void> };
}

async function createScene(svc: Service, receiver: Receiver): Promise<Scene> {
  const { createKnex, migrateLatest, withTransaction, appendEvent, createAgentService, createDeliveryWorker, createLogger, clock, sealer } = svc;
  const scratch = await scratchDatabase('agent_api_bench_webhooks');
  const db = await createKnex({ databaseUrl: scratch.url, dataDir: '', poolMax: 10 });
  await migrateLatest(db);
  const agents = createAgentService({ clock });
  const owner = await agents.createOwner(db, { email: 'bench@example.com' });
  const note = 'x'.repeat(300);
  let dropped = false;
  return {
    db,
    url: scratch.url,
    async drop() {
      if (dropped) return;
      dropped = true;
      await db.destroy();
      await scratch.drop();
    },
    async newAgent(tag) {
      const created = await agents.createAgent(db, { ownerId: owner.owner_id, name: `bench ${tag}` });
      return { agentId: created.agent_id, walletId: created.wallet_id };
    },
    async enqueue(caller) {
      const envelope = await withTransaction(db, (trx) =>
        appendEvent(trx, {
          type: 'payment.executed',
          agentId: caller.agentId,
          walletId: caller.walletId,
          operationId: null,
          resource: { type: 'operation', id: 'bench' },
          data: { amount: '12.5', note },
          createdAt: clock.now(),
        }),
      );
      return { id: envelope.id, at: performance.now() };
    },
    startWorker() {
      const worker = createDeliveryWorker({
        db,
        clock,
        log: createLogger('silent'),
        sealer,
        leaseMs: 60_000,
        attemptTimeoutMs: 10_000,
        allowLoopback: true,
        ca: receiver.ca,
        databaseUrl: scratch.url,
      });
      const controller = new AbortController();
      const running = worker.loop.run(controller.signal);
      return {
        async stop() {
          controller.abort();
          await running;
          worker.close();
        },
      };
    },
  };
}

async function until(what: string, done: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** Enqueues in parallel groups of 50 (bench setup, not measured). */
async function enqueueMany(scene: Scene, callers: WebhookCaller[], perCaller: number): Promise<void> {
  const jobs = callers.flatMap((c) => Array.from({ length: perCaller }, () => c));
  for (let i = 0; i < jobs.length; i += 50) await Promise.all(jobs.slice(i, i + 50).map((c) => scene.enqueue(c)));
}

async function rawPostLoop(receiver: Receiver, concurrency: number, n: number): Promise<number> {
  const payload = JSON.stringify({ id: 'x', type: 'payment.executed', data: { amount: '12.5', note: 'x'.repeat(300) } });
  const agent = new https.Agent({ keepAlive: true, ca: receiver.ca, maxSockets: concurrency });
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const req = https.request(receiver.url('/baseline'), { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(payload);
    });
  let sent = 0;
  let t0 = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < n) {
        if (++sent === Math.floor(n / 10)) t0 = performance.now(); // warm, as the worker's rates
        await post();
      }
    }),
  );
  const rate = (n - Math.floor(n / 10)) / ((performance.now() - t0) / 1000);
  agent.destroy();
  return rate;
}

async function main() {
  const svc = await loadService();
  const { createWebhookService, DEFAULT_PER_ENDPOINT_IN_FLIGHT, clock, sealer } = svc;
  const pki = await createTestPki();
  const receiver = await startReceiver(pki);
  const tally = createTally(receiver);
  const rows: BenchRow[] = [];
  const scenes: Scene[] = [];
  try {
    // (a) Throughput to one endpoint. The raw loop runs before and after the worker and the baseline is
    // their mean: the machine is shared, and a load change between one baseline and the worker's run
    // moved the ratio by a factor of 2-3 (each figure is printed).
    const rawBefore = await rawPostLoop(receiver, DEFAULT_PER_ENDPOINT_IN_FLIGHT, N);
    const one = await createScene(svc, receiver);
    scenes.push(one);
    const caller = await one.newAgent('one');
    const service = createWebhookService({ clock, sealer, allowLoopback: true });
    await service.create(one.db, caller, { url: receiver.url('/one/hook'), event_types: ['payment.executed'] });
    await enqueueMany(one, [caller], N);
    let worker = one.startWorker();
    await until('the backlog', () => tally.count('one') >= N);
    const workerRate = tally.steadyRate('one');
    const rawAfter = await rawPostLoop(receiver, DEFAULT_PER_ENDPOINT_IN_FLIGHT, N);
    const baselineRate = (rawBefore + rawAfter) / 2;
    rows.push(
      row({
        bench: 'webhooks',
        what: `deliveries, 1 worker, 1 endpoint (${N} queued)`,
        today: workerRate,
        unit: 'deliveries/s',
        baseline: baselineRate,
        baselineName: `raw keep-alive POST loop, ${DEFAULT_PER_ENDPOINT_IN_FLIGHT} in flight; mean of ${Math.round(rawBefore)} before and ${Math.round(rawAfter)} after`,
        target: '≥ 0.50 of baseline',
        met: workerRate / baselineRate >= 0.5,
      }),
    );

    // (b) Latency at a steady 100 events/s while the worker idles on LISTEN/NOTIFY (poll fallback 1 s).
    const pending: Array<{ id: string; at: number }> = [];
    const paced = performance.now();
    const enqueues: Promise<void>[] = [];
    for (let i = 0; i < LATENCY_EVENTS; i++) {
      const due = paced + (i * 1000) / LATENCY_RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      enqueues.push(one.enqueue(caller).then((p) => void pending.push(p)));
    }
    await Promise.all(enqueues);
    await until('the paced events', () => pending.every((p) => tally.firstArrival.has(p.id)));
    const latencies = pending.map((p) => tally.firstArrival.get(p.id)! - p.at).sort((a, b) => a - b);
    await worker.stop();
    await one.drop(); // one scratch database at a time: the Postgres is shared
    const p99 = pct(latencies, 99);
    rows.push(
      row({
        bench: 'webhooks',
        what: `enqueue -> first attempt p99 (${LATENCY_EVENTS} events at ${LATENCY_RATE}/s; p50 ${pct(latencies, 50).toFixed(1)} ms)`,
        today: p99,
        unit: 'ms',
        target: '≤ 50 ms',
        met: p99 <= 50,
      }),
    );

    // (c) 45 fast endpoints alone, then the same 45 beside 5 that answer after 5 s (a fresh database each).
    const fastRate = async (withSlow: boolean): Promise<number> => {
      const scene = await createScene(svc, receiver);
      scenes.push(scene);
      const prefix = withSlow ? 'mixed' : 'alone';
      const callers: WebhookCaller[] = [];
      for (let a = 0; a < AGENTS; a++) {
        const c = await scene.newAgent(`${prefix} ${a}`);
        callers.push(c);
        for (let e = 0; e < FAST_PER_AGENT; e++) await service.create(scene.db, c, { url: receiver.url(`/${prefix}/a${a}e${e}`), event_types: ['payment.executed'] });
        if (withSlow) await service.create(scene.db, c, { url: receiver.url(`/slow/a${a}`), event_types: ['payment.executed'] });
      }
      await enqueueMany(scene, callers, EVENTS_PER_AGENT);
      const expected = AGENTS * FAST_PER_AGENT * EVENTS_PER_AGENT;
      worker = scene.startWorker();
      await until(`${prefix} deliveries`, () => tally.count(prefix) >= expected);
      const rate = tally.steadyRate(prefix);
      tally.releaseSlow();
      const stopping = worker.stop();
      // Answer the slow requests claimed while stopping too, so the drain does not wait 5 s for them.
      const sweep = setInterval(tally.releaseSlow, 20);
      await stopping;
      clearInterval(sweep);
      await scene.drop();
      return rate;
    };
    const alone = await fastRate(false);
    const mixed = await fastRate(true);
    rows.push(
      row({
        bench: 'webhooks',
        what: `deliveries to 45 endpoints beside 5 answering after 5 s (${EVENTS_PER_AGENT} events x 45)`,
        today: mixed,
        unit: 'deliveries/s',
        baseline: alone,
        baselineName: 'same 45, no slow endpoints',
        target: '≥ 0.80 of baseline',
        met: mixed / alone >= 0.8,
      }),
    );
    report(rows);
  } finally {
    tally.releaseSlow();
    await receiver.close();
    for (const scene of scenes) await scene.drop().catch(() => undefined); // those a failure left behind
  }
}

await main();
