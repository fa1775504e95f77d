// agentctl through a running server (AGENT_API_BASE_URL + ADMIN_TOKEN): the documented commands
// print the same JSON as when they open the database, and every one is the server's doing
// (the operator's actions appear in the owner's audit log).
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentctlWith } from '../helpers/agentctl.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('agentctl through the server', function () {
  this.timeout(240_000);
  let srv: TestServer;
  let dir: string;

  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
    dir = mkdtempSync(join(tmpdir(), 'agentctl-remote-'));
  });
  after(async () => {
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const { agentctl, json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv({ ADMIN_TOKEN: ADMIN, AGENT_API_BASE_URL: srv.baseUrl }) }));

  it('prints the documented output for owner, agent, policy, payee, destination, chain and grant commands', async () => {
    const owner = await json('owner', 'create', '--email', `remote-${randomUUID()}@example.com`, '--json');
    expect(owner).to.have.all.keys('owner_id');
    const ownerId = owner.owner_id as string;
    const token = await json('owner', 'token', 'create', '--owner', ownerId);
    expect(token).to.have.all.keys('owner_id', 'token');
    const agent = await json('agent', 'create', '--owner', ownerId, '--name', 'remote bot', '--json');
    expect(agent).to.have.all.keys('agent_id', 'wallet_id', 'api_key');
    const agentId = agent.agent_id as string;
    expect(await json('agent', 'set-rate-limit', agentId, '--class', 'read', '--limit', '7', '--burst', '7')).to.deep.equal({
      agent_id: agentId,
      class: 'read',
      limit: 7,
      burst: 7,
      window_seconds: 60,
    });
    expect(await json('agent', 'set-window', agentId, '--starts-at', '2020-01-01T00:00:00.000Z', '--ends-at', '2099-01-01T00:00:00.000Z')).to.deep.equal({
      agent_id: agentId,
      starts_at: '2020-01-01T00:00:00.000Z',
      ends_at: '2099-01-01T00:00:00.000Z',
    });
    expect(await json('agent', 'rotate-key', agentId)).to.have.all.keys('api_key');
    expect(await json('agent', 'allow', agentId, '--all')).to.have.all.keys('agent_id', 'policy');
    const file = join(dir, 'policy.json');
    writeFileSync(file, JSON.stringify({ operation_types: 'all', per_tx_usd: '5' }));
    expect(((await json('agent', 'set-policy', agentId, '--file', file)).policy as Record<string, unknown>).per_tx_usd).to.equal('5');
    writeFileSync(file, JSON.stringify({ per_tx_usd: 5 }));
    const refused = await agentctl('agent', 'set-policy', agentId, '--file', file);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.include('per_tx_usd');
    expect(((await json('agent', 'limits', agentId)).limits as Record<string, unknown>).per_tx_usd).to.equal('5');
    expect(await json('wallet', 'fund', agentId, '--asset', 'USDC', '--amount', '12.5')).to.include({ agent_id: agentId, asset: 'USDC', amount: '12.5', available: '12.5' });
    const recipient = await json('recipient', 'add', agentId, '--kind', 'recurring', '--name', 'Rent', '--address', '0x1212121212121212121212121212121212121212');
    expect(recipient).to.have.all.keys('recipient_id');
    expect(await json('recurring', 'add', agentId, '--recipient', recipient.recipient_id as string, '--asset', 'USDC', '--amount', '1', '--interval', 'month')).to.have.all.keys(
      'recurring_payment_id',
    );
    const dest = await json('destination', 'add', agentId, '--kind', 'crypto', '--address', '0x3434343434343434343434343434343434343434', '--label', 'cold', '--timelock-seconds', '0');
    expect(dest).to.have.all.keys('destination_id');
    expect(await json('destination', 'confirm', dest.destination_id as string)).to.include({ ok: true, status: 'executed' });
    expect(await json('withdrawal-method', 'add', agentId, '--kind', 'bank', '--label', 'Checking')).to.have.all.keys('method_id');
    expect(await json('chain', 'fail-address', '0x5656565656565656565656565656565656565656')).to.deep.equal({ address: '0x5656565656565656565656565656565656565656', failing: true });
    expect(await json('price', 'set', 'WETH', '2000.5', '--at', '2026-03-02T09:30:00.000Z')).to.deep.equal({ asset: 'WETH', price_usd: '2000.5', observed_at: '2026-03-02T09:30:00.000Z' });
    expect(await json('grants', 'list', '--owner', ownerId)).to.deep.equal({ grants: [] });
    expect(await json('vault', 'list')).to.have.all.keys('vaults');
    expect(await json('agent', 'disable', agentId)).to.deep.equal({ agent_id: agentId, enabled: false });
    const unknown = await agentctl('agent', 'enable', randomUUID());
    expect(unknown.code).to.equal(1);
    expect(unknown.stderr).to.include('agent not found');

    const audit = await srv.request('GET', '/v1/owner/audit?limit=100', { headers: { authorization: `Bearer ${token.token as string}` } });
    const actions = audit.body.items.map((e: { action: string; actor: string }) => `${e.actor}:${e.action}`);
    expect(actions).to.include.members([
      'admin:adminCreateOwner',
      'admin:ownerCreateAgent',
      'admin:ownerSetRateLimit',
      'admin:ownerReplacePolicy',
      'admin:ownerFundWallet',
      'admin:ownerConfirmTrustedDestination',
      'admin:ownerDisableAgent',
    ]);
  });

  it('lists owners and agents and shows an agent (owner list, agent list --owner, agent show), without secrets', async () => {
    const email = `list-${randomUUID()}@example.com`;
    const ownerId = (await json('owner', 'create', '--email', email, '--name', 'Lister')).owner_id as string;
    const first = await json('agent', 'create', '--owner', ownerId, '--name', 'first bot');
    const second = await json('agent', 'create', '--owner', ownerId, '--name', 'second bot');
    await json('agent', 'create', '--owner', (await json('owner', 'create', '--email', `other-${randomUUID()}@example.com`)).owner_id as string, '--name', 'not theirs');

    const owners = await json('owner', 'list', '--limit', '100');
    expect(owners).to.have.all.keys('items', 'next_cursor', 'has_more');
    const listed = (owners.items as Record<string, unknown>[]).find((o) => o.owner_id === ownerId);
    expect(listed).to.deep.include({ owner_id: ownerId, email, name: 'Lister', agent_count: 2 });

    const agents = await json('agent', 'list', '--owner', ownerId);
    const items = agents.items as Record<string, unknown>[];
    expect(items.map((a) => a.name)).to.deep.equal(['second bot', 'first bot']);
    expect(items.every((a) => a.owner_id === ownerId)).to.equal(true);
    const page = await json('agent', 'list', '--owner', ownerId, '--limit', '1');
    expect(page).to.include({ has_more: true });
    const rest = await json('agent', 'list', '--owner', ownerId, '--limit', '1', '--cursor', page.next_cursor as string);
    expect((rest.items as { agent_id: string }[]).map((a) => a.agent_id)).to.deep.equal([first.agent_id]);
    expect(((await json('agent', 'list')).items as unknown[]).length).to.be.at.least(3);

    const shown = await json('agent', 'show', first.agent_id as string);
    expect(shown).to.have.all.keys('agent');
    expect(shown.agent).to.deep.include({ agent_id: first.agent_id, owner_id: ownerId, name: 'first bot', wallet_id: first.wallet_id, enabled: true });
    for (const output of [owners, agents, shown]) {
      const text = JSON.stringify(output);
      for (const key of [first.api_key, second.api_key] as string[]) expect(text).to.not.include(key);
      expect(text).to.not.match(/sealed|private_key|key_hash|token_hash/);
    }
    const missing = await agentctl('agent', 'show', randomUUID());
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.include('not found');
  });
});
