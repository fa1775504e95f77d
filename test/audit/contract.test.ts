// Audit A: the cross-cutting contract (contract §1-§7, §11) seen from the wire, one regression per discrepancy found.
import { expect } from 'chai';
import { createSealer } from '../../src/lib/crypto.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { mintAccessToken } from '../mcp/helpers.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { createTableResolver } from '../webhooks/hostile-urls.js';

const RATE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-window-seconds'];

describe('contract audit (area A)', function () {
  this.timeout(30_000);
  let server: TestServer;
  let agent: TestAgent;

  async function roomyAgent(): Promise<TestAgent> {
    const created = await server.createAgent();
    for (const cls of ['read', 'write', 'webhook_management', 'simulate'] as const) {
      await server.services.agents.setRateLimit(server.db, created.agentId, { class: cls, limit: 1000, burst: 1000, windowSeconds: 60 });
    }
    return created;
  }

  before(async () => {
    server = await startTestServer({ env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' } });
    // No test touches real DNS: the same service with a resolver table.
    (server.services as { webhooks: unknown }).webhooks = createWebhookService({
      clock: server.clock,
      sealer: createSealer(server.config.masterKey),
      allowLoopback: true,
      resolver: createTableResolver(),
    });
    agent = await roomyAgent();
  });
  after(() => server.close());

  const createWebhook = (who: TestAgent, eventTypes = ['payment.executed']) =>
    server.request('POST', '/v1/agent/webhooks', { agent: who, body: { url: 'https://hooks.example.com/events', event_types: eventTypes }, idempotencyKey: newKey() });

  describe('createWebhook', () => {
    it('answers 400 validation_failed naming the Idempotency-Key header when the key is missing', async () => {
      const res = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url: 'https://hooks.example.com/events', event_types: ['payment.executed'] } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.message).to.contain('Idempotency-Key');
      expect(res.body.error.details.errors).to.deep.include({ location: 'header', path: 'Idempotency-Key', message: 'is required' });
    });

    it('answers 400 validation_failed at the body root when a required JSON body is missing', async () => {
      const res = await server.request('POST', '/v1/agent/webhooks', { agent, idempotencyKey: newKey() });
      expect(res.status).to.equal(400);
      expect(res.body.error.details.errors).to.deep.include({ location: 'body', path: '/', message: 'a JSON request body is required' });
    });

    it('answers 429 rather than 400 when a rate-limited request also has a malformed body', async () => {
      const limited = await server.createAgent(); // default webhook_management burst: 5
      for (let i = 0; i < 5; i++) {
        const res = await server.request('POST', '/v1/agent/webhooks', { agent: limited, rawBody: '{bad', idempotencyKey: newKey() });
        expect(res.status).to.equal(400);
        for (const h of RATE_HEADERS) expect(res.headers.get(h), h).to.be.a('string');
      }
      const res = await server.request('POST', '/v1/agent/webhooks', { agent: limited, rawBody: '{bad', idempotencyKey: newKey() });
      expect(res.status).to.equal(429);
      expect(res.body.error.code).to.equal('rate_limited');
      expect(Number(res.headers.get('retry-after'))).to.be.at.least(1);
    });
  });

  describe('getSelf', () => {
    it('answers 401 authentication_failed with rate-limit headers when x-agent-id is malformed', async () => {
      const res = await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': 'not-a-uuid', 'x-api-key': 'agk_x' } });
      expect(res.status).to.equal(401);
      expect(res.body).to.deep.include({ ok: false });
      expect(res.body.error.code).to.equal('authentication_failed');
      for (const h of [...RATE_HEADERS, 'x-request-id']) expect(res.headers.get(h), h).to.be.a('string');
    });
  });

  describe('list cursors (contract §7)', () => {
    it('pages with its own cursor and refuses a cursor of another list with validation_failed', async () => {
      const assets = await server.request('GET', '/v1/agent/assets?limit=1', { agent });
      const protocols = await server.request('GET', '/v1/agent/protocols?limit=1', { agent });
      expect(assets.body.has_more).to.equal(true);
      expect(protocols.body.has_more).to.equal(true);
      const next = await server.request('GET', `/v1/agent/assets?limit=1&cursor=${assets.body.next_cursor}`, { agent });
      expect(next.status).to.equal(200);
      expect(next.body.items[0]).to.not.deep.equal(assets.body.items[0]);
      for (const [path, cursor] of [
        ['/v1/agent/assets', protocols.body.next_cursor],
        ['/v1/agent/protocols', assets.body.next_cursor],
        ['/v1/agent/balances', assets.body.next_cursor],
        ['/v1/agent/earn/opportunities', assets.body.next_cursor],
        ['/v1/agent/borrow/collateral', assets.body.next_cursor],
        ['/v1/agent/operations', assets.body.next_cursor],
        ['/v1/agent/webhooks', assets.body.next_cursor],
      ]) {
        const res = await server.request('GET', `${path}?cursor=${cursor}`, { agent });
        expect(res.status, path).to.equal(400);
        expect(res.body.error.code, path).to.equal('validation_failed');
      }
    });

    it('refuses the cursor of another agent with validation_failed', async () => {
      const other = await roomyAgent();
      const assets = await server.request('GET', '/v1/agent/assets?limit=1', { agent: other });
      const res = await server.request('GET', `/v1/agent/assets?cursor=${assets.body.next_cursor}`, { agent });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    });

    it('pages webhook endpoints newest first with exclusive cursors', async () => {
      const who = await roomyAgent();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push((await createWebhook(who)).body.webhook.id);
        await new Promise((resolve) => setTimeout(resolve, 5)); // distinct created_at
      }
      const first = await server.request('GET', '/v1/agent/webhooks?limit=2', { agent: who });
      expect(first.body.items.map((w: { id: string }) => w.id)).to.deep.equal([ids[2], ids[1]]);
      expect(first.body.has_more).to.equal(true);
      const second = await server.request('GET', `/v1/agent/webhooks?limit=2&cursor=${first.body.next_cursor}`, { agent: who });
      expect(second.body).to.deep.include({ has_more: false, next_cursor: null });
      expect(second.body.items.map((w: { id: string }) => w.id)).to.deep.equal([ids[0]]);
    });
  });

  describe('listWebhookDeliveries', () => {
    it('answers 400 validation_failed when the cursor does not satisfy the status filter', async () => {
      const who = await roomyAgent();
      const id = (await createWebhook(who)).body.webhook.id;
      for (let i = 0; i < 2; i++) expect((await server.request('POST', `/v1/agent/webhooks/${id}/test`, { agent: who, idempotencyKey: newKey() })).status).to.equal(200);
      const page = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?limit=1`, { agent: who });
      expect(page.body.has_more).to.equal(true);
      const cursor = page.body.next_cursor as string;
      expect(page.body.items[0].id).to.equal(cursor);
      const same = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?limit=1&status=pending&cursor=${cursor}`, { agent: who });
      expect(same.status).to.equal(200);
      expect(same.body.items).to.have.length(1);
      expect(same.body.items[0].id).to.not.equal(cursor);
      const other = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?status=delivered&cursor=${cursor}`, { agent: who });
      expect(other.status).to.equal(400);
      expect(other.body.error.code).to.equal('validation_failed');
    });

    it('answers 400 validation_failed for a delivery cursor of another endpoint', async () => {
      const who = await roomyAgent();
      const a = (await createWebhook(who)).body.webhook.id;
      const b = (await createWebhook(who)).body.webhook.id;
      await server.request('POST', `/v1/agent/webhooks/${a}/test`, { agent: who, idempotencyKey: newKey() });
      const page = await server.request('GET', `/v1/agent/webhooks/${a}/deliveries`, { agent: who });
      const res = await server.request('GET', `/v1/agent/webhooks/${b}/deliveries?cursor=${page.body.items[0].id}`, { agent: who });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    });
  });

  describe('updateWebhook and rotateWebhookSecret', () => {
    it('answer 403 owner_only_action for an endpoint disabled for sustained failures', async () => {
      const who = await roomyAgent();
      const id = (await createWebhook(who)).body.webhook.id;
      await server.db('webhook_endpoints').where({ id }).update({ enabled: false, disabled_reason: 'sustained_failures' });
      const patch = await server.request('PATCH', `/v1/agent/webhooks/${id}`, { agent: who, body: { enabled: true }, idempotencyKey: newKey() });
      expect(patch.status).to.equal(403);
      expect(patch.body.error.code).to.equal('owner_only_action');
      const rotate = await server.request('POST', `/v1/agent/webhooks/${id}/rotate-secret`, { agent: who, idempotencyKey: newKey() });
      expect(rotate.status).to.equal(403);
      expect(rotate.body.error.code).to.equal('owner_only_action');
    });
  });

  describe('OAuth scopes on webhook routes (contract §4)', () => {
    it('lets agent:webhooks:manage list and read endpoints but not deliveries, with the scope in WWW-Authenticate', async () => {
      const who = await roomyAgent();
      const id = (await createWebhook(who)).body.webhook.id;
      const token = await mintAccessToken(server, who, { scopes: ['agent:webhooks:manage'], resource: 'agent' });
      const headers = { authorization: `Bearer ${token}` };
      expect((await server.request('GET', '/v1/agent/webhooks', { headers })).status).to.equal(200);
      expect((await server.request('GET', `/v1/agent/webhooks/${id}`, { headers })).status).to.equal(200);
      const deliveries = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries`, { headers });
      expect(deliveries.status).to.equal(403);
      expect(deliveries.body.error.code).to.equal('insufficient_scope');
      expect(deliveries.headers.get('www-authenticate')).to.equal(
        `Bearer resource_metadata="${server.baseUrl}/.well-known/oauth-protected-resource/v1/agent", error="insufficient_scope", scope="agent:read"`,
      );
    });
  });
});
