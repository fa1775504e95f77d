// The owner API (/v1/owner) and the operator API (/v1/admin): authentication, contract checks
// (envelope, request id, validation, rate-limit headers, idempotency), audit log, and the
// cross-owner rule: every route addressed by an id answers 404 for another owner's resource.
import { expect } from 'chai';
import { createFakeClock } from '../../src/lib/clock.js';
import { randomUUID } from 'node:crypto';
import { startTestServer, type TestServer, type TestResponse } from '../helpers/server.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('owner API', function () {
  this.timeout(60_000);
  let srv: TestServer;
  const admin = { authorization: `Bearer ${ADMIN}` };

  // The wall clock, moved a window ahead by each newOwner(): every test makes its owners through the admin token, whose
  // write budget (burst 20) a fast run used up (a loaded make check once answered newOwner 429). Time still runs.
  let ahead = 0;
  const clock = { now: () => new Date(Date.now() + ahead) };
  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN, UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' }, clock });
  });
  after(async () => srv.close());

  const call = (method: string, path: string, auth: Record<string, string>, body?: unknown): Promise<TestResponse> =>
    srv.request(method, path, { headers: auth, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });

  async function newOwner() {
    ahead += 61_000;
    const owner = await call('POST', '/v1/admin/owners', admin, { email: `o-${randomUUID()}@example.com` });
    expect(owner.status, owner.text).to.equal(201);
    const token = await call('POST', `/v1/admin/owners/${owner.body.owner_id}/tokens`, admin, {});
    expect(token.status, token.text).to.equal(201);
    expect(token.body.owner_id).to.equal(owner.body.owner_id);
    expect(token.body.token).to.match(/^owt_/);
    return { ownerId: owner.body.owner_id as string, auth: { authorization: `Bearer ${token.body.token}` } };
  }

  describe('ownerCreateAgent', () => {
    it('creates, funds and sets the policy of an agent that the agent API then sees', async () => {
      const { auth } = await newOwner();
      const created = await call('POST', '/v1/owner/agents', auth, { name: 'bot' });
      expect(created.status, created.text).to.equal(201);
      expect(created.body).to.include.keys('agent_id', 'wallet_id', 'api_key');
      const agentHeaders = { 'x-agent-id': created.body.agent_id, 'x-api-key': created.body.api_key };
      const funded = await call('POST', `/v1/owner/agents/${created.body.agent_id}/fund`, auth, { asset: 'USDC', amount: '100' });
      expect(funded.status, funded.text).to.equal(200);
      const policy = await call('PUT', `/v1/owner/agents/${created.body.agent_id}/policy`, auth, { operation_types: ['payment'], per_tx_usd: '50' });
      expect(policy.status, policy.text).to.equal(200);
      expect(policy.body.policy.per_tx_usd).to.equal('50');
      const balances = await srv.request('GET', '/v1/agent/balances', { headers: agentHeaders });
      const usdc = balances.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC');
      expect(usdc.available).to.equal('100');
      const listed = await call('GET', '/v1/owner/agents', auth);
      expect(listed.status).to.equal(200);
      expect(listed.body.items).to.have.length(1);
      expect(listed.body.items[0].balances).to.deep.equal([{ asset: 'USDC', amount: '100' }]);
    });

    it('carries the envelope, request id and rate-limit headers, and replays a repeated key', async () => {
      const { auth } = await newOwner();
      const key = randomUUID();
      const first = await srv.request('POST', '/v1/owner/agents', { headers: { ...auth, 'x-request-id': 'req-owner-1' }, body: { name: 'a' }, idempotencyKey: key });
      expect(first.status).to.equal(201);
      expect(first.headers.get('x-request-id')).to.equal('req-owner-1');
      expect(first.headers.get('x-ratelimit-limit')).to.equal('60');
      const again = await srv.request('POST', '/v1/owner/agents', { headers: auth, body: { name: 'a' }, idempotencyKey: key });
      expect(again.status).to.equal(201);
      expect(again.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(again.body.agent_id).to.equal(first.body.agent_id);
      const mismatch = await srv.request('POST', '/v1/owner/agents', { headers: auth, body: { name: 'b' }, idempotencyKey: key });
      expect(mismatch.status).to.equal(409);
      expect(mismatch.body.error.code).to.equal('idempotency_key_reuse_mismatch');
      const noKey = await srv.request('POST', '/v1/owner/agents', { headers: auth, body: { name: 'c' } });
      expect(noKey.status).to.equal(400);
      expect(noKey.body.error.details.errors[0].path).to.equal('Idempotency-Key');
      const invalid = await call('POST', '/v1/owner/agents', auth, { name: '', extra: 1 });
      expect(invalid.status).to.equal(400);
      expect(invalid.body).to.deep.include({ ok: false });
      expect(invalid.headers.get('x-ratelimit-remaining')).to.match(/^\d+$/);
    });

    it('is rate limited per owner with 429 and Retry-After', async () => {
      const { auth } = await newOwner();
      // The write class is 60 per minute, burst 20: 30 writes at once cannot all pass.
      const answers = await Promise.all(Array.from({ length: 30 }, () => call('PUT', `/v1/owner/agents/${randomUUID()}/window`, auth, {})));
      const refused = answers.filter((r) => r.status === 429);
      expect(answers.filter((r) => r.status === 404).length).to.be.within(20, 29);
      expect(refused.length).to.be.at.least(1);
      expect(refused[0]!.body.error.code).to.equal('rate_limited');
      expect(refused[0]!.body.error.details.limit_count).to.equal(60);
      expect(Number(refused[0]!.headers.get('retry-after'))).to.be.at.least(1);
    });
  });

  describe('authentication', () => {
    it('refuses a missing or unknown token with 401 authentication_failed', async () => {
      const none = await srv.request('GET', '/v1/owner/agents');
      expect(none.status).to.equal(401);
      expect(none.body.error.code).to.equal('authentication_failed');
      const unknown = await srv.request('GET', '/v1/owner/agents', { headers: { authorization: 'Bearer owt_nope' } });
      expect(unknown.status).to.equal(401);
    });

    it('refuses an owner token on /v1/admin with 403', async () => {
      const { auth } = await newOwner();
      const res = await call('POST', '/v1/admin/owners', auth, { email: 'x@example.com' });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('insufficient_scope');
    });

    it('does not take an agent key on /v1/owner, nor an owner token on /v1/agent', async () => {
      const agent = await srv.createAgent();
      const asAgent = await srv.request('GET', '/v1/owner/agents', { agent });
      expect(asAgent.status).to.equal(401);
      const { auth } = await newOwner();
      const asOwner = await srv.request('GET', '/v1/agent/self', { headers: auth });
      expect(asOwner.status).to.equal(401);
    });
  });

  describe('ownerListAudit', () => {
    it('records who, what, when and from where, for the owner and for the operator', async () => {
      const { ownerId, auth } = await newOwner();
      const created = await call('POST', '/v1/owner/agents', auth, { name: 'audited' });
      await call('POST', `/v1/owner/agents/${created.body.agent_id}/disable`, admin);
      const audit = await call('GET', '/v1/owner/audit', auth);
      expect(audit.status, audit.text).to.equal(200);
      const actions = audit.body.items.map((e: { action: string; actor: string }) => `${e.actor}:${e.action}`);
      expect(actions).to.deep.equal(['admin:ownerDisableAgent', 'owner:ownerCreateAgent', 'admin:adminCreateOwnerToken', 'admin:adminCreateOwner']);
      expect(audit.body.items[1].client_address).to.match(/127\.0\.0\.1/);
      expect(audit.body.items[1].target_id).to.equal(created.body.agent_id);
      expect(audit.body.items.every((e: { owner_id: string }) => e.owner_id === ownerId)).to.equal(true);
    });
  });

  describe('cross-owner isolation', () => {
    it("answers 404 on every /v1/owner route given another owner's ids", async () => {
      const a = await newOwner();
      const b = await newOwner();
      const bAgent = await call('POST', '/v1/owner/agents', b.auth, { name: 'b-bot' });
      const agentId = bAgent.body.agent_id as string;
      const agentHeaders = { 'x-agent-id': agentId, 'x-api-key': bAgent.body.api_key as string };
      await call('PUT', `/v1/owner/agents/${agentId}/policy`, b.auth, { allow: 'all' });
      await call('POST', `/v1/owner/agents/${agentId}/fund`, b.auth, { asset: 'USDC', amount: '100' });
      const dest = await call('POST', `/v1/owner/agents/${agentId}/trusted-destinations`, b.auth, { kind: 'crypto', address: '0x2222222222222222222222222222222222222222', label: 'cold' });
      expect(dest.status, dest.text).to.equal(201);
      const hook = await srv.request('POST', '/v1/agent/webhooks', {
        headers: agentHeaders,
        body: { url: 'https://127.0.0.1:9/hook', event_types: ['payment.executed'] },
        idempotencyKey: randomUUID(),
      });
      expect(hook.status, hook.text).to.equal(200);
      const oneOff = await srv.request('POST', '/v1/agent/one-off-payments', {
        headers: agentHeaders,
        body: { to: '0x3333333333333333333333333333333333333333', asset: 'USDC', amount: '1' },
        idempotencyKey: randomUUID(),
      });
      expect(oneOff.status, oneOff.text).to.equal(200);
      const grantId = `grant-${randomUUID()}`;
      await srv.services.oauth.bindGrant(srv.db, { grantId, clientId: 'client-x', ownerId: b.ownerId, agentId, resource: `${srv.baseUrl}/v1/agent`, scopes: ['agent:read'] });

      const idFor: Record<string, string> = {
        agent_id: agentId,
        grant_id: grantId,
        class: 'write',
        // Issue 27: another owner's operation is no approval of this one's.
        operation_id: oneOff.body.operation_id,
      };
      const idByPrefix: [string, string][] = [
        ['/v1/owner/trusted-destinations/', dest.body.destination_id],
        ['/v1/owner/webhooks/', hook.body.webhook.id],
        ['/v1/owner/one-off-payments/', oneOff.body.operation_id],
      ];
      const bodies: Record<string, unknown> = {
        ownerSetAgentWindow: {},
        ownerSetRateLimit: { limit: 10, burst: 5 },
        ownerReplacePolicy: { operation_types: 'all' },
        ownerValidatePolicy: { operation_types: 'all' },
        ownerFundWallet: { asset: 'USDC', amount: '1' },
        ownerAddRecipient: { kind: 'recurring', name: 'n', address: '0x4444444444444444444444444444444444444444' },
        ownerAddRecurringPayment: { recipient_id: randomUUID(), asset: 'USDC', amount: '1', interval: 'day' },
        ownerAddWithdrawalMethod: { kind: 'bank', label: 'l' },
        ownerAddTrustedDestination: { kind: 'crypto', address: '0x5555555555555555555555555555555555555555', label: 'l' },
        ownerRecoverWebhook: { since: '2020-01-01T00:00:00.000Z' },
        ownerApproveOperation: { assertion: { id: 'x', rawId: 'x', type: 'public-key', response: {} } },
        ownerReplayPolicy: { policy: { operation_types: 'all' }, since: new Date(Date.now() - 86_400_000).toISOString() },
        ownerSetShadowPolicy: { operation_types: 'all' },
        ownerSetAccountOwner: { passkey_id: randomUUID() },
      };
      const routes = srv.built.router.ops.filter((op) => op.path.startsWith('/v1/owner/') && op.path.includes('{'));
      expect(routes.length).to.be.greaterThan(20);
      const checked: string[] = [];
      // Other owners than b, in turn, so no caller exhausts its write budget (burst 20) over the 40-odd routes.
      const others = [a, await newOwner(), await newOwner()];
      for (const [i, op] of routes.entries()) {
        const prefix = idByPrefix.find(([p]) => op.path.startsWith(p));
        const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (name === 'id' ? prefix![1] : idFor[name]!));
        const res = await call(op.method.toUpperCase(), path, others[i % others.length]!.auth, op.method === 'get' || op.method === 'delete' ? undefined : (bodies[op.operationId] ?? {}));
        expect(res.status, `${op.operationId} ${path}: ${res.text}`).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
        checked.push(op.operationId);
      }
      // The owner's own token reaches the same resources (the 404s above are about ownership).
      expect((await call('GET', `/v1/owner/agents/${agentId}`, b.auth)).status).to.equal(200);
      expect((await call('GET', `/v1/owner/webhooks/${hook.body.webhook.id}/deliveries`, b.auth)).status).to.equal(200);
      const recipient = await call('POST', `/v1/owner/agents/${agentId}/recipients`, b.auth, { kind: 'recurring', name: 'rent', address: '0x6666666666666666666666666666666666666666' });
      expect(recipient.status, recipient.text).to.equal(201);
      const recipients = await call('GET', `/v1/owner/agents/${agentId}/recipients`, b.auth);
      expect(recipients.body.items.map((r: { id: string }) => r.id)).to.deep.equal([recipient.body.recipient_id]);
      expect((await call('GET', `/v1/owner/agents/${agentId}/recurring-payments`, b.auth)).status).to.equal(200);
      expect((await call('GET', `/v1/owner/agents/${agentId}/withdrawal-methods`, b.auth)).status).to.equal(200);
      const grants = await call('GET', '/v1/owner/connected-apps', a.auth);
      expect(grants.body.items).to.deep.equal([]);
      const bAgents = await call('GET', '/v1/owner/agents', a.auth);
      expect(bAgents.body.items).to.deep.equal([]);
      expect((await call('GET', '/v1/owner/webhooks', a.auth)).body.items).to.deep.equal([]);
      expect((await call('GET', '/v1/owner/webhooks', b.auth)).body.items.map((w: { id: string }) => w.id)).to.deep.equal([hook.body.webhook.id]);
      expect(checked).to.include.members([
        'ownerListRecipients',
        'ownerListWithdrawalMethods',
        'ownerGetAgent',
        'ownerConfirmTrustedDestination',
        'ownerEnableWebhook',
        'ownerRevokeConnectedApp',
        'ownerCancelOneOffPayment',
      ]);
    });
  });
});

