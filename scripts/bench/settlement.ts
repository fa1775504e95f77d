// Settlement benchmark (issue 31), run by `npm run bench:payments` beside the acceptance figures: does settlement keep
// pace with acceptance? Each figure is measured with one operation settled per transaction (SETTLEMENT_BATCH_SIZE=0:
// the phase 1 and phase 2 passes of the tree before issue 31, in this tree; docs/perf/issue-31-settlement.md says
// what differs from the old tree) and with batches
// (the configured default), in the same run, on the simulated chain (SETTLEMENT_DELAY_MS=0), Postgres and Redis, for
// payments (POST /v1/agent/payments), crypto withdrawals (POST /v1/agent/withdrawals/to-crypto, to a confirmed
// trusted destination) and one-off payments (POST /v1/agent/one-off-payments, no owner review: they clear at once).
//
//   1. Under load: the P2 load (20 agents, 32 requests in flight, 10 s after a 1 s warm-up) against a server with
//      its worker loops in the same process (what `npm start` runs), one type at a time. Printed: the share of the
//      operations accepted in the measured window that were `executed` when the load stopped (target ≥ 90 %), and the
//      p99 of accept → executed over them (target ≤ 2 s; those still open when the load stops count with their later
//      settlement).
//   2. Backlog: 20,000 accepted operations of one type committed at once (the rows acceptance writes: operation, hold,
//      its two journal legs, the balances) while `scripts/worker.ts` processes (what `npm run worker` runs) wait:
//      settled per second with one worker process, then (a fresh backlog) with a second one started beside it (target:
//      two ≥ 1.6× one).
//      The one-at-a-time settler settles 25-120 a second, so its backlog is `oldBacklog` (500 by default: its rate
//      does not depend on the backlog's size, and 20,000 would take it minutes per figure). Beside each rate: the CPU
//      seconds per 1,000 operations of the worker processes and of their Postgres backends (/proc), and how busy the
//      machine's cores were (all processes), which bound what a second worker can add, and what the workers'
//      backends were doing when sampled (running, waiting on a Lock / LWLock / IO, or on their worker process).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { createApp, type BuiltApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { DEFAULT_SETTLEMENT_BATCH_SIZE } from '../../src/services/ledger/settlement.js';
import { createWorker } from '../../src/worker.js';
import { close, listen, row, scratchDatabase, type BenchRow } from './support.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const PAYEE = '0x000000000000000000000000000000000000bEEF';
const P2 = { agents: 20, inFlight: 32, seconds: 10, warmup: 1 };
const BACKLOG = 20_000;
const OLD_BACKLOG = 500;
/** Batch size 0: one operation per transaction, the settlement of the tree before issue 31. */
const ONE_AT_A_TIME = '0';

export type SettledType = 'payment' | 'withdrawal.crypto' | 'one_off_payment.create';
export const SETTLED_TYPES: SettledType[] = ['payment', 'withdrawal.crypto', 'one_off_payment.create'];

interface BenchAgent {
  agentId: string;
  walletId: string;
  destinationId: string;
  headers: Record<string, string>;
}

/** The write of each type: its route, its body (a crypto withdrawal names the agent's confirmed destination) and its name. */
const WRITES: Record<SettledType, { path: string; name: string; body(a: BenchAgent): string }> = {
  payment: { path: '/v1/agent/payments', name: 'payments', body: () => JSON.stringify({ to: PAYEE, asset: 'USDC', amount: '0.01' }) },
  'withdrawal.crypto': {
    path: '/v1/agent/withdrawals/to-crypto',
    name: 'crypto withdrawals',
    body: (a) => JSON.stringify({ destination_id: a.destinationId, asset: 'USDC', amount: '0.01' }),
  },
  'one_off_payment.create': { path: '/v1/agent/one-off-payments', name: 'one-off payments', body: () => JSON.stringify({ to: PAYEE, asset: 'USDC', amount: '0.01' }) },
};

