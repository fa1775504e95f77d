// README acceptance: with `npm start` running on the embedded default, the README's agentctl
// examples go through the server (admin token from DATA_DIR/admin-token), take effect at once,
// and survive a restart. `npm run migrate` refuses while the server holds the data directory.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, startServerProcess, type ServerProcess } from '../helpers/process.js';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('README agentctl examples against a running npm start', function () {
  this.timeout(300_000);
  let dataDir: string;
  let port: number;
  let server: ServerProcess | null = null;
  // Only what a user's shell would have: no DATABASE_URL, no ADMIN_TOKEN, no AGENT_API_BASE_URL.
  const env = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, PORT: String(port), NODE_ENV: 'development', LOG_LEVEL: 'warn' });
  const run = (command: string, args: string[]): Promise<CliResult> =>
    new Promise((resolve) => {
      execFile('npm', ['run', '--silent', command, '--', ...args], { cwd: repoRoot, env: env(), timeout: 120_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0, stdout, stderr });
      });
    });
  const agentctl = async (...args: string[]) => {
    const result = await run('agentctl', args);
    expect(result.code, result.stderr).to.equal(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines, result.stdout).to.have.length(1);
    return JSON.parse(lines[0]!) as Record<string, string>;
  };
  const start = async () => {
    server = await startServerProcess({ ...env(), DATABASE_URL: undefined, REDIS_URL: undefined, MASTER_KEY: undefined, HOST: '127.0.0.1' }, { timeoutMs: 120_000, npmStart: true });
    return server;
  };

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-readme-'));
    port = await freePort();
  });
  after(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates an owner and an agent, allows, sets a policy and funds it: seen at once and after a restart', async () => {
    const first = await start();
    expect(first.port).to.equal(port);
    expect(statSync(join(dataDir, 'admin-token')).mode & 0o777).to.equal(0o600);

    const owner = await agentctl('owner', 'create', '--email', 'owner@example.com', '--json');
    expect(owner).to.have.all.keys('owner_id');
    const agent = await agentctl('agent', 'create', '--owner', owner.owner_id!, '--name', 'treasury bot', '--json');
    expect(agent).to.have.all.keys('agent_id', 'wallet_id', 'api_key');
    const allowed = await agentctl('agent', 'allow', agent.agent_id!, '--all');
    expect(allowed.agent_id).to.equal(agent.agent_id);
    const policyFile = join(dataDir, 'policy.json');
    writeFileSync(policyFile, JSON.stringify({ operation_types: 'all', per_tx_usd: '25', allowed_assets: ['USDC'] }));
    const policy = await agentctl('agent', 'set-policy', agent.agent_id!, '--file', policyFile);
    expect(policy).to.have.all.keys('agent_id', 'policy');
    const funded = await agentctl('wallet', 'fund', agent.agent_id!, '--asset', 'USDC', '--amount', '100');
    expect(funded).to.include({ agent_id: agent.agent_id, asset: 'USDC', amount: '100', available: '100' });
    const dest = await agentctl('destination', 'add', agent.agent_id!, '--kind', 'crypto', '--chain', 'base', '--address', '0x1111111111111111111111111111111111111111', '--label', 'cold');
    expect(dest).to.have.all.keys('destination_id');
    const token = await agentctl('owner', 'token', 'create', '--owner', owner.owner_id!);
    expect(token).to.have.all.keys('owner_id', 'token');

    const headers = { 'x-agent-id': agent.agent_id!, 'x-api-key': agent.api_key! };
    const check = async (base: string) => {
      const balances = (await (await fetch(`${base}/v1/agent/balances`, { headers })).json()) as { items: { asset_symbol: string; available: string }[] };
      expect(balances.items.find((b) => b.asset_symbol === 'USDC')?.available).to.equal('100');
      const limits = (await (await fetch(`${base}/v1/agent/self/limits`, { headers })).json()) as Record<string, unknown>;
      expect(JSON.stringify(limits)).to.contain('"25"');
      // The owner token reads the same through the owner API, and the audit log holds every action.
      const audit = (await (await fetch(`${base}/v1/owner/audit`, { headers: { authorization: `Bearer ${token.token}` } })).json()) as { items: { action: string; actor: string }[] };
      expect(audit.items.map((e) => e.action)).to.include.members([
        'adminCreateOwner',
        'ownerCreateAgent',
        'ownerReplacePolicy',
        'ownerFundWallet',
        'ownerAddTrustedDestination',
        'adminCreateOwnerToken',
      ]);
      expect(audit.items.every((e) => e.actor === 'admin')).to.equal(true);
    };
    await check(first.baseUrl);

    const migrate = await run('migrate', []);
    expect(migrate.code).to.not.equal(0);
    expect(migrate.stderr).to.contain('is in use by process');

    await first.stop();
    server = null;
    const second = await start();
    await check(second.baseUrl);
    await second.stop();
    server = null;

    // No server: agentctl opens the database itself, with the same output.
    const limits = await agentctl('agent', 'limits', agent.agent_id!);
    expect(limits.agent_id).to.equal(agent.agent_id);
  });
});
