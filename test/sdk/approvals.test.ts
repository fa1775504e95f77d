// Issue 27 acceptance 5, the SDK's part: an agent using the SDK sees the approval of a payment held for its owner
// (typed: `approval` on the write response and the operation, the v1.1 event types), `waitForOperation` keeps
// waiting while the approval is pending, and returns `executed` once the owner approves (with a passkey, on the owner
// API) or `cancelled` once the owner rejects; the agent's own credentials cannot approve. A verified webhook
// envelope of `operation.approval_requested` narrows to the SDK's event type.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { AgentClient, type EventEnvelope, type Operation } from '../../sdk/src/index.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { createSoftAuthenticator } from '../support/webauthn.js';

const PAYEE = '0x00000000000000000000000000000000000005d4';

describe('SDK: operations waiting for the owner’s approval (issue 27)', function () {
  this.timeout(60_000);
  let srv: LedgerServer;
  let client: AgentClient;
  let ownerAuth: Record<string, string>;
  let key: ReturnType<typeof createSoftAuthenticator>;
  let agentHeaders: Record<string, string>;

  before(async () => {
    srv = await startLedgerServer();
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email: `sdk-${randomUUID()}@example.com` })).owner_id;
    const agent = await srv.createAgent({ ownerId, policy: { operation_types: 'all', allowed_recipients: 'all', approval_threshold_usd: '100' }, fund: { USDC: '1000' } });
    agentHeaders = agent.headers;
    client = new AgentClient({ baseUrl: srv.baseUrl, agentId: agent.agentId, apiKey: agent.apiKey }, { maxRetries: 0 });
    const { token } = await srv.services.owner.createToken(srv.db, ownerId);
    ownerAuth = { authorization: `Bearer ${token}` };
    const base = new URL(srv.baseUrl);
    key = createSoftAuthenticator(base.hostname, base.origin);
    const opts = await owner('POST', '/v1/owner/passkeys/registration-options');
    expect((await owner('POST', '/v1/owner/passkeys', { name: 'sdk test', response: key.register(opts.body.options) })).status).to.equal(201);
  });
  after(async () => srv?.close());

  const owner = (method: string, path: string, body?: unknown) => srv.request(method, path, { headers: ownerAuth, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
  /** Settlement passes until `done` (the SDK's wait has returned). */
  const settleWhile = async (done: () => boolean) => {
    for (let i = 0; i < 200 && !done(); i++) {
      await srv.settle();
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  async function heldPayment(amount: string) {
    const created = await client.request('POST /v1/agent/payments', { to: PAYEE, asset: 'USDC', amount }, { idempotencyKey: randomUUID() });
    // Typed by the SDK: the write response carries the approval.
    const approval: { state: string; requested_at: string; expires_at: string } | undefined = created.approval;
    expect(approval?.state).to.equal('pending');
    expect(Date.parse(approval!.expires_at)).to.be.greaterThan(Date.parse(approval!.requested_at));
    return created.operation_id;
  }

  it('waitForOperation waits through a pending approval and returns executed once the owner approves with a passkey', async () => {
    const id = await heldPayment('300');
    let result: Operation | undefined;
    const waiting = client.waitForOperation(id, { timeoutMs: 30_000, intervalMs: 20, maxIntervalMs: 50 }).then((op) => (result = op));
    // Settlement passes run meanwhile: the pending approval keeps the payment accepted, and the SDK keeps waiting.
    for (let i = 0; i < 10; i++) {
      await srv.settle();
      await new Promise((r) => setTimeout(r, 30));
    }
    expect(result).to.equal(undefined);
    const pending = await client.request('GET /v1/agent/operations/{id}', { id });
    expect(pending.operation.status).to.equal('accepted');
    expect(pending.operation.approval?.state).to.equal('pending');

    // The agent's own credentials cannot approve: the owner API refuses them.
    const byAgent = await fetch(`${srv.baseUrl}/v1/owner/approvals/${id}/approve`, {
      method: 'POST',
      headers: { ...agentHeaders, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      body: '{}',
    });
    expect(byAgent.status).to.be.oneOf([401, 403]);

    const options = await owner('POST', '/v1/owner/passkeys/assertion-options', { purpose: 'approve', operation_id: id });
    const approved = await owner('POST', `/v1/owner/approvals/${id}/approve`, { assertion: key.assert(options.body.options) });
    expect(approved.status, approved.text).to.equal(200);
    await settleWhile(() => result !== undefined);
    await waiting;
    expect(result!.status).to.equal('executed');
    expect(result!.approval).to.include({ state: 'approved' });
  });

  it('waitForOperation returns cancelled, with the hold released, once the owner rejects', async () => {
    const before = await client.request('GET /v1/agent/balances', {});
    const id = await heldPayment('250');
    const waiting = client.waitForOperation(id, { timeoutMs: 30_000, intervalMs: 20, maxIntervalMs: 50 });
    expect((await owner('POST', `/v1/owner/approvals/${id}/reject`, {})).status).to.equal(200);
    const op = await waiting;
    expect(op.status).to.equal('cancelled');
    expect(op.approval).to.include({ state: 'rejected' });
    const after = await client.request('GET /v1/agent/balances', {});
    const usdc = (b: typeof before) => b.items.find((i) => i.asset_symbol === 'USDC');
    expect(usdc(after)).to.deep.include({ available: usdc(before)!.available, held: usdc(before)!.held });
  });

  it('lists the approval events through the SDK, typed as the v1.1 event types', async () => {
    const id = await heldPayment('150');
    expect((await owner('POST', `/v1/owner/approvals/${id}/reject`, {})).status).to.equal(200);
    const seen: EventEnvelope['type'][] = [];
    for await (const e of client.paginate('GET /v1/agent/events', {})) if (e.operation_id === id) seen.push(e.type);
    const requested: EventEnvelope['type'] = 'operation.approval_requested';
    const decided: EventEnvelope['type'] = 'operation.approval_decided';
    expect(seen).to.include.members([requested, decided]);
  });
});
