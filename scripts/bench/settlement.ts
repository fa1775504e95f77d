// Settlement benchmark (issue 31), run by `npm run bench:payments` beside the acceptance figures: does settlement keep
// pace with acceptance? Each figure is measured with one operation settled per transaction (SETTLEMENT_BATCH_SIZE=0,
// the settlement of the tree before issue 31: its phase 1 and phase 2 code paths are unchanged) and with batches
// (the configured default), in the same run, on the simulated chain (SETTLEMENT_DELAY_MS=0), Postgres and Redis.
//
//   1. Under load: the P2 load (20 agents, 32 requests in flight, 10 s after a 1 s warm-up) against a server with
//      its worker loops in the same process (what `npm start` runs). Printed: the share of the payments accepted in
//      the measured window that were `executed` when the load stopped (target ≥ 90 %), and the p99 of accept →
//      executed over them (target ≤ 2 s; those still open when the load stops count with their later settlement).
//   2. Backlog: 20,000 accepted operations committed at once (the rows acceptance writes: operation, hold, its two
//      journal legs, the balances) while `scripts/worker.ts` processes (what `npm run worker` runs) wait: settled per
//      second with one worker process and with two (target: two ≥ 1.6× one). For payments, crypto withdrawals and
//      one-off payments.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
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
const BODY = JSON.stringify({ to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' });
const P2 = { agents: 20, inFlight: 32, seconds: 10, warmup: 1 };
const BACKLOG = 20_000;
/** Batch size 0: one operation per transaction, the settlement of the tree before issue 31. */
const ONE_AT_A_TIME = '0';

export interface SettlementBenchOptions {
  /** The load generator (payments.ts LOAD_WORKER): CONCURRENCY loops posting BODY for `seconds`. */
  loadWorker: string;
  redisUrl: string;
  /** Seconds of load after the warm-up (the issue's P2 load: 10). */
  seconds?: number;
  backlog?: number;
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

/** Agents with a capped payment policy, funds and a write rate limit out of the way (as payments.ts makes them). */
async function createAgents(built: BuiltApp, count: number): Promise<{ agentId: string; walletId: string; headers: Record<string, string> }[]> {
  const { services, db } = built;
  const { owner_id } = await services.agents.createOwner(db, { email: `bench-${randomBytes(4).toString('hex')}@example.com` });
  const out: { agentId: string; walletId: string; headers: Record<string, string> }[] = [];
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
    out.push({ agentId: a.agent_id, walletId: wallet.id as string, headers: { 'x-agent-id': a.agent_id, 'x-api-key': a.api_key, 'content-type': 'application/json' } });
  }
  return out;
}

function runLoad(loadWorker: string, url: string, headers: Record<string, string>[], seconds: number): Promise<{ ok: number; failed: number }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(loadWorker, { eval: true, workerData: { url, agents: headers, body: BODY, concurrency: P2.inFlight, seconds } });
    worker.once('message', (rate: { ok: number; failed: number }) => resolve(rate));
    worker.once('error', reject);
  });
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);

interface UnderLoad {
  accepted: number;
  executedAtStop: number;
  p99Ms: number;
  /** Seconds from the end of the load until every accepted payment was executed. */
  drainSeconds: number;
}

