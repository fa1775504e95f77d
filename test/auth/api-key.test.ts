import { expect } from 'chai';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createFakeClock } from '../../src/lib/clock.js';

describe('getSelf (header-key authentication)', () => {
  let server: TestServer;
  const clock = createFakeClock('2026-06-01T00:00:00.000Z');
  before(async () => {
    server = await startTestServer({ clock });
  });
  after(() => server.close());

  const expectAuthError = (res: { status: number; body: { ok: boolean; error: { code: string } } }, code: string) => {
    expect(res.status, JSON.stringify(res.body)).to.equal(401);
    expect(res.body.ok).to.equal(false);
    expect(res.body.error.code).to.equal(code);
  };

  it('returns the agent, wallet and auth method when the key matches', async () => {
    const agent = await server.createAgent({ name: 'alpha' });
    const res = await server.request('GET', '/v1/agent/self', { agent });
    expect(res.status).to.equal(200);
    expect(res.body.ok).to.equal(true);
    expect(res.body.agent.id).to.equal(agent.agentId);
    expect(res.body.agent.name).to.equal('alpha');
    expect(res.body.wallet.id).to.equal(agent.walletId);
    expect(res.body.auth.method).to.equal('api_key');
  });

  it('answers authentication_failed when credentials are missing', async () => {
    expectAuthError(await server.request('GET', '/v1/agent/self'), 'authentication_failed');
    const agent = await server.createAgent();
    expectAuthError(await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': agent.agentId } }), 'authentication_failed');
    expectAuthError(await server.request('GET', '/v1/agent/self', { headers: { 'x-api-key': agent.apiKey } }), 'authentication_failed');
  });

  it('answers authentication_failed when the agent id is malformed or unknown', async () => {
    const agent = await server.createAgent();
    expectAuthError(await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': 'not-a-uuid', 'x-api-key': agent.apiKey } }), 'authentication_failed');
    expectAuthError(await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': '00000000-0000-4000-8000-000000000000', 'x-api-key': agent.apiKey } }), 'authentication_failed');
  });

  it('answers authentication_failed when the key does not match, even for a disabled agent', async () => {
    const agent = await server.createAgent();
    await server.services.agents.setEnabled(server.db, agent.agentId, false);
    expectAuthError(await server.request('GET', '/v1/agent/self', { headers: { ...agent.headers, 'x-api-key': `${agent.apiKey}x` } }), 'authentication_failed');
  });

  it('answers authentication_failed when the owner is soft-deleted', async () => {
    const { owner_id } = await server.services.agents.createOwner(server.db, { email: `gone-${Date.now()}@example.com` });
    const agent = await server.createAgent({ ownerId: owner_id });
    await server.services.agents.deleteOwner(server.db, owner_id);
    expectAuthError(await server.request('GET', '/v1/agent/self', { agent }), 'authentication_failed');
  });

  it('answers agent_disabled when the key matches and the agent is disabled', async () => {
    const agent = await server.createAgent();
    await server.services.agents.setEnabled(server.db, agent.agentId, false);
    expectAuthError(await server.request('GET', '/v1/agent/self', { agent }), 'agent_disabled');
  });

  it('answers agent_not_yet_active before the window starts', async () => {
    const agent = await server.createAgent({ startsAt: new Date('2026-07-01T00:00:00Z') });
    expectAuthError(await server.request('GET', '/v1/agent/self', { agent }), 'agent_not_yet_active');
  });

  it('answers agent_expired once the window has ended', async () => {
    const agent = await server.createAgent({ endsAt: new Date('2026-05-01T00:00:00Z') });
    expectAuthError(await server.request('GET', '/v1/agent/self', { agent }), 'agent_expired');
  });

  it('refuses the old key after rotation and accepts the new one', async () => {
    const agent = await server.createAgent();
    const { api_key } = await server.services.agents.rotateKey(server.db, agent.agentId);
    expectAuthError(await server.request('GET', '/v1/agent/self', { agent }), 'authentication_failed');
    const res = await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': agent.agentId, 'x-api-key': api_key } });
    expect(res.status).to.equal(200);
  });

  it('stores only the SHA-256 of the key', async () => {
    const agent = await server.createAgent();
    const row = await server.db('agents').where({ id: agent.agentId }).first();
    expect(JSON.stringify(row)).not.to.include(agent.apiKey);
    expect(row.api_key_hash).to.match(/^[0-9a-f]{64}$/);
    expect(agent.apiKey).to.match(/^agk_/);
  });
});
