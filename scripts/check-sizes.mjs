// Fails when a service file passes 350 lines (issue 17: services are split by noun, one noun a file).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const LIMIT = 350;
const files = [];
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (path.endsWith('.ts')) files.push(path);
  }
};
walk('src/services');
const over = files.map((f) => [f, readFileSync(f, 'utf8').split('\n').length - 1]).filter(([, n]) => n > LIMIT);
for (const [f, n] of over) console.error(`${f}: ${n} lines (at most ${LIMIT}): split it by noun`);
if (over.length) process.exit(1);
console.log(`src/services: ${files.length} files, none over ${LIMIT} lines`);
