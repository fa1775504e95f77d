// Fails when a service file passes 350 lines (issue 17: services are split by noun, one noun a file).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const LIMIT = 350;
const files: string[] = [];
const walk = (dir: string): void => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (path.endsWith('.ts')) files.push(path);
  }
};
walk('src/services');
const over = files.map((f) => [f, readFileSync(f, 'utf8').split('\n').length - 1] as const).filter(([, n]) => n > LIMIT);
for (const [f, n] of over) process.stderr.write(`${f}: ${n} lines (at most ${LIMIT}): split it by noun\n`);
if (over.length) process.exit(1);
process.stdout.write(`src/services: ${files.length} files, none over ${LIMIT} lines\n`);
