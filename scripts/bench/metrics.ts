// Scrape benchmark (issue 30 item 6): the database time of one /metrics scrape with 1,000,000 operations stored,
// beside the scrape before the item (the operations GROUP BY it dropped, with the same two reads), in the same run.
//
// A scratch database is migrated and seeded with one INSERT ... SELECT FROM generate_series per table: 500 agents,
// 1,000,000 operations over 90 days (types and statuses spread as production has them, ~0.1% still live: accepted or
// submitted, some already due), 200,000 events with a webhook delivery each (1% live: pending, retrying, in flight; 20
// endpoints disabled). Then VACUUM ANALYZE, and each scrape runs 2 times to warm up and 7 times measured (median).
//
// "Database time" is the wall time of the scrape's statements on ONE pooled connection (so the statements run one
// after another and their times add up, loopback round trips included): today `readAggregates` from
// src/observability/metrics.ts, the very function a scrape calls. The server's own figure (planning + execution from
// EXPLAIN (ANALYZE, BUFFERS)) is printed per statement below it. The target: today's scrape <= 50 ms.
//
// Usage: npm run --silent bench:metrics  (or: npx tsx scripts/bench/metrics.ts [--operations 1000000] [--deliveries 200000])
// Uses a scratch database on TEST_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createKnex, migrateLatest, type Knex } from '../../src/db/knex.js';
import { settlementLagSeconds, deliveryQueue } from '../../src/db/repositories/metrics.repository.js';
import { readAggregates } from '../../src/observability/metrics.js';
import { report, row, scratchDatabase } from './support.js';

const { values } = parseArgs({ options: { operations: { type: 'string', default: '1000000' }, deliveries: { type: 'string', default: '200000' } } });
const OPERATIONS = Number(values.operations);
const DELIVERIES = Number(values.deliveries);
const AGENTS = 500;
const WARMUPS = 2;
const RUNS = 7;
const TARGET_MS = 50;

const out = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Types weighted as the soak's mix and the API's families; the cumulative bounds pick one per row from a hash. */
const TYPES: Array<[string, number]> = [
  ['payment', 55],
  ['conversion', 12],
  ['earn.deposit', 8],
  ['earn.withdraw', 5],
  ['withdrawal.crypto', 5],
  ['x402.purchase', 5],
  ['withdrawal.bank', 3],
  ['x402.sign', 3],
  ['one_off_payment.create', 2],
  ['debt.borrow', 1],
  ['debt.repay', 1],
];

/** A CASE over a uniform [0,100) value `u` picking from weighted choices. */
function weighted(u: string, choices: Array<[string, number]>): string {
  let at = 0;
  const arms = choices.map(([value, weight]) => `WHEN ${u} < ${(at += weight)} THEN '${value}'`);
  return `CASE ${arms.join(' ')} ELSE '${choices[choices.length - 1]![0]}' END`;
}

