// What every benchmark shares: a scratch database, an HTTP listener that closes cleanly, autocannon typed, and
// the rows of the summary table `make bench` prints (scripts/bench/all.ts).
//
// A benchmark states each target as a row: the figure measured today, the baseline measured in the same run, the
// ratio and the target it is held to. `report()` prints the rows and, when BENCH_REPORT names a file, appends them
// to it as JSON lines so `make bench` can gather every benchmark's rows into one table. Benchmarks assert nothing
// about time: `met` is printed, never turned into an exit code.
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import type { RequestListener, Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import pg from 'pg';

// autocannon ships no type declarations (and @types/autocannon is not installed): type what is used.
export interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
export interface AutocannonOptions {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  duration: number;
  workers?: number;
  requests?: { method?: string; path?: string; headers?: Record<string, string>; body?: string }[];
}
export const autocannon = createRequire(import.meta.url)('autocannon') as (opts: AutocannonOptions) => Promise<AutocannonResult>;

export interface BenchRow {
  /** Which benchmark printed it: read, payments, webhooks, footprint. */
  bench: string;
  /** What was measured: `GET /v1/agent/balances`, `payments, 20 agents`, `RSS, Postgres mode`. */
  what: string;
  today: number;
  unit: string;
  /** The baseline's figure in the same run and what it is (omitted for absolute targets such as RSS). */
  baseline?: number;
  baselineName?: string;
  /** today / baseline, when there is a baseline. */
  ratio?: number;
  /** The target in words: `≥ 0.60 of baseline`, `≤ 150 MB`. */
  target: string;
  met: boolean;
}

export function row(r: Omit<BenchRow, 'ratio'>): BenchRow {
  return r.baseline ? { ...r, ratio: r.today / r.baseline } : r;
}

const fmt = (n: number | undefined, digits = 0) => (n === undefined ? '' : n.toFixed(digits));

/** Prints the rows as a table and appends them to BENCH_REPORT (JSON lines) when that is set. */
export function report(rows: BenchRow[], out: NodeJS.WritableStream = process.stdout): void {
  out.write(formatTable(rows));
  const file = process.env.BENCH_REPORT;
  if (file) appendFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
}

export function formatTable(rows: BenchRow[]): string {
  const header = ['bench', 'what', 'today', 'unit', 'baseline', 'ratio', 'target', 'met'];
  const cells = rows.map((r) => [
    r.bench,
    r.what,
    fmt(r.today, r.today < 10 ? 2 : 0),
    r.unit,
    r.baseline === undefined ? '' : `${fmt(r.baseline, r.baseline < 10 ? 2 : 0)} (${r.baselineName ?? 'baseline'})`,
    fmt(r.ratio, 2),
    r.target,
    r.met ? 'yes' : 'NO',
  ]);
  return table(header, cells);
}

/**
 * The rows two trees reported for the same figure, side by side (`make bench`, issue 25 item 8): each tree's ratio
 * (or figure, for absolute targets). A read rate is held at or above the baseline tree's ratio to the same-work
 * server; every other figure keeps its own target.
 */
export function formatComparison(baselineRows: BenchRow[], rows: BenchRow[], baselineName: string): string {
  // The baseline's name tells apart two rows of one figure (payments against the raw loop and the same-work server); its numbers vary by run.
  const key = (r: BenchRow) => `${r.bench}\u0000${r.what}\u0000${(r.baselineName ?? '').replace(/\d+/g, '#')}`;
  const before = new Map(baselineRows.map((r) => [key(r), r]));
  const figure = (r: BenchRow | undefined) => (r === undefined ? 'not measured' : r.ratio !== undefined ? fmt(r.ratio, 2) : `${fmt(r.today, r.today < 10 ? 2 : 0)} ${r.unit}`);
  const compared = rows.flatMap((r) => {
    const old = before.get(key(r));
    if (!old) return [];
    const heldToBaseline = r.bench === 'read' && r.unit === 'req/s' && r.baselineName === 'same-work' && old.ratio !== undefined;
    const target = heldToBaseline ? `≥ ${baselineName}'s ratio` : r.target;
    const met = heldToBaseline ? (r.ratio ?? 0) >= old.ratio! : r.met;
    return [{ cells: [r.bench, r.what, figure(old), figure(r), target, met ? 'yes' : 'NO'] }];
  });
  return table(
    ['bench', 'what', baselineName, 'this tree', 'target', 'met'],
    compared.map((c) => c.cells),
  );
}

function table(header: string[], cells: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd() + '\n';
  return line(header) + line(widths.map((w) => '-'.repeat(w))) + cells.map(line).join('');
}

export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Stops accepting and closes the keep-alive connections as they go idle. */
export async function close(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  server.closeIdleConnections();
  await closed;
  clearInterval(sweep);
}

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * DATABASE_URL when set (kept), else a new database on TEST_PG_ADMIN_URL (default the local server) that
 * `drop()` removes.
 */
export async function scratchDatabase(prefix = 'agent_api_bench'): Promise<ScratchDatabase> {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, drop: async () => {} };
  const adminUrl = process.env.TEST_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  return { url: adminUrl.replace(/\/[^/]*$/, `/${name}`), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/**
 * The checkout a benchmark loads the service from: `--tree DIR` (`make bench` passes the tree issue 25 was measured
 * against, scripts/bench/all.ts), else this one. The harness, its baseline servers and its load stay this tree's.
 */
export function treeOf(dir: string | undefined): URL {
  return dir ? new URL(`file://${dir.replace(/\/$/, '')}/`) : new URL('../../', import.meta.url);
}

/** A module of that checkout (`src/app.js`), typed as this tree's module of the same path. */
export async function fromTree<T>(tree: URL, path: string): Promise<T> {
  return (await import(new URL(path, tree).href)) as T;
}

/** The request listener of a built app: `listener` on this tree, the Express app itself on trees before issue 25. */
export function listenerOf(built: { listener?: RequestListener; app?: unknown }): RequestListener {
  return built.listener ?? (built.app as RequestListener);
}
