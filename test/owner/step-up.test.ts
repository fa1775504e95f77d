// Issue 27: "Approvals, key rotation and policy changes ask for a fresh assertion." A console session whose owner has
// a passkey rotates the agent's key, replaces its policy or promotes its shadow policy only with a fresh assertion of
// that passkey over a challenge issued for that action on that agent (X-Passkey-Assertion); without one the answer
// is 428 step_up_required naming what to ask for, and nothing changes. A tampered assertion, one issued for another
// action or agent, or a replayed one is refused. An owner without a passkey, an owner token and the admin token are
// not asked.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { createSoftAuthenticator, type SoftAuthenticator } from '../support/webauthn.js';
import type { TestAgent } from '../helpers/server.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('the passkey step-up for key rotation and policy changes (issue 27)', function () {
  this.timeout(60_000);
  let srv: LedgerServer;
  before(async () => {
    srv = await startLedgerServer({ ADMIN_TOKEN: ADMIN });
  });
  after(async () => srv?.close());

  interface Owner {
    agent: TestAgent;
    other: TestAgent;
    session: Record<string, string>;
    key: SoftAuthenticator;
  }

  /** An owner with two agents, signed in to the console (its session cookie and CSRF token), with a passkey unless `passkey` is false. */
  async function owner(passkey = true): Promise<Owner> {
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email: `step-${randomUUID()}@example.com` })).owner_id;
    const agent = await srv.createAgent({ ownerId, policy: { operation_types: ['payment'], per_tx_usd: '10' } });
    const other = await srv.createAgent({ ownerId, policy: { operation_types: ['payment'] } });
    const s = await srv.services.owner.createSession(srv.db, ownerId);
    const session = { cookie: `owner_session=${s.token}`, 'x-csrf-token': s.csrfToken };
    const base = new URL(srv.baseUrl);
    const key = createSoftAuthenticator(base.hostname, base.origin);
    if (passkey) {
      const opts = await call('POST', '/v1/owner/passkeys/registration-options', session);
      expect((await call('POST', '/v1/owner/passkeys', session, { name: 'key', response: key.register(opts.body.options) })).status).to.equal(201);
    }
    return { agent, other, session, key };
  }

  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    srv.request(method, path, { headers, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
  /** A fresh assertion for `action` on `agentId`, as the X-Passkey-Assertion header carries it. */
  async function stepUp(o: Owner, action: string, agentId: string, opts: { tamper?: boolean } = {}): Promise<string> {
    const res = await call('POST', '/v1/owner/passkeys/assertion-options', o.session, { purpose: 'step_up', action, agent_id: agentId });
    expect(res.status, res.text).to.equal(200);
    return Buffer.from(JSON.stringify(o.key.assert(res.body.options, opts))).toString('base64url');
  }
  const policyOf = async (agentId: string) => (await call('GET', `/v1/owner/agents/${agentId}/policy`, { authorization: `Bearer ${ADMIN}` })).body.policy;
  const newPolicy = { operation_types: ['payment'], per_tx_usd: '25' };

  it('asks for a step-up before a policy change (428, nothing changed), and takes the change with a fresh assertion', async () => {
    const o = await owner();
    const path = `/v1/owner/agents/${o.agent.agentId}/policy`;
    const refused = await call('PUT', path, o.session, newPolicy);
    expect(refused.status, refused.text).to.equal(428);
    expect(refused.body.error.code).to.equal('step_up_required');
    expect(refused.body.error.details).to.deep.equal({ purpose: 'step_up', action: 'replace_policy', agent_id: o.agent.agentId });
    expect((await policyOf(o.agent.agentId)).per_tx_usd).to.equal('10');

    const done = await call('PUT', path, { ...o.session, 'x-passkey-assertion': await stepUp(o, 'replace_policy', o.agent.agentId) }, newPolicy);
    expect(done.status, done.text).to.equal(200);
    expect((await policyOf(o.agent.agentId)).per_tx_usd).to.equal('25');
    // The audit log names the passkey that stepped up.
    const audit = await call('GET', '/v1/owner/audit', o.session);
    const entry = audit.body.items.find((e: { action: string }) => e.action === 'ownerReplacePolicy');
    expect(entry.details.passkey_id).to.be.a('string');
  });

  it('refuses a tampered assertion, one issued for another action or another agent, and a replayed one', async () => {
    const o = await owner();
    const path = `/v1/owner/agents/${o.agent.agentId}/policy`;
    const with_ = (assertion: string) => call('PUT', path, { ...o.session, 'x-passkey-assertion': assertion }, newPolicy);
    for (const assertion of [
      await stepUp(o, 'replace_policy', o.agent.agentId, { tamper: true }),
      await stepUp(o, 'rotate_agent_key', o.agent.agentId),
      await stepUp(o, 'replace_policy', o.other.agentId),
      Buffer.from('not json').toString('base64url'),
    ]) {
      const res = await with_(assertion);
      expect(res.status, res.text).to.be.oneOf([400, 401]);
    }
    const once = await stepUp(o, 'replace_policy', o.agent.agentId);
    expect((await with_(once)).status).to.equal(200);
    const replayed = await with_(once);
    expect(replayed.status, replayed.text).to.equal(401);
    expect(replayed.body.error.code).to.equal('authentication_failed');
  });

  it('asks for a step-up before rotating the API key: the old key keeps working until the owner proves it', async () => {
    const o = await owner();
    const path = `/v1/owner/agents/${o.agent.agentId}/rotate-key`;
    const refused = await call('POST', path, o.session);
    expect(refused.status, refused.text).to.equal(428);
    expect(refused.body.error.details).to.include({ action: 'rotate_agent_key' });
    expect((await srv.request('GET', '/v1/agent/self', { agent: o.agent })).status).to.equal(200);

    const done = await call('POST', path, { ...o.session, 'x-passkey-assertion': await stepUp(o, 'rotate_agent_key', o.agent.agentId) });
    expect(done.status, done.text).to.equal(200);
    expect((await srv.request('GET', '/v1/agent/self', { agent: o.agent })).status).to.equal(401);
  });

  it('asks for a step-up before promoting a shadow policy', async () => {
    const o = await owner();
    expect((await call('PUT', `/v1/owner/agents/${o.agent.agentId}/shadow-policy`, o.session, newPolicy)).status).to.equal(200);
    const path = `/v1/owner/agents/${o.agent.agentId}/shadow-policy/promote`;
    const refused = await call('POST', path, o.session, {});
    expect(refused.status, refused.text).to.equal(428);
    expect(refused.body.error.details).to.include({ action: 'promote_shadow_policy' });
    const done = await call('POST', path, { ...o.session, 'x-passkey-assertion': await stepUp(o, 'promote_shadow_policy', o.agent.agentId) }, {});
    expect(done.status, done.text).to.equal(200);
    expect((await policyOf(o.agent.agentId)).per_tx_usd).to.equal('25');
  });

  it('does not ask an owner without a passkey, an owner token or the admin token', async () => {
    const plain = await owner(false);
    expect((await call('PUT', `/v1/owner/agents/${plain.agent.agentId}/policy`, plain.session, newPolicy)).status).to.equal(200);
    const o = await owner();
    const { token } = await srv.services.owner.createToken(srv.db, o.agent.ownerId);
    expect((await call('PUT', `/v1/owner/agents/${o.agent.agentId}/policy`, { authorization: `Bearer ${token}` }, newPolicy)).status).to.equal(200);
    expect((await call('POST', `/v1/owner/agents/${o.agent.agentId}/rotate-key`, { authorization: `Bearer ${ADMIN}` })).status).to.equal(200);
  });

  it('issues step-up options only for an agent of the owner, and needs action and agent_id', async () => {
    const o = await owner();
    const stranger = await owner();
    const foreign = await call('POST', '/v1/owner/passkeys/assertion-options', o.session, { purpose: 'step_up', action: 'replace_policy', agent_id: stranger.agent.agentId });
    expect(foreign.status, foreign.text).to.equal(404);
    const incomplete = await call('POST', '/v1/owner/passkeys/assertion-options', o.session, { purpose: 'step_up', action: 'replace_policy' });
    expect(incomplete.status, incomplete.text).to.equal(400);
    const unknown = await call('POST', '/v1/owner/passkeys/assertion-options', o.session, { purpose: 'step_up', action: 'drain_wallet', agent_id: o.agent.agentId });
    expect(unknown.status, unknown.text).to.equal(400);
  });
});