export interface SettlementBenchOptions {
  /** The load generator (payments.ts LOAD_WORKER): CONCURRENCY loops posting each agent's body for `seconds`. */
  loadWorker: string;
  redisUrl: string;
  /** Seconds of load after the warm-up (the P2 load: 10). */
  seconds?: number;
  /** The backlog of the batch settler (20,000) and of the one-at-a-time settler (500). */
  backlog?: number;
  oldBacklog?: number;
  types?: SettledType[];
  log?: (line: string) => void;
}

function env(databaseUrl: string, redisUrl: string, masterKey: string, batchSize: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    BASE_URL: 'http://127.0.0.1:3000',
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `agentapi-bench:${randomBytes(4).toString('hex')}:`,
    MASTER_KEY: masterKey,
    SMTP_URL: 'smtp://127.0.0.1:2525',
    AUTO_MIGRATE: 'true',
    LOG_LEVEL: 'warn',
    RUN_WORKER: 'false',
    SETTLEMENT_DELAY_MS: '0',
    SETTLEMENT_BATCH_SIZE: batchSize,
  };
}

/**
 * Agents with a capped policy over the three types (raw addresses paid, no owner review of one-off payments), funds,
 * a write rate limit out of the way and a confirmed trusted destination (no time lock) for crypto withdrawals.
 */
