// Owner approvals (issue 27, step 1 and the API side of step 2): policy keys, payments held for approval, approve with
// a passkey step-up, reject, expiry on the injected clock, the inbox, events, simulate and /self/limits; and
// acceptance 2: nothing on the agent's channel (its routes, every MCP tool, an MCP client answering elicitation)
// can approve.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mintAccessToken } from '../mcp/helpers.js';
import { createSoftAuthenticator, type SoftAuthenticator } from '../support/webauthn.js';
import type { TestAgent } from '../helpers/server.js';
import { SCOPES } from '../../generated/vocabulary.js';

const PAYEE = '0x00000000000000000000000000000000000000b7';
const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('owner approvals', function () {
  this.timeout(60_000);
  let srv: LedgerServer;
  before(async () => {
    srv = await startLedgerServer({ ADMIN_TOKEN: ADMIN });
  });
  after(async () => srv.close());

  interface Owner {
    agent: TestAgent;
    auth: Record<string, string>;
    key: SoftAuthenticator;
  }

  const owner = async (policy: Record<string, unknown>): Promise<Owner> => {
    const agent = await srv.createAgent({
      ownerId: (await srv.services.agents.createOwner(srv.db, { email: `o-${randomUUID()}@example.com` })).owner_id,
      policy: { operation_types: 'all', allowed_recipients: 'all', ...policy },
      fund: { USDC: '1000' },
    });
    const { token } = await srv.services.owner.createToken(srv.db, agent.ownerId);
    const auth = { authorization: `Bearer ${token}` };
    const base = new URL(srv.baseUrl);
    const key = createSoftAuthenticator(base.hostname, base.origin);
    const opts = await call('POST', '/v1/owner/passkeys/registration-options', auth);
    expect(opts.status, opts.text).to.equal(200);
    const reg = await call('POST', '/v1/owner/passkeys', auth, { name: 'test key', response: key.register(opts.body.options) });
    expect(reg.status, reg.text).to.equal(201);
    return { agent, auth, key };
  };

  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    srv.request(method, path, { headers, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
  const pay = (o: Owner, amount: string, to = PAYEE) => srv.request('POST', '/v1/agent/payments', { agent: o.agent, body: { to, asset: 'USDC', amount }, idempotencyKey: randomUUID() });
  const operation = async (o: Owner, id: string) => (await srv.request('GET', `/v1/agent/operations/${id}`, { agent: o.agent })).body.operation;
  const usdc = async (o: Owner) => (await srv.request('GET', '/v1/agent/balances', { agent: o.agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC');
  const events = async (o: Owner, id: string) => (await srv.db('events').where({ operation_id: id }).orderBy('seq')).map((e: { type: string }) => e.type);

  async function approve(o: Owner, id: string, opts: { tamper?: boolean } = {}) {
    const options = await call('POST', '/v1/owner/passkeys/assertion-options', o.auth, { purpose: 'approve', operation_id: id });
    expect(options.status, options.text).to.equal(200);
    return call('POST', `/v1/owner/approvals/${id}/approve`, o.auth, { assertion: o.key.assert(options.body.options, opts) });
  }

  describe('ownerReplacePolicy', () => {
    it('validates the approval keys like the others and shows them in /self/limits', async () => {
      const o = await owner({});
      const bad = await call('PUT', `/v1/owner/agents/${o.agent.agentId}/policy`, o.auth, { operation_types: 'all', approval_threshold_usd: 100, approve_new_payees: 'yes', approval_ttl_seconds: 5 });
      expect(bad.status, bad.text).to.equal(400);
      expect(bad.body.error.details.problems).to.include.members([
        'approval_threshold_usd must be a decimal string',
        'approve_new_payees must be true or false',
        'approval_ttl_seconds must be at least 60',
      ]);
      const good = await call('PUT', `/v1/owner/agents/${o.agent.agentId}/policy`, o.auth, {
        operation_types: 'all',
        approval_threshold_usd: '100',
        approve_new_payees: true,
        approval_ttl_seconds: 3600,
      });
      expect(good.status, good.text).to.equal(200);
      expect(good.body.policy).to.include({ approval_threshold_usd: '100', approve_new_payees: true, approval_ttl_seconds: 3600 });
      const limits = await srv.request('GET', '/v1/agent/self/limits', { agent: o.agent });
      expect(limits.body.limits).to.include({ approval_threshold_usd: '100', approve_new_payees: true, approval_ttl_seconds: 3600 });
    });
  });

  describe('ownerApproveOperation', () => {
    it('holds a 300 USDC payment above a 100 USD threshold until the owner approves it with a passkey, then settles it', async () => {
      const o = await owner({ approval_threshold_usd: '100' });
      const small = await pay(o, '50');
      expect(small.body).to.not.have.property('approval');
      const res = await pay(o, '300');
      expect(res.status, res.text).to.equal(200);
      expect(res.body.status).to.equal('accepted');
      expect(res.body.approval).to.include({ state: 'pending', threshold_usd: '100' });
      expect(res.body.approval.reasons).to.deep.equal(['above_threshold']);
      const id = res.body.operation_id as string;
      await srv.settle();
      expect((await operation(o, small.body.operation_id)).status).to.equal('executed');
      const waiting = await operation(o, id);
      expect(waiting.status).to.equal('accepted');
      expect(waiting.approval.state).to.equal('pending');
      expect(await usdc(o)).to.include({ held: '300' });

      const inbox = await call('GET', '/v1/owner/approvals?state=pending', o.auth);
      expect(inbox.status, inbox.text).to.equal(200);
      expect(inbox.body.items.map((i: { operation_id: string }) => i.operation_id)).to.deep.equal([id]);
      expect(inbox.body.items[0]).to.include({ amount: '300', asset_symbol: 'USDC', to_address: PAYEE });

      // No step-up, a tampered one, or the operator's token: refused, still pending.
      expect((await call('POST', `/v1/owner/approvals/${id}/approve`, o.auth, {})).status).to.equal(400);
      const tampered = await approve(o, id, { tamper: true });
      expect(tampered.status, tampered.text).to.equal(401);
      expect(tampered.body.error.code).to.equal('authentication_failed');
      const byAdmin = await call('POST', `/v1/owner/approvals/${id}/approve`, { authorization: `Bearer ${ADMIN}` }, { assertion: o.key.assert({ challenge: 'x' }) });
      expect(byAdmin.status).to.equal(403);
      // A challenge issued for another approval does not approve this one.
      const other = await pay(o, '200');
      const otherOptions = await call('POST', '/v1/owner/passkeys/assertion-options', o.auth, { purpose: 'approve', operation_id: other.body.operation_id });
      const crossed = await call('POST', `/v1/owner/approvals/${id}/approve`, o.auth, { assertion: o.key.assert(otherOptions.body.options) });
      expect(crossed.status, crossed.text).to.equal(401);
      expect((await operation(o, id)).approval.state).to.equal('pending');

      const approved = await approve(o, id);
      expect(approved.status, approved.text).to.equal(200);
      expect(approved.body.operation.approval.state).to.equal('approved');
      expect((await approve(o, id)).status).to.equal(409);
      await srv.settle();
      const done = await operation(o, id);
      expect(done.status).to.equal('executed');
      expect(done.approval.decided_at).to.be.a('string');
      expect(await events(o, id)).to.deep.equal(['operation.approval_requested', 'operation.approval_decided', 'payment.executed']);
    });

    it('asks for approval of the first payment to a payee only (approve_new_payees)', async () => {
      const o = await owner({ approve_new_payees: true });
      const first = await pay(o, '10');
      expect(first.body.approval.reasons).to.deep.equal(['new_payee']);
      expect((await approve(o, first.body.operation_id)).status).to.equal(200);
      await srv.settle();
      const second = await pay(o, '10');
      expect(second.body).to.not.have.property('approval');
    });
  });

  describe('ownerRejectOperation', () => {
    it('cancels a rejected operation and one that expires on the clock, releasing their holds, with activity and events', async () => {
      const o = await owner({ approval_threshold_usd: '100', approval_ttl_seconds: 600 });
      const rejected = (await pay(o, '300')).body.operation_id as string;
      const expiring = (await pay(o, '250')).body.operation_id as string;
      expect(await usdc(o)).to.include({ available: '450', held: '550' });
      const res = await call('POST', `/v1/owner/approvals/${rejected}/reject`, o.auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.operation).to.include({ status: 'cancelled' });
      expect(res.body.operation.approval.state).to.equal('rejected');
      expect(res.body.operation.error.code).to.equal('approval_rejected');
      await srv.settle();
      expect((await operation(o, expiring)).approval.state).to.equal('pending');
      srv.clock.advance(601_000);
      await srv.settle();
      const expired = await operation(o, expiring);
      expect(expired.status).to.equal('cancelled');
      expect(expired.approval.state).to.equal('expired');
      expect(await usdc(o)).to.include({ available: '1000', held: '0' });
      for (const id of [rejected, expiring]) expect(await events(o, id)).to.deep.equal(['operation.approval_requested', 'operation.approval_decided']);
      const activity = await srv.request('GET', '/v1/agent/activity', { agent: o.agent });
      expect(
        activity.body.items.filter((a: { operation_id: string; description: string }) => [rejected, expiring].includes(a.operation_id) && /cancelled: approval/.test(a.description)),
      ).to.have.length(2);
      expect((await approve(o, expiring)).status).to.equal(409);
    });
  });

  describe('simulateRequest', () => {
    it('reports the approval_required stage', async () => {
      const o = await owner({ approval_threshold_usd: '100' });
      const sim = await srv.request('POST', '/v1/agent/simulate', { agent: o.agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: PAYEE, asset: 'USDC', amount: '300' } } });
      expect(sim.status, sim.text).to.equal(200);
      expect(sim.body.would_succeed).to.equal(true);
      const stage = sim.body.stages.find((s: { name: string }) => s.name === 'approval_required');
      expect(stage).to.include({ outcome: 'passed' });
      expect(stage.message).to.match(/above the approval threshold of 100 USD/);
    });
  });

  describe("the agent's channel (acceptance 2)", () => {
    it('has no agent route, MCP tool, elicitation answer or OAuth scope that approves', async () => {
      const o = await owner({ approval_threshold_usd: '100' });
      const id = (await pay(o, '300')).body.operation_id as string;
      // No /v1/agent route names approvals; the owner's routes refuse the agent's key and an agent token of every scope.
      const agentRoutes = srv.built.router.ops.filter((op) => op.path.startsWith('/v1/agent'));
      expect(agentRoutes.filter((op) => /approv/i.test(op.path + op.operationId))).to.deep.equal([]);
      for (const path of [`/v1/owner/approvals/${id}/approve`, `/v1/owner/approvals/${id}/reject`]) {
        expect((await srv.request('POST', path, { agent: o.agent, body: {}, idempotencyKey: randomUUID() })).status).to.equal(401);
      }
      const scopes = [...SCOPES];
      const apiToken = await mintAccessToken(srv, o.agent, { scopes, resource: 'agent' });
      expect((await srv.request('POST', `/v1/owner/approvals/${id}/reject`, { headers: { authorization: `Bearer ${apiToken}` }, body: {}, idempotencyKey: randomUUID() })).status).to.equal(401);

      // Every MCP tool, called with the pending operation's id wherever it takes one, by a client that accepts any elicitation.
      const mcp = new Client({ name: 'eliciting-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
      let elicited = 0;
      mcp.setRequestHandler(ElicitRequestSchema, async () => {
        elicited += 1;
        return { action: 'accept', content: { approve: true, approved: true, decision: 'approve' } };
      });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${srv.baseUrl}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${await mintAccessToken(srv, o.agent, { scopes })}` } } }));
      const { tools } = await mcp.listTools();
      expect(tools.length).to.be.greaterThan(40);
      for (const tool of tools) {
        const args: Record<string, unknown> = {};
        const props = (tool.inputSchema.properties ?? {}) as Record<string, unknown>;
        for (const name of Object.keys(props)) if (/(^|_)id$/.test(name)) args[name] = id;
        if ('idempotency_key' in props) args.idempotency_key = randomUUID();
        if (tool.name === 'agent_operations_wait_for_status') args.timeout_seconds = 0.2;
        await mcp.callTool({ name: tool.name, arguments: args }).catch(() => undefined);
      }
      await srv.settle();
      await mcp.close();
      expect(elicited).to.equal(0);
      const still = await operation(o, id);
      expect(still.status).to.equal('accepted');
      expect(still.approval.state).to.equal('pending');
    });
  });
});
