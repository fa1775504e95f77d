// `make bench` (npm run bench): every benchmark in turn as its own process (read, payments, webhooks, footprint, metrics),
// their own output let through, then one table of every row they reported (scripts/bench/support.ts) with today's
// figures beside the targets. The chain benchmark needs Anvil and stays apart (make bench-chain). A benchmark that
// fails is named at the end and makes the exit code non-zero; a target missed does not (benchmarks assert nothing
// about time).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatTable, type BenchRow } from './support.js';

const BENCHMARKS = ['read', 'payments', 'webhooks', 'footprint', 'metrics'];
const root = fileURLToPath(new URL('../../', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'agent-api-bench-'));
const file = join(dir, 'rows.jsonl');
const failed: string[] = [];
try {
  for (const name of BENCHMARKS) {
    process.stdout.write(`\n== bench:${name} ==\n`);
    const run = spawnSync('npm', ['run', '--silent', `bench:${name}`], { cwd: root, stdio: 'inherit', env: { ...process.env, BENCH_REPORT: file } });
    if (run.status !== 0) failed.push(`${name} (exit ${run.status ?? run.signal})`);
  }
  let rows: BenchRow[] = [];
  try {
    rows = readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as BenchRow);
  } catch {
    // No benchmark reported a row.
  }
  process.stdout.write(`\n== every benchmark (figures are noisy on a shared machine; ratios are measured within one run) ==\n`);
  process.stdout.write(formatTable(rows));
  if (failed.length > 0) {
    process.stdout.write(`failed: ${failed.join(', ')}\n`);
    process.exitCode = 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
