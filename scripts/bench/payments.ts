// Write-path benchmark: accepted payments per second through the real service path (HTTP POST /v1/agent/payments
// with an Idempotency-Key each, API-key auth, Redis rate limit, a policy with caps, production settings, real
// Postgres and Redis) for 1, 20 and 200 agents, beside the baseline measured in the same run: raw single-insert
// transactions (BEGIN; INSERT one row; COMMIT) over a pg pool of the app's size at the same concurrency. Then
// 1,000,000 operations are seeded (one INSERT ... SELECT generate_series, realistic rows, the table's own
// indexes) and the 20-agent rate is measured again. The anchor of the 20-agent figure is the same-work payment server
// (same-work-payments.ts: node:http + pg, the same six round trips a payment needs), target ≥ 0.6 of it; the raw
// single-insert ratio is printed beside it.
//
// Usage: npm run --silent bench:payments   (make bench-payments)  [--seconds 4] [--concurrency 20] [--seed 0 (no seeded figure)]
//   [--settlement on|off|only] [--backlog 20000] [--old-backlog 500] [--settlement-types payment,withdrawal.crypto,one_off_payment.create]:
//   the settlement figures of issue 31 (scripts/bench/settlement.ts) after the acceptance figures.
//   [--tree DIR]: the app of another checkout (its src/app.ts and src/config.ts), e.g. today's tree against this one.
// Uses DATABASE_URL when set, else a scratch database (scripts/bench/support.ts) dropped at the end. The 1-agent
// row shows the per-agent serialisation (every payment of an agent takes its policy row lock). Not part of CI;
// asserts nothing about time (`met` is printed only). The HTTP load comes from a worker thread (a keep-alive node:http
// agent, LOAD_WORKER), not from fetch in the server's own event loop; the raw baseline runs its pg pool in the main
// thread as before (it has no HTTP side), so it still has the whole main thread to itself.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Worker } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { BuiltApp, createApp as CreateApp } from '../../src/app.js';
import type { loadConfig as LoadConfig } from '../../src/config.js';
import { createSameWorkPaymentServer } from './same-work-payments.js';
import { SETTLED_TYPES, settlementRows, type SettledType } from './settlement.js';
import { close, fromTree, listen, listenerOf, report, row, scratchDatabase, treeOf, type BenchRow } from './support.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '4' },
    concurrency: { type: 'string', default: '20' },
    seed: { type: 'string', default: '1000000' },
    tree: { type: 'string' },
    settlement: { type: 'string', default: 'on' },
    backlog: { type: 'string', default: '20000' },
    'old-backlog': { type: 'string', default: '500' },
    'settlement-types': { type: 'string', default: SETTLED_TYPES.join(',') },
  },
});
const TREE = treeOf(values.tree);
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const SEED_OPERATIONS = Number(values.seed);
const WARMUP_SECONDS = 1;
const AGENT_COUNTS = [1, 20, 200] as const;
const BODY = JSON.stringify({ to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' });

interface Rate {
  perSecond: number;
  ok: number;
  failed: number;
}

/** Runs `task` from CONCURRENCY workers for `seconds`; the rate counts the tasks that returned true. */
async function drive(seconds: number, task: () => Promise<boolean>): Promise<Rate> {
  let ok = 0;
  let failed = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        if (await task().catch(() => false)) ok++;
        else failed++;
      }
    }),
  );
  return { perSecond: ok / ((performance.now() - started) / 1000), ok, failed };
}

/**
 * The HTTP load generator, run in a worker thread so that it does not share the server's event loop (fetch/undici
 * in the main thread took a few percent of the server's CPU and queued behind its work): CONCURRENCY loops over a
 * keep-alive node:http agent, each POST with a fresh Idempotency-Key, agents in turn (each with its own body when
 * `bodies` is given, one per agent, else `body`). Plain JavaScript (eval).
 */
