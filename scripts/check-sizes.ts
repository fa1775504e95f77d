// Fails when a hand-written source file passes its size: 400 lines in src/, sdk/src and console/src (issue 25: a room
// holds what its name says), and 350 in src/services (issue 17: one noun a file). Generated code is not counted.
// `tsx scripts/check-sizes.ts [ROOT...]` checks other roots with the 400-line rule (the house-checks test uses it).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface Rule {
  root: string;
  limit: number;
  hint: string;
}

const DEFAULT_RULES: Rule[] = [
  { root: 'src', limit: 400, hint: 'split it along its seams' },
  { root: 'sdk/src', limit: 400, hint: 'split it along its seams' },
  { root: 'console/src', limit: 400, hint: 'split it into pages and parts' },
  { root: 'src/services', limit: 350, hint: 'split it by noun' },
];

const isSource = (path: string) => /\.(ts|tsx|mts|cts)$/.test(path) && !path.endsWith('.d.ts');

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== 'generated' && name !== 'node_modules' && name !== 'dist') files.push(...sourceFiles(path));
    } else if (isSource(path)) files.push(path);
  }
  return files;
}

const rules: Rule[] = process.argv.length > 2 ? process.argv.slice(2).map((root) => ({ root, limit: 400, hint: 'split it along its seams' })) : DEFAULT_RULES;
let failed = false;
for (const rule of rules) {
  const files = sourceFiles(rule.root);
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n').length - 1;
    if (lines > rule.limit) {
      process.stderr.write(`${file}: ${lines} lines (at most ${rule.limit}): ${rule.hint}\n`);
      failed = true;
    }
  }
  if (!failed) process.stdout.write(`${rule.root}: ${files.length} files, none over ${rule.limit} lines\n`);
}
if (failed) process.exit(1);
