// agentctl exactly as documented: `npm run --silent agentctl -- <group> <command> ... --json`.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { repoRoot } from '../helpers/process.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function agentctl(args: string[]): Promise<CliResult> {
  const env = { ...process.env, ...testConfigEnv() };
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'agentctl', '--', ...args], { cwd: repoRoot, env, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The one JSON object a successful command prints (npm's own warnings go to stderr). */
function json(result: CliResult): Record<string, unknown> {
  expect(result.code, result.stderr).to.equal(0);
  const lines = result.stdout.trim().split('\n');
  expect(lines, result.stdout).to.have.length(1);
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

describe('agentctl', function () {
  this.timeout(120_000);
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server?.close();
  });

  it('lists owners and agents and shows an agent on the database directly, as through the server', async () => {
    const email = `cli-list-${randomBytes(4).toString('hex')}@example.com`;
    const owner = json(await agentctl(['owner', 'create', '--email', email]));
    const agent = json(await agentctl(['agent', 'create', '--owner', owner.owner_id as string, '--name', 'listed']));
    const owners = json(await agentctl(['owner', 'list', '--limit', '100']));
    expect((owners.items as Record<string, unknown>[]).find((o) => o.owner_id === owner.owner_id)).to.deep.include({ email, agent_count: 1 });
    const agents = json(await agentctl(['agent', 'list', '--owner', owner.owner_id as string]));
    expect((agents.items as { agent_id: string }[]).map((a) => a.agent_id)).to.deep.equal([agent.agent_id]);
    const shown = json(await agentctl(['agent', 'show', agent.agent_id as string]));
    expect(shown.agent).to.deep.include({ agent_id: agent.agent_id, name: 'listed' });
    expect(JSON.stringify([owners, agents, shown])).to.not.include(agent.api_key as string);
  });

  it('creates an owner and an agent, sets a rate limit and disables it, each printing its documented keys', async () => {
    const email = `cli-${randomBytes(4).toString('hex')}@example.com`;
    const owner = json(await agentctl(['owner', 'create', '--email', email, '--name', 'CLI owner', '--json']));
    expect(owner).to.have.all.keys('owner_id');
    expect(owner.owner_id).to.match(/^[0-9a-f-]{36}$/);

    const agent = json(await agentctl(['agent', 'create', '--owner', owner.owner_id as string, '--name', 'CLI agent', '--json']));
    expect(agent).to.have.all.keys('agent_id', 'wallet_id', 'api_key');
    const headers = { 'x-agent-id': agent.agent_id as string, 'x-api-key': agent.api_key as string };
    const self = await server.request('GET', '/v1/agent/self', { headers });
    expect(self.status).to.equal(200);
    expect(self.body.agent.owner_id).to.equal(owner.owner_id);
    expect(self.body.wallet.id).to.equal(agent.wallet_id);

    const limit = json(await agentctl(['agent', 'set-rate-limit', agent.agent_id as string, '--class', 'read', '--limit', '7', '--burst', '7', '--json']));
    expect(limit).to.deep.equal({ agent_id: agent.agent_id, class: 'read', limit: 7, burst: 7, window_seconds: 60 });
    const limited = await server.request('GET', '/v1/agent/self', { headers });
    expect(limited.status).to.equal(200);
    expect(limited.headers.get('x-ratelimit-limit')).to.equal('7');

    const disabled = json(await agentctl(['agent', 'disable', agent.agent_id as string, '--json']));
    expect(disabled).to.deep.equal({ agent_id: agent.agent_id, enabled: false });
    const refused = await server.request('GET', '/v1/agent/self', { headers });
    expect(refused.status).to.equal(401);
    expect(refused.body.error.code).to.equal('agent_disabled');
  });

  it('exits non-zero with a message on stderr for an unknown command or a bad flag', async () => {
    const unknown = await agentctl(['frobnicate', 'everything', '--json']);
    expect(unknown.code).to.not.equal(0);
    expect(unknown.stdout).to.equal('');
    expect(unknown.stderr).to.contain('unknown command "frobnicate everything"');

    const badClass = await agentctl(['agent', 'set-rate-limit', '00000000-0000-4000-8000-000000000000', '--class', 'nope', '--limit', '1', '--burst', '1', '--json']);
    expect(badClass.code).to.not.equal(0);
    expect(badClass.stderr).to.contain('--class must be one of');

    const missingAgent = await agentctl(['agent', 'disable', '00000000-0000-4000-8000-000000000000', '--json']);
    expect(missingAgent.code).to.not.equal(0);
    expect(missingAgent.stderr).to.contain('not found');
  });
});