/** Target 1: the P2 load against a server whose worker loops share its process. */
export async function underLoad(opts: SettlementBenchOptions, batchSize: string): Promise<UnderLoad> {
  const scratch = await scratchDatabase('agent_api_bench_settle');
  const config = loadConfig(env(scratch.url, opts.redisUrl, randomBytes(32).toString('hex'), batchSize));
  const built = await createApp(config);
  const server = createServer(built.app);
  server.keepAliveTimeout = 5_000;
  const worker = createWorker({ loops: built.loops, log: built.log });
  try {
    const base = await listen(server);
    const agents = await createAgents(built, P2.agents);
    worker.start();
    const url = `${base}/v1/agent/payments`;
    await runLoad(
      opts.loadWorker,
      url,
      agents.map((a) => a.headers),
      P2.warmup,
    );
    const started = new Date();
    const load = await runLoad(
      opts.loadWorker,
      url,
      agents.map((a) => a.headers),
      opts.seconds ?? P2.seconds,
    );
    const stopped = new Date();
    const counts = await built
      .db('operations')
      .where('created_at', '>=', started)
      .where('created_at', '<', stopped)
      .select(built.db.raw('count(*)::int AS accepted'), built.db.raw("count(*) FILTER (WHERE status = 'executed' AND executed_at <= ?)::int AS executed", [stopped]));
    const { accepted, executed } = counts[0] as { accepted: number; executed: number };
    if (load.failed > 0) throw new Error(`${load.failed} payments were refused under load`);
    // Wait for the rest, then the latencies of every payment of the window.
    const deadline = Date.now() + 300_000;
    for (;;) {
      const open = await built.db('operations').whereIn('status', ['accepted', 'submitted']).count<{ n: string }[]>('* as n');
      if (Number(open[0]!.n) === 0) break;
      if (Date.now() > deadline) throw new Error('settlement did not drain within 300 s of the load');
      await new Promise((r) => setTimeout(r, 100));
    }
    const drained = await built.db('operations').max<{ at: Date }[]>('executed_at as at');
    const latencies = (
      await built.db('operations').where('created_at', '>=', started).where('created_at', '<', stopped).select(built.db.raw('extract(epoch FROM executed_at - created_at) * 1000 AS ms'))
    )
      .map((r: { ms: string }) => Number(r.ms))
      .sort((a, b) => a - b);
    return { accepted, executedAtStop: executed, p99Ms: percentile(latencies, 99), drainSeconds: Math.max(0, (new Date(drained[0]!.at).getTime() - stopped.getTime()) / 1000) };
  } finally {
    await worker.stop();
    await close(server);
    await built.close();
    await scratch.drop();
  }
}

type BacklogType = 'payment' | 'withdrawal.crypto' | 'one_off_payment.create';

/** `count` accepted operations of `type` as acceptance writes them (operation, hold, journal legs, balances), in one transaction. */
async function seedBacklog(pool: pg.Pool, type: BacklogType, wallets: { agentId: string; walletId: string }[], count: number): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const details =
      type === 'payment'
        ? `jsonb_build_object('route', 'address', 'recipient_id', null, 'trusted_destination_id', null, 'recurring_payment_id', null, 'note', null)`
        : type === 'withdrawal.crypto'
          ? `jsonb_build_object('trusted_destination_id', gen_random_uuid()::text, 'note', null)`
          : `jsonb_build_object('one_off_payment_id', gen_random_uuid()::text, 'recipient_id', null, 'note', null)`;
    const resource = type === 'payment' ? 'payment' : type === 'withdrawal.crypto' ? 'withdrawal' : 'one_off_payment';
    await client.query(
      `CREATE TEMP TABLE seed ON COMMIT DROP AS
       SELECT gen_random_uuid() AS id, gen_random_uuid() AS hold_id, gen_random_uuid() AS journal_id, a.agent_id, a.wallet_id, clock_timestamp() AS at
       FROM generate_series(1, $1::int) g
       JOIN (SELECT (x->>'agent_id')::uuid AS agent_id, x->>'wallet_id' AS wallet_id, (row_number() OVER ()) - 1 AS i FROM jsonb_array_elements($2::jsonb) x) a ON a.i = g % $3`,
      [count, JSON.stringify(wallets.map((w) => ({ agent_id: w.agentId, wallet_id: w.walletId }))), wallets.length],
    );
    await client.query(
      `INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8, fee_usd_e8, counts_toward_limits,
         human_message, to_address, details, settle_after, created_at, updated_at)
       SELECT id, agent_id, wallet_id, $1, 'accepted', $2, id::text, 'USDC', 10000, 1000000, 0, true, 'bench: 0.01 USDC to 0x0000…bEEF',
         '0x000000000000000000000000000000000000beef', ${details}, at, at, at FROM seed ORDER BY at`,
      [type, resource],
    );
    await client.query(`INSERT INTO holds (id, operation_id, wallet_id, asset_symbol, amount, status, created_at) SELECT hold_id, id, wallet_id, 'USDC', 10000, 'held', at FROM seed`);
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