async function createAgents(built: BuiltApp, count: number): Promise<BenchAgent[]> {
  const { services, db } = built;
  const { owner_id } = await services.agents.createOwner(db, { email: `bench-${randomBytes(4).toString('hex')}@example.com` });
  const out: BenchAgent[] = [];
  for (let i = 0; i < count; i++) {
    const a = await services.agents.createAgent(db, { ownerId: owner_id, name: `settlement bench ${i}` });
    await services.ledger.policy.set(db, a.agent_id, {
      operation_types: ['payment', 'withdrawal.crypto', 'one_off_payment.create'],
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
    const wallet = await db('wallets').where({ agent_id: a.agent_id }).first('id');
    const walletId = wallet.id as string;
    const { destination_id } = await services.ledger.destinations.add(db, a.agent_id, { kind: 'crypto', chain: 'base', address: PAYEE, label: 'bench cold wallet', timelockSeconds: 0 });
    // The owner confirms it (an agent's own confirm is an operation its policy would have to list).
    const confirmed = await services.ledger.destinations.actAsOwner(db, destination_id, 'confirm');
    if (!('status' in confirmed) || confirmed.status !== 'executed') throw new Error(`the bench's trusted destination was not confirmed: ${JSON.stringify(confirmed)}`);
    out.push({ agentId: a.agent_id, walletId, destinationId: destination_id, headers: { 'x-agent-id': a.agent_id, 'x-api-key': a.api_key, 'content-type': 'application/json' } });
  }
  return out;
}

function runLoad(loadWorker: string, url: string, agents: BenchAgent[], type: SettledType, seconds: number): Promise<{ ok: number; failed: number }> {
  return new Promise((resolve, reject) => {
    const workerData = { url, agents: agents.map((a) => a.headers), bodies: agents.map((a) => WRITES[type].body(a)), body: '', concurrency: P2.inFlight, seconds };
    const worker = new Worker(loadWorker, { eval: true, workerData });
    worker.once('message', (rate: { ok: number; failed: number }) => resolve(rate));
    worker.once('error', reject);
  });
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);

interface UnderLoad {
  accepted: number;
  executedAtStop: number;
  p99Ms: number;
  /** Seconds from the end of the load until every accepted operation was executed. */
  drainSeconds: number;
}

/** Waits until no operation is accepted or submitted. */
async function drain(db: BuiltApp['db'], seconds: number): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const open = await db('operations').whereIn('status', ['accepted', 'submitted']).count<{ n: string }[]>('* as n');
    if (Number(open[0]!.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`settlement did not drain within ${seconds} s of the load (${open[0]!.n} open)`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Target 1: the P2 load of each type in turn against a server whose worker loops share its process. */
export async function underLoad(opts: SettlementBenchOptions, batchSize: string, types: SettledType[]): Promise<Map<SettledType, UnderLoad>> {
  const scratch = await scratchDatabase('agent_api_bench_settle');
  const config = loadConfig(env(scratch.url, opts.redisUrl, randomBytes(32).toString('hex'), batchSize));
  const built = await createApp(config);
  const server = createServer(built.app);
  server.keepAliveTimeout = 5_000;
  const worker = createWorker({ loops: built.loops, log: built.log });
  const out = new Map<SettledType, UnderLoad>();
  try {
    const base = await listen(server);
    const agents = await createAgents(built, P2.agents);
    worker.start();
    for (const type of types) {
      const url = `${base}${WRITES[type].path}`;
      const probe = await fetch(url, { method: 'POST', headers: { ...agents[0]!.headers, 'idempotency-key': randomUUID() }, body: WRITES[type].body(agents[0]!) });
      if (probe.status !== 200) throw new Error(`POST ${WRITES[type].path} answered ${probe.status}: ${await probe.text()}`);
      await runLoad(opts.loadWorker, url, agents, type, P2.warmup);
      await drain(built.db, 300);
      const started = new Date();
      const load = await runLoad(opts.loadWorker, url, agents, type, opts.seconds ?? P2.seconds);
      const stopped = new Date();
      const window = () => built.db('operations').where({ type }).where('created_at', '>=', started).where('created_at', '<', stopped);
      const counts = await window().select(built.db.raw('count(*)::int AS accepted'), built.db.raw("count(*) FILTER (WHERE status = 'executed' AND executed_at <= ?)::int AS executed", [stopped]));
      const { accepted, executed } = counts[0] as { accepted: number; executed: number };
      if (load.failed > 0) throw new Error(`${load.failed} ${WRITES[type].name} were refused under load`);
      // Wait for the rest, then the latencies of every operation of the window.
      await drain(built.db, 300);
      const drained = await window().max<{ at: Date }[]>('executed_at as at');
      const latencies = (await window().select(built.db.raw('extract(epoch FROM executed_at - created_at) * 1000 AS ms'))).map((r: { ms: string }) => Number(r.ms)).sort((a, b) => a - b);
      out.set(type, {
        accepted,
        executedAtStop: executed,
        p99Ms: percentile(latencies, 99),
        drainSeconds: Math.max(0, (new Date(drained[0]!.at).getTime() - stopped.getTime()) / 1000),
      });
    }
    return out;
  } finally {
    await worker.stop();
    await close(server);
    await built.close();
    await scratch.drop();
  }
}

/**
 * `count` accepted operations of `type` as acceptance writes them (operation, hold, journal legs, balances; a one-off
 * payment's row; a withdrawal to the agent's confirmed destination), in one transaction.
 */
async function seedBacklog(pool: pg.Pool, type: SettledType, wallets: BenchAgent[], count: number): Promise<void> {
  const client = await pool.connect();
  try {
    // The rows the figures before this one settled, vacuumed and analysed first, so each figure starts from the same
    // state of the tables. Without it, a figure inherited their dead rows and stale statistics, and autovacuum could
    // start during its drain: the two-worker figure of a type always came after the one-worker figure of that type.
    // (Not after seeding: the workers already settle while a VACUUM runs.)
    await client.query(`VACUUM (ANALYZE) operations, holds, one_off_payments, journal_entries, balances, activity, events, webhook_deliveries`);
    await client.query('BEGIN');
    const details =
      type === 'payment'
        ? `jsonb_build_object('route', 'address', 'recipient_id', null, 'trusted_destination_id', null, 'recurring_payment_id', null, 'note', null)`
        : type === 'withdrawal.crypto'
          ? `jsonb_build_object('trusted_destination_id', destination_id, 'note', null)`
          : `jsonb_build_object('one_off_payment_id', rid, 'recipient_id', null, 'note', null, 'unlock_at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'expires_at', to_char((at + interval '7 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'review_delay_seconds', 0)`;
    const resource = type === 'payment' ? 'payment' : type === 'withdrawal.crypto' ? 'withdrawal' : 'one_off_payment';
    await client.query(
      `CREATE TEMP TABLE seed ON COMMIT DROP AS
       SELECT gen_random_uuid() AS id, gen_random_uuid() AS rid, gen_random_uuid() AS hold_id, gen_random_uuid() AS journal_id, a.agent_id, a.wallet_id, a.destination_id,
         clock_timestamp() AS at
       FROM generate_series(1, $1::int) g
       JOIN (SELECT (x->>'agent_id')::uuid AS agent_id, x->>'wallet_id' AS wallet_id, x->>'destination_id' AS destination_id, (row_number() OVER ()) - 1 AS i
             FROM jsonb_array_elements($2::jsonb) x) a ON a.i = g % $3`,
      [count, JSON.stringify(wallets.map((w) => ({ agent_id: w.agentId, wallet_id: w.walletId, destination_id: w.destinationId }))), wallets.length],
    );
    await client.query(
      `INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8, fee_usd_e8, counts_toward_limits,
         human_message, to_address, details, settle_after, created_at, updated_at)
       SELECT id, agent_id, wallet_id, $1, 'accepted', $2, CASE WHEN $2 = 'one_off_payment' THEN rid ELSE id END::text, 'USDC', 10000, 1000000, 0, true, 'bench: 0.01 USDC to 0x0000…bEEF',
         '0x000000000000000000000000000000000000beef', ${details}, at, at, at FROM seed ORDER BY at`,
      [type, resource],
    );
    await client.query(`INSERT INTO holds (id, operation_id, wallet_id, asset_symbol, amount, status, created_at) SELECT hold_id, id, wallet_id, 'USDC', 10000, 'held', at FROM seed`);
    if (type === 'one_off_payment.create')
      await client.query(
        `INSERT INTO one_off_payments (id, operation_id, agent_id, wallet_id, hold_id, to_address, asset_symbol, amount, status, unlock_at, expires_at, created_at)
         SELECT rid, id, agent_id, wallet_id, hold_id, '0x000000000000000000000000000000000000beef', 'USDC', 10000, 'pending', at, at + interval '7 days', at FROM seed`,
      );
    await client.query(
      `INSERT INTO journal_entries (journal_id, operation_id, account, wallet_id, asset_symbol, amount, entry_type, created_at)
       SELECT journal_id, id, 'wallet:' || wallet_id || ':' || leg.kind, wallet_id, 'USDC', leg.sign * 10000, 'hold', at FROM seed CROSS JOIN (VALUES ('available', -1), ('held', 1)) AS leg(kind, sign)`,
    );
    await client.query(
      `UPDATE balances b SET available = b.available - s.total, held = b.held + s.total FROM (SELECT wallet_id, count(*) * 10000 AS total FROM seed GROUP BY wallet_id) s WHERE b.wallet_id = s.wallet_id AND b.asset_symbol = 'USDC'`,
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** `npm run worker`'s program (scripts/worker.ts, through tsx as the tests run it), resolved once its loops run. */
async function startWorkerProcess(workerEnv: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts'], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...workerEnv, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('worker started')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}: ${err}`)));
  });
  child.stdout!.resume();
  return child;
}

/** CPU ticks (1/100 s) a process has used, user + system; 0 when it is gone. */
function cpuTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The machine's busy and total CPU ticks (every core, every process). */
function machineTicks(): { busy: number; total: number } {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = cpu.reduce((a, b) => a + b, 0);
    return { busy: total - cpu[3]! - (cpu[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

interface BacklogFigure {
  perSecond: number;
  /** CPU seconds per 1,000 operations settled: the worker processes, and the Postgres backends of the database. */
  workerCpu: number;
  postgresCpu: number;
  /** Share of every core of the machine busy during the drain (all processes: other work on the machine too). */
  machineBusy: number;
  /** The workers' backends in open transactions as sampled: running, waiting on Lock / LWLock / IO, or on the worker. */
  waits: string;
}

interface BacklogContext {
  pool: pg.Pool;
  wallets: BenchAgent[];
  workers: ChildProcess[];
}

/** Target 2 (and 3): `count` operations of `type` seeded at once, settled by the running worker processes. */
async function backlogRate(ctx: BacklogContext, type: SettledType, count: number): Promise<BacklogFigure> {
  const backends = async () => (await ctx.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows.map((r) => r.pid);
  await seedBacklog(ctx.pool, type, ctx.wallets, count);
  const committed = performance.now();
  const before = new Map((await backends()).map((pid) => [pid, cpuTicks(pid)]));
  const workersBefore = ctx.workers.reduce((n, c) => n + cpuTicks(c.pid!), 0);
  const machineBefore = machineTicks();
  const deadline = Date.now() + 900_000;
  const waits = new Map<string, number>();
  for (;;) {
    // What the workers' backends are doing, sampled with each look: running, waiting on a lock (contention between
    // the workers), or idle in a transaction / waiting for the next query (the worker process's own time).
    const { rows } = await ctx.pool.query<{ n: number; waits: Record<string, number> | null }>(
      `SELECT (SELECT count(*)::int FROM operations WHERE status IN ('accepted', 'submitted')) AS n,
         (SELECT jsonb_object_agg(w, c) FROM (SELECT CASE WHEN state = 'active' AND wait_event_type IS NULL THEN 'running'
              WHEN wait_event_type IN ('Lock', 'LWLock', 'IO') THEN wait_event_type ELSE 'worker' END AS w, count(*) AS c
            FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' GROUP BY 1) x) AS waits`,
    );
    for (const [w, c] of Object.entries(rows[0]!.waits ?? {})) waits.set(w, (waits.get(w) ?? 0) + c);
    if (rows[0]!.n === 0) break;
    if (Date.now() > deadline) throw new Error(`the backlog did not drain within 900 s (${rows[0]!.n} left)`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const seconds = (performance.now() - committed) / 1000;
  const machine = machineTicks();
  let postgres = 0;
  for (const pid of await backends()) postgres += cpuTicks(pid) - (before.get(pid) ?? 0);
  const workers = ctx.workers.reduce((n, c) => n + cpuTicks(c.pid!), 0) - workersBefore;
  const perThousand = (ticks: number) => ticks / 100 / (count / 1000);
  const sampled = [...waits.values()].reduce((a, b) => a + b, 0);
  return {
    waits: [...waits].map(([w, c]) => `${w} ${((c / Math.max(1, sampled)) * 100).toFixed(0)} %`).join(', '),
    perSecond: count / seconds,
    workerCpu: perThousand(workers),
    postgresCpu: perThousand(postgres),
    machineBusy: machine.total > machineBefore.total ? (machine.busy - machineBefore.busy) / (machine.total - machineBefore.total) : NaN,
  };
}

async function stopWorkers(children: ChildProcess[]): Promise<void> {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? once(c, 'exit') : null)));
}

/**
 * Each type's backlog settled by one worker process, then a fresh backlog of the same type by two (a second process
 * started beside the first and stopped after), so that the two figures of a type are measured minutes apart at most.
 */
export async function backlogRates(opts: SettlementBenchOptions, batchSize: string, types: SettledType[], count: number): Promise<Map<SettledType, [BacklogFigure, BacklogFigure]>> {
  const scratch = await scratchDatabase('agent_api_bench_backlog');
  const masterKey = randomBytes(32).toString('hex');
  const workerEnv = env(scratch.url, opts.redisUrl, masterKey, batchSize);
  const built = await createApp(loadConfig(workerEnv));
  const pool = new pg.Pool({ connectionString: scratch.url, max: 2 });
  const workers: ChildProcess[] = [];
  const out = new Map<SettledType, [BacklogFigure, BacklogFigure]>();
  const name = batchSize === ONE_AT_A_TIME ? 'one at a time' : `batches of ${batchSize}`;
  const say = (f: BacklogFigure) =>
    `${f.perSecond.toFixed(0)}/s (CPU s per 1,000: workers ${f.workerCpu.toFixed(2)}, their Postgres backends ${f.postgresCpu.toFixed(2)}; machine ${(f.machineBusy * 100).toFixed(0)} % busy; backends in a transaction: ${f.waits})`;
  try {
    const ctx = { pool, wallets: await createAgents(built, P2.agents), workers };
    workers.push(await startWorkerProcess(workerEnv));
    for (const type of types) {
      const one = await backlogRate(ctx, type, count);
      workers.push(await startWorkerProcess(workerEnv));
      const two = await backlogRate(ctx, type, count);
      await stopWorkers(workers.splice(1));
      out.set(type, [one, two]);
      opts.log?.(`settlement backlog of ${count} (${name}), ${type}: one worker ${say(one)}; two workers ${say(two)}`);
    }
  } finally {
    await stopWorkers(workers);
    await pool.end();
    await built.close();
    await scratch.drop();
  }
  return out;
}

/** The settlement rows: each figure for one-at-a-time settlement (the tree before issue 31) and batches, same run. */
export async function settlementRows(opts: SettlementBenchOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const batch = String(DEFAULT_SETTLEMENT_BATCH_SIZE);
  const types = opts.types ?? SETTLED_TYPES;
  const seconds = opts.seconds ?? P2.seconds;
  const modes = [
    { size: ONE_AT_A_TIME, name: 'one at a time (before issue 31)', backlog: opts.oldBacklog ?? OLD_BACKLOG },
    { size: batch, name: `batches of ${batch}`, backlog: opts.backlog ?? BACKLOG },
  ];
  const load = new Map<string, Map<SettledType, UnderLoad>>();
  const backlog = new Map<string, Map<SettledType, [BacklogFigure, BacklogFigure]>>();
  for (const mode of modes) {
    const figures = await underLoad(opts, mode.size, types);
    load.set(mode.size, figures);
    for (const [type, r] of figures)
      opts.log?.(
        `settlement under load (${mode.name}), ${WRITES[type].name}: ${r.accepted} accepted in ${seconds} s, ${r.executedAtStop} executed when the load stopped, p99 accept→executed ${r.p99Ms.toFixed(0)} ms, drained ${r.drainSeconds.toFixed(1)} s after`,
      );
  }
  for (const mode of modes) backlog.set(mode.size, await backlogRates(opts, mode.size, types, mode.backlog));
  for (const type of types) {
    const what = WRITES[type].name;
    for (const mode of modes) {
      const r = load.get(mode.size)!.get(type)!;
      const share = r.accepted === 0 ? 0 : r.executedAtStop / r.accepted;
      rows.push(
        row({
          bench: 'settlement',
          what: `${what} executed when the P2 load stops, in-process worker, ${mode.name}`,
          today: share * 100,
          unit: '%',
          baseline: r.accepted / seconds,
          baselineName: 'accepted/s',
          target: '≥ 90 %',
          met: share >= 0.9,
        }),
      );
      rows.push(row({ bench: 'settlement', what: `${what} accept → executed p99 under the P2 load, ${mode.name}`, today: r.p99Ms, unit: 'ms', target: '≤ 2000 ms', met: r.p99Ms <= 2000 }));
    }
    for (const mode of modes) {
      const [one, two] = backlog.get(mode.size)!.get(type)!;
      rows.push(
        row({
          bench: 'settlement',
          what: `${what} settled, backlog of ${mode.backlog}, two worker processes, ${mode.name}`,
          today: two.perSecond,
          unit: '/s',
          baseline: one.perSecond,
          baselineName: 'one worker',
          target: '≥ 1.6 of baseline',
          met: two.perSecond >= 1.6 * one.perSecond,
        }),
      );
    }
  }
  return rows;
}
