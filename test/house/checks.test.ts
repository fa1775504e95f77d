// The house checks of `make check` fail when they should (issue 25, acceptance 1): a source file over 400 lines, and an
// unformatted file. Each is run on a small fixture in a temporary folder, once passing and once failing on purpose.
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../helpers/process.js';

const bin = (name: string) => path.join(repoRoot, 'node_modules', '.bin', name);
const run = (cmd: string, args: string[], cwd = repoRoot) => spawnSync(cmd, args, { cwd, encoding: 'utf8' });

describe('house checks', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'house-checks-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('check-sizes fails on a source file over 400 lines and passes at 400, not counting generated code', () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `export const v${i} = ${i};`).join('\n') + '\n';
    mkdirSync(path.join(dir, 'room', 'generated'), { recursive: true });
    writeFileSync(path.join(dir, 'room', 'ok.ts'), lines(400));
    writeFileSync(path.join(dir, 'room', 'generated', 'big.ts'), lines(2000));
    const passing = run(bin('tsx'), ['scripts/check-sizes.ts', path.join(dir, 'room')]);
    expect(passing.status, passing.stderr).to.equal(0);

    writeFileSync(path.join(dir, 'room', 'big.tsx'), lines(401));
    const failing = run(bin('tsx'), ['scripts/check-sizes.ts', path.join(dir, 'room')]);
    expect(failing.status).to.equal(1);
    expect(failing.stderr).to.include('big.tsx: 401 lines (at most 400)');
    expect(failing.stderr).not.to.include('generated');
  });

  it('the formatter check fails on an unformatted file and passes once it is formatted', () => {
    const file = path.join(dir, 'messy.ts');
    writeFileSync(file, 'export  const x = {a:1,\n  b:"two"}\n');
    const config = ['--config', path.join(repoRoot, '.prettierrc.json')];
    const failing = run(bin('prettier'), ['--check', ...config, file]);
    expect(failing.status).to.equal(1);
    expect(failing.stderr + failing.stdout).to.include('messy.ts');

    expect(run(bin('prettier'), ['--write', ...config, file]).status).to.equal(0);
    const passing = run(bin('prettier'), ['--check', ...config, file]);
    expect(passing.status, passing.stderr).to.equal(0);
  });
});

describe('house checks: no module-level state (eslint/no-module-state.js)', function () {
  this.timeout(60_000);

  it('refuses a module-level let, a cache the module mutates and a call made on import; allows constants and factories', async () => {
    const { ESLint } = await import('eslint');
    const eslint = new ESLint({ cwd: repoRoot });
    const code = [
      "import pg from 'pg';",
      'let counter = 0;',
      'const cache = new Map<string, number>();',
      "const LOOKUP = new Set(['a', 'b']);",
      'pg.types.setTypeParser(20, Number);',
      'export function remember(k: string) { cache.set(k, counter++); return LOOKUP.has(k); }',
      'export function createCache() { const own = new Map<string, number>(); return (k: string) => own.set(k, 1); }',
    ].join('\n');
    const [result] = await eslint.lintText(code, { filePath: path.join(repoRoot, 'src/lib/fixture.ts') });
    const found = result!.messages.filter((m) => m.ruleId === 'state/no-module-state').map((m) => m.line);
    expect(found).to.deep.equal([2, 3, 5]);
    // config.ts is where the process's settings live.
    const [config] = await eslint.lintText('let x = 1;\nexport const read = () => x;\n', { filePath: path.join(repoRoot, 'src/config.ts') });
    expect(config!.messages.filter((m) => m.ruleId === 'state/no-module-state')).to.deep.equal([]);
  });
});
