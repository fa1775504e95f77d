// The eight webhook routes over HTTP, responses validated against the OpenAPI document by the test server.
import { expect } from 'chai';
import { commands } from '../../src/cli/index.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { createTableResolver } from './hostile-urls.js';

describe('webhooks over HTTP', function () {
  this.timeout(30_000);
  let server: TestServer;
  let agent: TestAgent;

  before(async () => {
    server = await startTestServer({ env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' } });
    // Same construction as the composition root, with a resolver table so no test touches real DNS.
    (server.services as { webhooks: unknown }).webhooks = createWebhookService({
      clock: server.clock,
      sealer: createSealer(server.config.masterKey),
      allowLoopback: server.config.unsafeAllowLoopbackTargets,
      resolver: createTableResolver(),
    });
    agent = await createAgent();
  });

  /** An agent whose webhook_management limit does not get in the way of these tests. */
  async function createAgent(): Promise<TestAgent> {
    const created = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, created.agentId, { class: 'webhook_management', limit: 1000, burst: 1000, windowSeconds: 60 });
    return created;
  }
  after(() => server.close());

  const create = (body: unknown, who = agent) => server.request('POST', '/v1/agent/webhooks', { agent: who, body, idempotencyKey: newKey() });

  describe('createWebhook', () => {
    it('answers 200 with the endpoint and a one-time secret', async () => {
      const res = await create({ url: 'https://hooks.example.com/events', event_types: ['payment.executed'], description: 'main' });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.signing_secret).to.match(/^whsec_/);
      expect(res.body.webhook).to.include({ enabled: true, disabled_reason: null, consecutive_failures: 0, description: 'main' });
    });

    it('answers 400 validation_failed for hostile URLs and reserved event types', async () => {
      for (const url of ['http://hooks.example.com/x', 'https://10.0.0.1/x', 'https://localhost/x', 'https://127.0.0.1.nip.io/x', 'https://user:pw@hooks.example.com/x']) {
        const res = await create({ url, event_types: ['payment.executed'] });
        expect(res.status, url).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
      }
      const reserved = await create({ url: 'https://hooks.example.com/x', event_types: ['payment.submitted'] });
      expect(reserved.status).to.equal(400);
    });

    it('answers 403 limit_exceeded for the 11th endpoint', async () => {
      const other = await createAgent();
      for (let i = 0; i < 10; i++) expect((await create({ url: 'https://hooks.example.com/x', event_types: ['payment.executed'] }, other)).status).to.equal(200);
      const res = await create({ url: 'https://hooks.example.com/x', event_types: ['payment.executed'] }, other);
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
    });
  });

  describe('the other routes', () => {
    it('list, get (with recent deliveries), patch, test, deliveries, rotate and delete', async () => {
      const who = await createAgent();
      const created = await create({ url: 'https://hooks.example.com/a', event_types: ['payment.executed'] }, who);
      const id = created.body.webhook.id as string;

      const list = await server.request('GET', '/v1/agent/webhooks?limit=1', { agent: who });
      expect(list.status).to.equal(200);
      expect(list.body).to.include({ has_more: false, next_cursor: null });
      expect(list.body.items.map((w: { id: string }) => w.id)).to.deep.equal([id]);

      const test = await server.request('POST', `/v1/agent/webhooks/${id}/test`, { agent: who, idempotencyKey: newKey() });
      expect(test.status).to.equal(200);
      const eventId = test.body.event_id as string;

      const got = await server.request('GET', `/v1/agent/webhooks/${id}?include=recent_deliveries`, { agent: who });
      expect(got.status, JSON.stringify(got.body)).to.equal(200);
      expect(got.body.webhook.recent_deliveries.map((d: { event_id: string }) => d.event_id)).to.deep.equal([eventId]);

      const deliveries = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?status=pending&event_id=${eventId}&limit=10`, { agent: who });
      expect(deliveries.status, JSON.stringify(deliveries.body)).to.equal(200);
      expect(deliveries.body.items).to.have.length(1);
      expect(deliveries.body.items[0]).to.include({ event_type: 'webhook.test', status: 'pending', attempt: 0 });
      const badCursor = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?cursor=${id}`, { agent: who });
      expect(badCursor.status).to.equal(400);
      const badLimit = await server.request('GET', `/v1/agent/webhooks/${id}/deliveries?limit=0`, { agent: who });
      expect(badLimit.status).to.equal(400);

      const empty = await server.request('PATCH', `/v1/agent/webhooks/${id}`, { agent: who, body: {}, idempotencyKey: newKey() });
      expect(empty.status).to.equal(400);
      const disabled = await server.request('PATCH', `/v1/agent/webhooks/${id}`, { agent: who, body: { enabled: false }, idempotencyKey: newKey() });
      expect(disabled.status).to.equal(200);
      expect(disabled.body.webhook).to.include({ enabled: false, disabled_reason: null });

      await server.db('webhook_endpoints').where({ id }).update({ enabled: false, disabled_reason: 'sustained_failures' });
      const reenable = await server.request('PATCH', `/v1/agent/webhooks/${id}`, { agent: who, body: { enabled: true }, idempotencyKey: newKey() });
      expect(reenable.status).to.equal(403);
      expect(reenable.body.error.code).to.equal('owner_only_action');
      const rotateRefused = await server.request('POST', `/v1/agent/webhooks/${id}/rotate-secret`, { agent: who, idempotencyKey: newKey() });
      expect(rotateRefused.status).to.equal(403);
      expect(rotateRefused.body.error.code).to.equal('owner_only_action');

      // The owner's re-enable goes through agentctl.
      const enable = commands.find((c) => c.name === 'webhook enable')!;
      const out = await enable.run({ db: server.db, services: server.services, config: server.config, clock: server.clock }, { positional: [id], flags: {} });
      expect(out.webhook).to.include({ enabled: true, disabled_reason: null, consecutive_failures: 0 });

      const rotated = await server.request('POST', `/v1/agent/webhooks/${id}/rotate-secret`, { agent: who, idempotencyKey: newKey() });
      expect(rotated.status).to.equal(200);
      expect(rotated.body.signing_secret).to.not.equal(created.body.signing_secret);

      const stranger = await createAgent();
      expect((await server.request('GET', `/v1/agent/webhooks/${id}`, { agent: stranger })).status).to.equal(404);
      const deleted = await server.request('DELETE', `/v1/agent/webhooks/${id}`, { agent: who, idempotencyKey: newKey() });
      expect(deleted.status).to.equal(200);
      expect(deleted.body).to.deep.equal({ ok: true });
      expect((await server.request('GET', `/v1/agent/webhooks/${id}`, { agent: who })).status).to.equal(404);
      expect((await server.request('GET', `/v1/agent/webhooks/${id}/deliveries`, { agent: who })).status).to.equal(404);
    });
  });
});
