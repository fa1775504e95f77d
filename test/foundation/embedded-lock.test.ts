// One process per embedded data directory (issue 10 item 9): agentctl, migrate or a second server refuse,
// with what to do, while `npm start` holds it; no command reports success for a write the server never sees.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireDataDirLock, DataDirLockedError } from '../../src/db/data-dir-lock.js';
import { runToExit, startServerProcess, type ServerProcess } from '../helpers/process.js';

const DEMO_LINE = /^demo agent: x-agent-id=([0-9a-f-]{36}) x-api-key=(\S+)$/;

const run = (script: string, args: string[], env: Record<string, string>) =>
  runToExit(process.execPath, ['--import', 'tsx', script, ...args], { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env });

describe('embedded data directory lock', function () {
  this.timeout(240_000);
  let dataDir: string;
  let server: ServerProcess | null = null;
  const env = () => ({ DATA_DIR: dataDir, NODE_ENV: 'development', LOG_LEVEL: 'warn', MASTER_KEY: 'k'.repeat(40) });

  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-lock-'));
  });
  after(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  const usdc = async (baseUrl: string, headers: Record<string, string>) => {
    const res = await fetch(`${baseUrl}/v1/agent/balances`, { headers });
    const body = (await res.json()) as { items: { asset_symbol: string; available: string }[] };
    return body.items.find((b) => b.asset_symbol === 'USDC')?.available;
  };

  it('refuses agentctl, migrate and a second server while npm start runs, and agentctl writes land once it stops', async () => {
    server = await startServerProcess(env(), { timeoutMs: 120_000 });
    const [, agentId, apiKey] = DEMO_LINE.exec(server.stdoutLines.find((l) => l.startsWith('demo agent:')) ?? '') ?? [];
    expect(agentId, server.stdoutLines.join('\n')).to.be.a('string');
    const headers = { 'x-agent-id': agentId!, 'x-api-key': apiKey! };
    const before = await usdc(server.baseUrl, headers);

    for (const [script, args] of [
      ['scripts/agentctl.ts', ['wallet', 'fund', agentId!, '--asset', 'USDC', '--amount', '100']],
      ['scripts/agentctl.ts', ['owner', 'create', '--email', 'second@example.com']],
      ['scripts/migrate.ts', []],
      ['src/server.ts', []],
    ] as const) {
      const result = await run(script, [...args], { ...env(), PORT: '0' });
      expect(result.code, `${script} ${args.join(' ')}: ${result.stdout}`).to.not.equal(0);
      expect(result.stdout, script).to.not.match(/"ok"|listening on|migrations applied/);
      expect(result.stderr, script).to.include('in use by process').and.to.include('DATABASE_URL');
    }
    // The server still sees its own data, untouched.
    expect(await usdc(server.baseUrl, headers)).to.equal(before);

    expect(await server.stop()).to.equal(0);
    server = null;
    const funded = await run('scripts/agentctl.ts', ['wallet', 'fund', agentId!, '--asset', 'USDC', '--amount', '100'], env());
    expect(funded.code, funded.stderr).to.equal(0);

    server = await startServerProcess(env(), { timeoutMs: 120_000 });
    expect(Number(await usdc(server.baseUrl, headers))).to.equal(Number(before) + 100);
    expect(await server.stop()).to.equal(0);
    server = null;
  });

  it('takes over a lock whose process is gone, and refuses one whose process lives', () => {
    const dir = join(dataDir, 'locks');
    mkdirSync(dir, { recursive: true });
    // A pid above Linux's pid_max cannot be alive.
    writeFileSync(join(dir, '.lock'), '4194305\n');
    const taken = acquireDataDirLock(dir);
    // Our own pid in the file counts as stale too (a container restarted as pid 1 finds its predecessor's lock).
    acquireDataDirLock(dir).release();
    taken.release();
    writeFileSync(join(dir, '.lock'), `${process.ppid}\n`);
    expect(() => acquireDataDirLock(dir)).to.throw(DataDirLockedError, `in use by process ${process.ppid}`);
  });
});