/** Target 2 (and 3): settled per second on a backlog, with `workers` worker processes. */
async function backlogRate(
  ctx: { pool: pg.Pool; databaseUrl: string; env: Record<string, string>; wallets: { agentId: string; walletId: string }[] },
  type: BacklogType,
  workers: number,
  count: number,
): Promise<number> {
  const children = await Promise.all(Array.from({ length: workers }, () => startWorkerProcess(ctx.env)));
  try {
    const started = performance.now();
    await seedBacklog(ctx.pool, type, ctx.wallets, count);
    const committed = performance.now();
    const deadline = Date.now() + 600_000;
    for (;;) {
      const { rows } = await ctx.pool.query(`SELECT count(*)::int AS n FROM operations WHERE status IN ('accepted', 'submitted')`);
      if (rows[0].n === 0) break;
      if (Date.now() > deadline) throw new Error(`the backlog did not drain within 600 s (${rows[0].n} left)`);
      await new Promise((r) => setTimeout(r, 50));
    }
    void started;
    return count / ((performance.now() - committed) / 1000);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? once(c, 'exit') : null)));
  }
}

export async function backlogRates(opts: SettlementBenchOptions, batchSize: string, types: BacklogType[]): Promise<Map<BacklogType, [number, number]>> {
  const scratch = await scratchDatabase('agent_api_bench_backlog');
  const masterKey = randomBytes(32).toString('hex');
  const workerEnv = env(scratch.url, opts.redisUrl, masterKey, batchSize);
  const built = await createApp(loadConfig(workerEnv));
  const pool = new pg.Pool({ connectionString: scratch.url, max: 2 });
  const out = new Map<BacklogType, [number, number]>();
  try {
    const agents = await createAgents(built, P2.agents);
    const ctx = { pool, databaseUrl: scratch.url, env: workerEnv, wallets: agents };
    for (const type of types) {
      const one = await backlogRate(ctx, type, 1, opts.backlog ?? BACKLOG);
      const two = await backlogRate(ctx, type, 2, opts.backlog ?? BACKLOG);
      out.set(type, [one, two]);
      opts.log?.(`settlement backlog (${batchSize === ONE_AT_A_TIME ? 'one at a time' : `batches of ${batchSize}`}), ${type}: ${one.toFixed(0)}/s with one worker, ${two.toFixed(0)}/s with two`);
    }
  } finally {
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
  const modes = [
    { size: ONE_AT_A_TIME, name: 'one at a time (before issue 31)' },
    { size: batch, name: `batches of ${batch}` },
  ];
  const load: UnderLoad[] = [];
  for (const mode of modes) {
    const r = await underLoad(opts, mode.size);
    load.push(r);
    opts.log?.(
      `settlement under load (${mode.name}): ${r.accepted} accepted in ${opts.seconds ?? P2.seconds} s, ${r.executedAtStop} executed when the load stopped, p99 accept→executed ${r.p99Ms.toFixed(0)} ms, drained ${r.drainSeconds.toFixed(1)} s after`,
    );
  }
  for (const [i, mode] of modes.entries()) {
    const r = load[i]!;
    const share = r.accepted === 0 ? 0 : r.executedAtStop / r.accepted;
    rows.push(
      row({
        bench: 'settlement',
        what: `executed when the P2 load stops, in-process worker, ${mode.name}`,
        today: share * 100,
        unit: '%',
        baseline: r.accepted / (opts.seconds ?? P2.seconds),
        baselineName: 'accepted/s',
        target: '≥ 90 %',
        met: share >= 0.9,
      }),
    );
    rows.push(row({ bench: 'settlement', what: `accept → executed p99 under the P2 load, ${mode.name}`, today: r.p99Ms, unit: 'ms', target: '≤ 2000 ms', met: r.p99Ms <= 2000 }));
  }
  const types: BacklogType[] = ['payment', 'withdrawal.crypto', 'one_off_payment.create'];
  for (const mode of modes) {
    const rates = await backlogRates(opts, mode.size, types);
    for (const type of types) {
      const [one, two] = rates.get(type)!;
      rows.push(
        row({
          bench: 'settlement',
          what: `${type} settled, backlog of ${opts.backlog ?? BACKLOG}, two worker processes, ${mode.name}`,
          today: two,
          unit: '/s',
          baseline: one,
          baselineName: 'one worker',
          target: '≥ 1.6 of baseline',
          met: two >= 1.6 * one,
        }),
      );
    }
  }
  return rows;
}
