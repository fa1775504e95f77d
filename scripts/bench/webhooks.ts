// Webhook delivery benchmark: one worker's deliveries/s and enqueue->first-attempt p50/p99, beside a raw
// keep-alive HTTPS POST loop to the same loopback receiver in the same run (the baseline).
//
// Usage: npm run --silent bench:webhooks  (or: npx tsx scripts/bench/webhooks.ts [--n 2000] [--concurrency 16])
// Uses a scratch database on TEST_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createKnex, migrateLatest, withTransaction } from '../../src/db/knex.js';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { systemClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createLogger } from '../../src/lib/logger.js';
import { createAgentService } from '../../src/services/agent.service.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { createDeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import { createTestPki, startReceiver } from '../../test/webhooks/helpers/receiver.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const N = arg('n', 2000);
const CONCURRENCY = arg('concurrency', 16);
const LATENCY_EVENTS = arg('latency-events', 300);
const LATENCY_RATE = arg('rate', 100); // events per second while measuring latency

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const fmt = (n: number) => n.toFixed(1);

async function main() {
  const adminUrl = process.env.TEST_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `agent_api_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  const db = await createKnex({ databaseUrl, dataDir: '', poolMax: CONCURRENCY + 4 });
  const pki = await createTestPki();
  const receiver = await startReceiver(pki);
  const arrivals = new Map<string, number>();
  receiver.handle((req, res) => {
    const id = req.headers['service-webhook-id'];
    if (typeof id === 'string' && !arrivals.has(id)) arrivals.set(id, performance.now());
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
  try {
    await migrateLatest(db);
    const payload = JSON.stringify({ id: 'x', type: 'payment.executed', data: { amount: '12.5', note: 'x'.repeat(300) } });

    // Baseline: a raw keep-alive HTTPS POST loop, same concurrency, same receiver.
    const agent = new https.Agent({ keepAlive: true, ca: pki.ca, maxSockets: CONCURRENCY });
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
    const t0 = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (sent < N) {
        sent++;
        await post();
      }
    }));
    const baselineRate = N / ((performance.now() - t0) / 1000);
    agent.destroy();

    // Worker: one endpoint, N events enqueued through the outbox, then one worker drains them.
    const clock = systemClock;
    const sealer = createSealer('bench-master-key-0123456789abcdef012345');
    const agents = createAgentService({ clock });
    const owner = await agents.createOwner(db, { email: 'bench@example.com' });
    const created = await agents.createAgent(db, { ownerId: owner.owner_id, name: 'bench' });
    const caller = { agentId: created.agent_id, walletId: created.wallet_id };
    const service = createWebhookService({ clock, sealer, allowLoopback: true });
    await service.create(db, caller, { url: receiver.url('/hook'), event_types: ['payment.executed'] });
    const enqueue = async () => {
      const envelope = await withTransaction(db, (trx) =>
        appendEvent(trx, { type: 'payment.executed', agentId: caller.agentId, walletId: caller.walletId, operationId: null, resource: { type: 'operation', id: 'bench' }, data: { amount: '12.5', note: 'x'.repeat(300) }, createdAt: clock.now() }),
      );
      return { id: envelope.id, at: performance.now() };
    };
    for (let i = 0; i < N; i += 100) await Promise.all(Array.from({ length: Math.min(100, N - i) }, enqueue));
    const worker = createDeliveryWorker({
      db,
      clock,
      log: createLogger('silent'),
      sealer,
      leaseMs: 60_000,
      attemptTimeoutMs: 10_000,
      allowLoopback: true,
      ca: pki.ca,
      concurrency: CONCURRENCY,
      perEndpointInFlight: CONCURRENCY,
      idleMs: 1000,
      databaseUrl,
    });
    const controller = new AbortController();
    const t1 = performance.now();
    const running = worker.loop.run(controller.signal);
    while (arrivals.size < N) await new Promise((r) => setTimeout(r, 5));
    const workerRate = N / ((performance.now() - t1) / 1000);

    // Latency: paced enqueues while the worker idles on LISTEN/NOTIFY (poll fallback 1 s).
    const latencies: number[] = [];
    const pending: Array<{ id: string; at: number }> = [];
    for (let i = 0; i < LATENCY_EVENTS; i++) {
      pending.push(await enqueue());
      await new Promise((r) => setTimeout(r, 1000 / LATENCY_RATE));
    }
    while (pending.some((p) => !arrivals.has(p.id))) await new Promise((r) => setTimeout(r, 5));
    for (const p of pending) latencies.push(arrivals.get(p.id)! - p.at);
    latencies.sort((a, b) => a - b);
    controller.abort();
    await running;
    worker.close();

    process.stdout.write(
      [
        `webhook delivery benchmark (N=${N}, concurrency=${CONCURRENCY}, one worker, one endpoint, loopback HTTPS)`,
        `  baseline raw keep-alive HTTPS POST loop : ${fmt(baselineRate)} req/s`,
        `  worker deliveries (claim+sign+POST+record): ${fmt(workerRate)} deliveries/s (${fmt((100 * workerRate) / baselineRate)} % of baseline)`,
        `  enqueue -> first attempt (${LATENCY_EVENTS} events at ${LATENCY_RATE}/s): p50 ${fmt(pct(latencies, 50))} ms, p99 ${fmt(pct(latencies, 99))} ms`,
        '',
      ].join('\n'),
    );
  } finally {
    await receiver.close();
    await db.destroy();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
