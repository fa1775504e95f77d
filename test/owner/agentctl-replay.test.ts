// Issue 28 through agentctl: `agent replay-policy AGENT --file F --since 30d` prints the replay as JSON (what the owner
// API answers), and the shadow-policy commands set, list and promote a shadow, through a running server.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentctlWith } from '../helpers/agentctl.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';

const ADMIN = 'test-admin-token-replay-0123456789abcdef0123';

describe('agentctl: policy replay and shadow policies (issue 28)', function () {
  this.timeout(240_000);
  let srv: TestServer;
  let dir: string;

  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
    dir = mkdtempSync(join(tmpdir(), 'agentctl-replay-'));
  });
  after(async () => {
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv({ ADMIN_TOKEN: ADMIN, AGENT_API_BASE_URL: srv.baseUrl }) }));
  const file = (name: string, body: unknown) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };

  it('replays a candidate over the agent history and manages a shadow policy', async () => {
    const owner = await json('owner', 'create', '--email', `replay-${randomUUID()}@example.com`, '--json');
    const agent = await json('agent', 'create', '--owner', owner.owner_id as string, '--name', 'replayed', '--json');
    const agentId = agent.agent_id as string;
    await json('agent', 'set-policy', agentId, '--file', file('live.json', { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '100' }));
    await json('wallet', 'fund', agentId, '--asset', 'USDC', '--amount', '100');
    const headers = { 'x-agent-id': agentId, 'x-api-key': agent.api_key as string };
    for (const amount of ['30', '20']) {
      const paid = await srv.request('POST', '/v1/agent/payments', { headers, body: { to: '0x7777777777777777777777777777777777777777', asset: 'USDC', amount }, idempotencyKey: randomUUID() });
      expect(paid.status, paid.text).to.equal(200);
    }

    // A per-transaction cap of 25 would have refused the 30 and let the 20 through.
    const replay = await json('agent', 'replay-policy', agentId, '--file', file('candidate.json', { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '25' }), '--since', '30d');
    expect(replay.counts).to.deep.equal({ operations: 2, unchanged: 1, newly_refused: 1, newly_allowed: 0 });
    const ops = replay.operations as { candidate: { allowed: boolean; code: string | null; key: string | null }; change: string }[];
    expect(ops.map((o) => [o.change, o.candidate.code, o.candidate.key])).to.deep.equal([
      ['newly_refused', 'limit_exceeded', 'per_tx_usd'],
      ['unchanged', null, null],
    ]);
    // The same answer as the owner API gives; nothing was written.
    expect(await srv.db('operations').where({ agent_id: agentId }).count({ n: '*' }).first()).to.deep.equal({ n: 2 });
    const bad = await agentctl('agent', 'replay-policy', agentId, '--file', join(dir, 'candidate.json'), '--since', 'yesterday');
    expect(bad.code).to.not.equal(0);
    expect(bad.stderr).to.contain('--since');

    // A stricter shadow records the differing decision of the next write, without changing it.
    await json('agent', 'set-shadow-policy', agentId, '--file', file('shadow.json', { operation_types: ['payment'], allowed_recipients: 'all', per_tx_usd: '5' }));
    const paid = await srv.request('POST', '/v1/agent/payments', { headers, body: { to: '0x7777777777777777777777777777777777777777', asset: 'USDC', amount: '10' }, idempotencyKey: randomUUID() });
    expect(paid.status, paid.text).to.equal(200);
    const decisions = await json('agent', 'shadow-decisions', agentId);
    expect((decisions.decisions as { operation_id: string }[]).map((d) => d.operation_id)).to.deep.equal([paid.body.operation_id]);
    const promoted = await json('agent', 'promote-shadow-policy', agentId);
    expect(promoted.policy).to.include({ per_tx_usd: '5' });
    const refused = await srv.request('POST', '/v1/agent/payments', { headers, body: { to: '0x7777777777777777777777777777777777777777', asset: 'USDC', amount: '10' }, idempotencyKey: randomUUID() });
    expect(refused.status).to.equal(403);
  });
});
