// `make bench` (npm run bench): every benchmark in turn as its own process (read, payments, webhooks, footprint, metrics),
// their own output let through, then one table of every row they reported (scripts/bench/support.ts) with today's
// figures beside the targets. The chain benchmark needs Anvil and stays apart (make bench-chain). A benchmark that
// fails is named at the end and makes the exit code non-zero; a target missed does not (benchmarks assert nothing
// about time).
//
// Issue 25 item 8: in the same run, read, payments and webhooks also measure the service of a baseline tree (default
// BASELINE, the tree the issue was filed against) with this tree's harness (`--tree DIR`: same load, same same-work
// servers, same raw loops), each right before this tree's run so both meet the same machine. A last table sets the
// two trees' ratios side by side: reads hold at or above the baseline's ratio to the same-work server; payments and
// deliveries are held to their own targets, with the baseline's figure beside them.
//
// Usage: npm run --silent bench  [--baseline REV | --baseline none]
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { formatComparison, formatTable, type BenchRow } from './support.js';

/** The tree issue 25 was filed against ("today's tree" in its item 8): main before the house work began. */
const BASELINE = '950cddc';
const BENCHMARKS = ['read', 'payments', 'webhooks', 'footprint', 'metrics'];
/** The arguments a benchmark takes to measure the baseline tree (payments: the acceptance figures only). */
const COMPARED: Record<string, string[]> = { read: [], payments: ['--settlement', 'off', '--seed', '0'], webhooks: [] };
const root = fileURLToPath(new URL('../../', import.meta.url));

const { values } = parseArgs({ options: { baseline: { type: 'string', default: BASELINE } } });
const dir = mkdtempSync(join(tmpdir(), 'agent-api-bench-'));
const failed: string[] = [];

/** The baseline's files at REV (git archive, no worktree to clean up) with this checkout's node_modules; null when absent. */
function extractBaseline(rev: string): string | null {
  if (rev === 'none') return null;
  const tree = join(dir, 'baseline');
  mkdirSync(tree);
  const extract = spawnSync('sh', ['-c', `git archive --format=tar "$REV" | tar -x -C "$TREE"`], { cwd: root, env: { ...process.env, REV: rev, TREE: tree }, stdio: ['ignore', 'inherit', 'inherit'] });
  if (extract.status !== 0) {
    process.stdout.write(`baseline ${rev} is not in this clone (a shallow clone? git fetch --unshallow): measuring this tree only\n`);
    failed.push(`baseline ${rev} (not extracted)`);
    return null;
  }
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  return tree;
}

function run(name: string, args: string[], report: string): void {
  const bench = spawnSync('npm', ['run', '--silent', `bench:${name}`, '--', ...args], { cwd: root, stdio: 'inherit', env: { ...process.env, BENCH_REPORT: report } });
  if (bench.status !== 0) failed.push(`${name}${args.length ? ` ${args.join(' ')}` : ''} (exit ${bench.status ?? bench.signal})`);
}

function rowsOf(file: string): BenchRow[] {
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as BenchRow);
  } catch {
    return []; // no benchmark reported a row
  }
}

try {
  const baseline = extractBaseline(values.baseline);
  const thisFile = join(dir, 'rows.jsonl');
  const baselineFile = join(dir, 'baseline-rows.jsonl');
  for (const name of BENCHMARKS) {
    if (baseline && COMPARED[name]) {
      process.stdout.write(`\n== bench:${name}, baseline tree ${values.baseline} ==\n`);
      run(name, ['--tree', baseline, ...COMPARED[name]], baselineFile);
    }
    process.stdout.write(`\n== bench:${name} ==\n`);
    run(name, [], thisFile);
  }
  const rows = rowsOf(thisFile);
  process.stdout.write(`\n== every benchmark (figures are noisy on a shared machine; ratios are measured within one run) ==\n`);
  process.stdout.write(formatTable(rows));
  if (baseline) {
    process.stdout.write(`\n== this tree against ${values.baseline} (each measured by this tree's harness, the baseline's run right before this tree's) ==\n`);
    process.stdout.write(formatComparison(rowsOf(baselineFile), rows, values.baseline));
  }
  if (failed.length > 0) {
    process.stdout.write(`failed: ${failed.join(', ')}\n`);
    process.exitCode = 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