const LOAD_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { url, agents, body, bodies, concurrency, seconds } = workerData;
const target = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
let n = 0;
const post = () => new Promise((resolve) => {
  const i = n++ % agents.length;
  const b = bodies ? bodies[i] : body;
  const headers = { ...agents[i], 'idempotency-key': randomUUID(), 'content-length': Buffer.byteLength(b) };
  const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers, agent }, (res) => {
    res.on('data', () => {});
    res.on('end', () => resolve(res.statusCode === 200));
  });
  req.on('error', () => resolve(false));
  req.end(b);
});
(async () => {
  let ok = 0, failed = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < deadline) (await post()) ? ok++ : failed++;
  }));
  agent.destroy();
  parentPort.postMessage({ perSecond: ok / ((performance.now() - started) / 1000), ok, failed });
})();
`;

/** Payments from the worker-thread load generator for `seconds` (after the warm-up). */
async function measurePayments(url: string, agents: { headers: Record<string, string> }[], seconds: number): Promise<Rate> {
  const run = (s: number) =>
    new Promise<Rate>((resolve, reject) => {
      const worker = new Worker(LOAD_WORKER, { eval: true, workerData: { url, agents: agents.map((a) => a.headers), body: BODY, concurrency: CONCURRENCY, seconds: s } });
      worker.once('message', (rate: Rate) => resolve(rate));
      worker.once('error', reject);
    });
  await run(WARMUP_SECONDS);
  return run(seconds);
}

async function measure(seconds: number, task: () => Promise<boolean>): Promise<Rate> {
  await drive(WARMUP_SECONDS, task);
  return drive(seconds, task);
}

/** Agents with a capped payment policy, funds and a write rate limit out of the way. */
async function createAgents(built: BuiltApp, count: number): Promise<{ agentId: string; headers: Record<string, string> }[]> {
  const { services, db } = built;
  const { owner_id } = await services.agents.createOwner(db, { email: `bench-${randomBytes(4).toString('hex')}@example.com` });
  const out: { agentId: string; headers: Record<string, string> }[] = [];
  for (let i = 0; i < count; i++) {
    const a = await services.agents.createAgent(db, { ownerId: owner_id, name: `bench ${i}` });
    await services.ledger.policy.set(db, a.agent_id, {
      operation_types: ['payment'],
      allowed_assets: ['USDC'],
      // Raw addresses are paid: since issue 26 a policy without a list pays approved payees only.
      allowed_recipients: 'all',
      per_tx_usd: '100',
      per_period_usd: '100000000',
      period: 'day',
      max_txs_per_period: 100_000_000,
    });
    await services.ledger.account.fund(db, a.agent_id, { asset: 'USDC', amount: '100000000' });
    await services.agents.setRateLimit(db, a.agent_id, { class: 'write', limit: 1_000_000_000, burst: 1_000_000_000, windowSeconds: 60 });
    out.push({ agentId: a.agent_id, headers: { 'x-agent-id': a.agent_id, 'x-api-key': a.api_key, 'content-type': 'application/json' } });
  }
  return out;
}

/**
 * 1,000,000 operations as years of use leave them: spread over the last 365 days and over the bench's agents
 * (whose policy sums today's usage), appended in time order as a live table is, mostly executed payments with a few failed and rejected, each with the
 * columns a real payment fills. One statement; the table keeps every index it has in production.
 */
async function seedOperations(pool: pg.Pool, agents: { agentId: string; walletId: string }[], count: number): Promise<void> {
  await pool.query(
    `INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8,
       fee_usd_e8, counts_toward_limits, human_message, idempotency_key_hash, to_address, tx_hash, details, settle_after, created_at,
       submitted_at, executed_at, failed_at, updated_at, error_code, error_message)
     SELECT o.id, a.agent_id, a.wallet_id, 'payment', o.status, 'payment', o.id::text, 'USDC', 10000, 1000000, 0, o.status <> 'policy_rejected',
       'Paying 0.01 USDC to 0x0000…bEEF', md5(o.id::text), '0x000000000000000000000000000000000000beef',
       CASE WHEN o.status = 'executed' THEN '0x' || md5(o.id::text) || md5(o.at::text) END,
       jsonb_build_object('route', 'address', 'recipient_id', null, 'trusted_destination_id', null, 'recurring_payment_id', null, 'note', null,
         'delivered_asset', 'USDC', 'delivered_amount', '10000'),
       o.at, o.at, o.at, CASE WHEN o.status = 'executed' THEN o.at END, CASE WHEN o.status = 'execution_failed' THEN o.at END, o.at,
       CASE o.status WHEN 'execution_failed' THEN 'settlement_failed' WHEN 'policy_rejected' THEN 'limit_exceeded' END,
       CASE o.status WHEN 'execution_failed' THEN 'the simulated chain rejected the transfer' WHEN 'policy_rejected' THEN 'over the cap' END
     FROM (SELECT gen_random_uuid() AS id, g % $3 AS agent_index, now() - random() * interval '365 days' AS at,
             CASE WHEN g % 50 = 0 THEN 'execution_failed' WHEN g % 97 = 0 THEN 'policy_rejected' ELSE 'executed' END AS status
           FROM generate_series(1, $1::int) g) o
     JOIN (SELECT (x->>'agent_id')::uuid AS agent_id, x->>'wallet_id' AS wallet_id, (row_number() OVER ()) - 1 AS agent_index
           FROM jsonb_array_elements($2::jsonb) x) a ON a.agent_index = o.agent_index
     ORDER BY o.at`,
    [count, JSON.stringify(agents.map((a) => ({ agent_id: a.agentId, wallet_id: a.walletId }))), agents.length],
  );
  // Settle the table as a long-running server has it: vacuumed, analysed, its pages written out (otherwise the
  // autovacuum and checkpoint the bulk insert triggers would run during the measurement).
  await pool.query('VACUUM (ANALYZE) operations');
  await pool.query('CHECKPOINT');
}

/**
 * Issue 31: settlement beside acceptance (scripts/bench/settlement.ts), after the acceptance figures (each of its runs
 * builds its own server and database). `--settlement off` skips it, `--settlement only` runs nothing else.
 */
async function settlementSection(): Promise<void> {
  if (values.settlement === 'off') return;
  const rows = await settlementRows({
    loadWorker: LOAD_WORKER,
    redisUrl: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    backlog: Number(values.backlog),
    oldBacklog: Number(values['old-backlog']),
    types: values['settlement-types'].split(',').map((t) => {
      if (!(SETTLED_TYPES as string[]).includes(t)) throw new Error(`--settlement-types takes ${SETTLED_TYPES.join(', ')}`);
      return t as SettledType;
    }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(
    `\nsettlement (issue 31): simulated chain, SETTLEMENT_DELAY_MS=0; P2 load = 20 agents, 32 in flight, 10 s after 1 s warm-up; backlogs: ${values.backlog} (batches), ${values['old-backlog']} (one at a time), 20 agents' wallets, workers = scripts/worker.ts processes\n\n`,
  );
  report(rows);
}