async function seed(db: Knex): Promise<void> {
  await db.raw('SET synchronous_commit = off');
  await db.raw(`INSERT INTO owners (id, email, created_at) VALUES ('00000000-0000-4000-8000-000000000001', 'bench@example.com', now())`);
  await db.raw(`INSERT INTO agents (id, owner_id, name, api_key_hash, api_key_prefix)
    SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, '00000000-0000-4000-8000-000000000001', 'bench ' || g, md5(g::text), 'ak_' || g
    FROM generate_series(1, ${AGENTS}) g`);
  // Ids are time-ordered like newId() (UUID v7: milliseconds first), so rows land in primary-key order as in production.
  // The last 0.1% (the newest minutes) are still live; of the rest 92% executed, 4% policy_rejected, 3% failed, 1% cancelled.
  const live = Math.max(1, Math.round(OPERATIONS / 1000));
  // The secondary indexes are dropped for the load and built again from their own definitions (a sort each, ~3x faster).
  const indexes = (await db.raw(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'operations' AND indexname <> 'operations_pkey'`)).rows as Array<{ indexname: string; indexdef: string }>;
  for (const i of indexes) await db.raw(`DROP INDEX "${i.indexname}"`);
  await db.raw(`INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8,
      counts_toward_limits, human_message, settle_after, created_at, submitted_at, executed_at, failed_at, updated_at)
    SELECT (lpad(to_hex((extract(epoch FROM s.at) * 1000)::bigint), 12, '0') || '7' || substr(s.h, 1, 3) || '8' || substr(s.h, 4, 15))::uuid,
      ('00000000-0000-4000-8000-' || lpad(to_hex(1 + s.g % ${AGENTS}), 12, '0'))::uuid, 'wal_' || (1 + s.g % ${AGENTS}),
      s.type, s.status, 'operation', s.h, 'USDC', (s.g % 1000 + 1) * 10000, (s.g % 1000 + 1) * 1000000,
      s.status IN ('accepted', 'submitted', 'executed'), 'seeded', s.settle_after, s.at,
      CASE WHEN s.status IN ('submitted', 'executed') THEN s.at END, CASE WHEN s.status = 'executed' THEN s.at END,
      CASE WHEN s.status = 'execution_failed' THEN s.at END, s.at
    FROM (
      SELECT g, h, at, type, status,
        CASE WHEN status IN ('accepted', 'submitted') THEN now() - interval '30 seconds' + (g % 90) * interval '1 second' WHEN status IN ('executed', 'execution_failed') THEN at END AS settle_after
      FROM (
        SELECT g, md5(g::text) AS h, now() - interval '90 days' + g * (interval '90 days' / ${OPERATIONS}) AS at,
          ${weighted('(g * 7919 % 1000) / 10.0', TYPES)} AS type,
          CASE WHEN g > ${OPERATIONS - live} THEN (CASE WHEN g % 3 = 0 THEN 'submitted' ELSE 'accepted' END)
            ELSE ${weighted('(g * 104729 % 1000) / 10.0', [
              ['executed', 92],
              ['policy_rejected', 4],
              ['execution_failed', 3],
              ['cancelled', 1],
            ])} END AS status
        FROM generate_series(1::bigint, ${OPERATIONS}) g
      ) r
    ) s`);
  await db.raw(`SET maintenance_work_mem = '256MB'`);
  for (const i of indexes) await db.raw(i.indexdef);
  await db.raw(`INSERT INTO webhook_endpoints (id, agent_id, url, event_types, enabled, sealed_secret, created_at, updated_at)
    SELECT ('00000000-0000-4000-9000-' || lpad(to_hex(g), 12, '0'))::uuid, ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
      'https://hooks.example.com/' || g, ARRAY['payment.executed'], g > 20, 'sealed', now(), now()
    FROM generate_series(1, ${AGENTS}) g`);
  await db.raw(`INSERT INTO events (id, agent_id, wallet_id, type, payload, created_at)
    SELECT ('00000000-0000-4000-a000-' || lpad(to_hex(g), 12, '0'))::uuid, ('00000000-0000-4000-8000-' || lpad(to_hex(1 + g % ${AGENTS}), 12, '0'))::uuid,
      'wal_' || (1 + g % ${AGENTS}), 'payment.executed', '{}', now() - interval '30 days' + g * (interval '30 days' / ${DELIVERIES})
    FROM generate_series(1, ${DELIVERIES}) g`);
  // 1% of deliveries live (the newest): pending, retrying (half of them due) or in flight; the rest delivered or failed.
  await db.raw(`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, agent_id, event_type, event_created_at, status, attempt, next_attempt_at, created_at, updated_at)
    SELECT ('00000000-0000-4000-b000-' || lpad(to_hex(g), 12, '0'))::uuid, ('00000000-0000-4000-a000-' || lpad(to_hex(g), 12, '0'))::uuid,
      ('00000000-0000-4000-9000-' || lpad(to_hex(1 + g % ${AGENTS}), 12, '0'))::uuid, ('00000000-0000-4000-8000-' || lpad(to_hex(1 + g % ${AGENTS}), 12, '0'))::uuid,
      'payment.executed', at, status, CASE WHEN status = 'pending' THEN 0 ELSE 1 + g % 5 END,
      CASE WHEN status IN ('pending', 'retrying') THEN now() + (g % 120 - 60) * interval '1 second' END, at, at
    FROM (SELECT g, now() - interval '30 days' + g * (interval '30 days' / ${DELIVERIES}) AS at,
      CASE WHEN g > ${DELIVERIES - Math.round(DELIVERIES / 100)} THEN (ARRAY['pending', 'retrying', 'in_flight'])[1 + g % 3]
        WHEN g % 50 = 0 THEN 'failed' ELSE 'delivered' END AS status
      FROM generate_series(1, ${DELIVERIES}) g) d`);
  await db.raw('VACUUM ANALYZE');
}

/** The scrape before item 6: the operations GROUP BY (the removed countOperationsByTypeAndStatus) beside the same two reads. */
async function readAggregatesBefore(db: Knex, now: Date) {
  const operations = await db('operations').select('type', 'status').count<{ type: string; status: string; count: string | number }[]>('* as count').groupBy('type', 'status');
  return { operations, settlementLag: await settlementLagSeconds(db, now), queue: await deliveryQueue(db, now) };
}

async function time(fn: () => Promise<unknown>): Promise<{ median: number; runs: number[] }> {
  for (let i = 0; i < WARMUPS; i++) await fn();
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await fn();
    runs.push(performance.now() - t0);
  }
  return { median: median(runs), runs };
}

/** The statements `fn` sends, as pg receives them (knex's documented `query` event). */
async function statementsOf(db: Knex, fn: () => Promise<unknown>): Promise<Array<{ sql: string; bindings: unknown[] }>> {
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => seen.push({ sql: q.sql, bindings: q.bindings ?? [] });
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return seen;
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

/** One line per statement: server time (planning + execution), buffers, and the scans it did (with their rows). */
async function explain(client: pg.Client, label: string, statements: Array<{ sql: string; bindings: unknown[] }>): Promise<number> {
  let total = 0;
  for (const s of statements) {
    const result = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${s.sql}`, s.bindings);
    const [plan] = result.rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode; 'Planning Time': number; 'Execution Time': number }>;
    const scans: string[] = [];
    const walk = (n: PlanNode) => {
      if (/Scan/.test(n['Node Type'])) scans.push(`${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : n['Relation Name'] ? ` on ${n['Relation Name']}` : ''} (${n['Actual Rows']} rows)`);
      n.Plans?.forEach(walk);
    };
    walk(plan!.Plan);
    const ms = plan!['Planning Time'] + plan!['Execution Time'];
    total += ms;
    const table = /from "(\w+)"/i.exec(s.sql)?.[1] ?? '?';
    out(
      `  ${label.padEnd(7)} ${table.padEnd(18)} ${ms.toFixed(2).padStart(8)} ms (planning ${plan!['Planning Time'].toFixed(2)}, execution ${plan!['Execution Time'].toFixed(2)}), buffers hit ${plan!.Plan['Shared Hit Blocks']} read ${plan!.Plan['Shared Read Blocks']}; ${scans.join(', ')}`,
    );
  }
  return total;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const scratch = await scratchDatabase('agent_api_bench_metrics');
  // One connection: the scrape's statements (Promise.all in readAggregates) run one after another, so the wall time is their sum.
  const db = await createKnex({ databaseUrl: scratch.url, dataDir: '', poolMax: 1 });
  const client = new pg.Client({ connectionString: scratch.url });
  try {
    await migrateLatest(db);
    await seed(db);
    const [counts] = (
      await db.raw(`SELECT (SELECT count(*) FROM operations) AS operations, (SELECT count(*) FROM operations WHERE status IN ('accepted', 'submitted')) AS live_operations,
      (SELECT count(*) FROM webhook_deliveries) AS deliveries, (SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'retrying', 'in_flight')) AS live_deliveries,
      pg_size_pretty(pg_total_relation_size('operations')) AS operations_size`)
    ).rows as Array<Record<string, string | number>>;
    out(
      `seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${counts!.operations} operations (${counts!.live_operations} live, ${counts!.operations_size} with indexes), ${counts!.deliveries} deliveries (${counts!.live_deliveries} live)`,
    );

    const now = () => new Date();
    const today = await time(() => readAggregates(db, now()));
    const before = await time(() => readAggregatesBefore(db, now()));
    const groupBy = await time(() => db('operations').select('type', 'status').count('* as count').groupBy('type', 'status'));
    const met = today.median <= TARGET_MS;
    out(`\nscrape database time, median of ${RUNS} after ${WARMUPS} warm-ups, one connection (ms):`);
    out(`  today (readAggregates: settlement lag + webhook queue)      ${today.median.toFixed(2).padStart(8)}   runs ${today.runs.map((r) => r.toFixed(1)).join(' ')}`);
    out(`  before item 6 (+ operations GROUP BY type, status)          ${before.median.toFixed(2).padStart(8)}   runs ${before.runs.map((r) => r.toFixed(1)).join(' ')}`);
    out(`  of which the operations GROUP BY alone                      ${groupBy.median.toFixed(2).padStart(8)}`);
    out(`  target: today <= ${TARGET_MS} ms at ${OPERATIONS.toLocaleString('en-US')} operations: ${met ? 'PASS' : 'FAIL'} (${(before.median / today.median).toFixed(0)}x less than before)`);

    await client.connect();
    await client.query('SET jit = off');
    out('\nEXPLAIN (ANALYZE, BUFFERS), server time per statement:');
    const todayServer = await explain(client, 'today', await statementsOf(db, () => readAggregates(db, now())));
    const beforeServer = await explain(client, 'before', await statementsOf(db, () => readAggregatesBefore(db, now())));
    out(`  server total: today ${todayServer.toFixed(2)} ms, before ${beforeServer.toFixed(2)} ms\n`);

    report([
      row({
        bench: 'metrics',
        what: `scrape DB time, ${OPERATIONS / 1e6}M operations`,
        today: today.median,
        unit: 'ms',
        baseline: before.median,
        baselineName: 'GROUP BY scrape',
        target: `≤ ${TARGET_MS} ms`,
        met,
      }),
    ]);
    out(`whole run ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    await client.end().catch(() => {});
    await db.destroy();
    await scratch.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:metrics: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