describe('admin API without a token', function () {
  this.timeout(60_000);
  it('answers 404 on /v1/admin when no admin token is configured', async () => {
    const srv = await startTestServer();
    try {
      const res = await srv.request('POST', '/v1/admin/owners', { headers: { authorization: 'Bearer anything-at-all' }, body: { email: 'x@example.com' }, idempotencyKey: 'k' });
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    } finally {
      await srv.close();
    }
  });
});

describe('every /v1/owner and /v1/admin operation', function () {
  this.timeout(120_000);
  let srv: TestServer;
  const clock = createFakeClock();
  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN }, clock });
  });
  after(async () => srv?.close());

  const sample: Record<string, string> = { class: 'write', asset: 'USDC', address: '0x8888888888888888888888888888888888888888' };
  const pathOf = (template: string) => template.replace(/\{([^}]+)\}/g, (_m, name: string) => sample[name] ?? randomUUID());

  it('answers 401 in the envelope, with X-Request-Id and rate-limit headers, without credentials', async () => {
    // The public documents (/v1/owner/openapi.json, /v1/admin/openapi.json) take none: test/docs/documents.test.ts.
    const ops = srv.built.router.ops.filter((op) => /^\/v1\/(owner|admin)\//.test(op.path) && !op.isPublic);
    expect(
      srv.built.router.ops
        .filter((op) => /^\/v1\/(owner|admin)\//.test(op.path) && op.isPublic)
        .map((op) => op.operationId)
        .sort(),
    ).to.deep.equal(['getAdminOpenApi', 'getOwnerOpenApi']);
    for (const [i, op] of ops.entries()) {
      // More operations than one window of the unauthenticated budget (60 a minute): the next window every 50.
      if (i > 0 && i % 50 === 0) clock.advance(61_000);
      const res = await srv.request(op.method.toUpperCase(), pathOf(op.path), { body: op.method === 'get' || op.method === 'delete' ? undefined : {} });
      expect(res.status, `${op.operationId}: ${res.text}`).to.equal(401);
      expect(res.body).to.deep.include({ ok: false });
      expect(res.body.error.code).to.equal('authentication_failed');
      expect(res.headers.get('x-request-id'), op.operationId).to.match(/^[0-9a-f-]{36}$/);
      expect(res.headers.get('x-ratelimit-limit'), op.operationId).to.equal('60');
    }
  });

  it('requires the Idempotency-Key header on every write, naming it, before anything happens', async () => {
    const writes = srv.built.router.ops.filter((op) => /^\/v1\/(owner|admin)\//.test(op.path) && op.method !== 'get');
    // The POSTs that write nothing (validate, replay: issue 28) take no key.
    expect(
      writes
        .filter((op) => op.idempotency !== 'required')
        .map((op) => op.operationId)
        .sort(),
    ).to.deep.equal(['ownerReplayPolicy', 'ownerValidatePolicy']);
    // Spread over several owners so no caller exhausts its write budget (burst 20).
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) {
      const owner = await srv.request('POST', '/v1/admin/owners', {
        headers: { authorization: `Bearer ${ADMIN}` },
        body: { email: `sweep-${randomUUID()}@example.com` },
        idempotencyKey: randomUUID(),
      });
      const token = await srv.request('POST', `/v1/admin/owners/${owner.body.owner_id}/tokens`, { headers: { authorization: `Bearer ${ADMIN}` }, body: {}, idempotencyKey: randomUUID() });
      tokens.push(token.body.token as string);
    }
    let n = 0;
    for (const op of writes.filter((w) => w.idempotency === 'required')) {
      const token = op.scope === 'admin' ? ADMIN : tokens[n++ % tokens.length]!;
      const res = await srv.request(op.method.toUpperCase(), pathOf(op.path), { headers: { authorization: `Bearer ${token}` }, body: op.method === 'delete' ? undefined : {} });
      expect(res.status, `${op.operationId}: ${res.text}`).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(
        res.body.error.details.errors.map((e: { path: string }) => e.path),
        op.operationId,
      ).to.include('Idempotency-Key');
      expect(res.headers.get('x-ratelimit-remaining'), op.operationId).to.match(/^\d+$/);
    }
    expect(n).to.be.at.least(20);
  });
});