async function main() {
  if (values.settlement === 'only') return settlementSection();
  await acceptanceSection();
  await settlementSection();
}

async function acceptanceSection() {
  const { createApp } = await fromTree<{ createApp: typeof CreateApp }>(TREE, 'src/app.js');
  const { loadConfig } = await fromTree<{ loadConfig: typeof LoadConfig }>(TREE, 'src/config.js');
  const scratch = await scratchDatabase();
  const rows: BenchRow[] = [];
  const masterKey = randomBytes(32).toString('hex');
  const config = loadConfig({
    NODE_ENV: 'production',
    BASE_URL: 'http://127.0.0.1:3000',
    DATABASE_URL: scratch.url,
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `agentapi-bench:${randomBytes(4).toString('hex')}:`,
    MASTER_KEY: masterKey,
    SMTP_URL: 'smtp://127.0.0.1:2525',
    AUTO_MIGRATE: 'true',
    LOG_LEVEL: 'warn',
    RUN_WORKER: 'false',
  });
  const built = await createApp(config);
  const pool = new pg.Pool({ connectionString: scratch.url, max: config.databasePoolMax });
  const server = createServer(listenerOf(built));
  server.keepAliveTimeout = 5_000;
  try {
    const base = await listen(server);
    const agents = await createAgents(built, Math.max(...AGENT_COUNTS));
    const pay = (of: typeof agents) => measurePayments(`${base}/v1/agent/payments`, of, SECONDS);
    const pay20Against = (url: string) => measurePayments(url, agents.slice(0, 20), SECONDS);
    const probe = await fetch(`${base}/v1/agent/payments`, { method: 'POST', headers: { ...agents[0]!.headers, 'idempotency-key': randomUUID() }, body: BODY });
    if (probe.status !== 200) throw new Error(`POST /v1/agent/payments answered ${probe.status}: ${await probe.text()}`);

    await pool.query('CREATE TABLE bench_raw (id uuid PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())');
    const raw = await measure(SECONDS, async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO bench_raw (id, payload) VALUES ($1, $2)', [randomUUID(), BODY]);
        await client.query('COMMIT');
        return true;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    });
    const rawName = 'raw BEGIN; INSERT; COMMIT';
    const rates: Record<number, Rate> = {};
    for (const count of AGENT_COUNTS) {
      rates[count] = await pay(agents.slice(0, count));
      rows.push(
        row({
          bench: 'payments',
          what: `accepted payments, ${count} agent${count === 1 ? '' : 's'}`,
          today: rates[count]!.perSecond,
          unit: '/s',
          baseline: raw.perSecond,
          baselineName: rawName,
          target: 'printed',
          met: true,
        }),
      );
    }

    // The anchor: the same-work payment server on the same database, the same 20 agents and load.
    const sameWork = await createSameWorkPaymentServer({ databaseUrl: scratch.url, redisUrl: config.redisUrl!, prefix: `${config.redisPrefix}same-work:`, poolMax: config.databasePoolMax, masterKey });
    let floor: Rate;
    try {
      floor = await pay20Against(`${await listen(sameWork.server)}/v1/agent/payments`);
    } finally {
      await close(sameWork.server);
      await sameWork.close();
    }
    if (floor.ok === 0) throw new Error('the same-work payment server accepted no payment');
    rows.push(
      row({ bench: 'payments', what: 'same-work payment server, 20 agents', today: floor.perSecond, unit: '/s', baseline: raw.perSecond, baselineName: rawName, target: 'printed', met: true }),
    );
    rows.push(
      row({
        bench: 'payments',
        what: 'accepted payments, 20 agents',
        today: rates[20]!.perSecond,
        unit: '/s',
        baseline: floor.perSecond,
        baselineName: 'same-work payment server',
        target: '≥ 0.6 of baseline',
        met: rates[20]!.perSecond >= 0.6 * floor.perSecond,
      }),
    );

    let seeded: Rate | null = null;
    let seedSeconds = 0;
    if (SEED_OPERATIONS > 0) {
      const walletOf = new Map(
        (
          await built
            .db('wallets')
            .whereIn(
              'agent_id',
              agents.slice(0, 20).map((a) => a.agentId),
            )
            .select('agent_id', 'id')
        ).map((w: { agent_id: string; id: string }) => [w.agent_id, w.id]),
      );
      const seedStarted = performance.now();
      await seedOperations(
        pool,
        agents.slice(0, 20).map((a) => ({ agentId: a.agentId, walletId: walletOf.get(a.agentId)! })),
        SEED_OPERATIONS,
      );
      seedSeconds = (performance.now() - seedStarted) / 1000;
      seeded = await pay(agents.slice(0, 20));
      const before = rates[20]!.perSecond;
      rows.push(
        row({
          bench: 'payments',
          what: `payments with ${(SEED_OPERATIONS / 1e6).toFixed(SEED_OPERATIONS % 1e6 ? 1 : 0)}M operations stored, 20 agents`,
          today: seeded.perSecond,
          unit: '/s',
          baseline: before,
          baselineName: 'empty table',
          target: '≥ 0.90 of baseline',
          met: seeded.perSecond >= 0.9 * before,
        }),
      );
    }

    const failed = [raw, ...Object.values(rates), ...(seeded ? [seeded] : [])].reduce((n, r) => n + r.failed, 0);
    process.stdout.write(
      `payments benchmark: ${SECONDS} s per figure after ${WARMUP_SECONDS} s warm-up, concurrency ${CONCURRENCY}, pool ${config.databasePoolMax}, Node ${process.version}; app of ${TREE.pathname}; seeded ${SEED_OPERATIONS} operations in ${seedSeconds.toFixed(1)} s\n\n`,
    );
    report(rows);
    if (failed > 0) {
      process.stderr.write(`${failed} requests were refused or failed: the figures are not comparable\n`);
      process.exitCode = 1;
    }
  } finally {
    await close(server);
    await pool.end();
    await built.close();
    await scratch.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
