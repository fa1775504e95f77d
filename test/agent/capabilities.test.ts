import { expect } from 'chai';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

describe('getCapabilities', () => {
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer();
    agent = await server.createAgent();
  });
  after(() => server.close());

  for (const path of ['/v1/agent/capabilities', '/v1/agent/capabilities.json']) {
    it(`describes every endpoint, class, scope and event type at ${path}`, async () => {
      const res = await server.request('GET', path, { agent });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.ok).to.equal(true);
      // 67 + listEvents, getEvent, retryWebhookDelivery (event recovery); /v1/owner and /v1/admin are not the agent's.
      expect(res.body.endpoints).to.have.length(71);
      const byId = new Map((res.body.endpoints as { operation_id: string }[]).map((e) => [e.operation_id, e]));
      expect(byId.get('createPayment')).to.deep.include({ method: 'POST', path: '/v1/agent/payments', rate_class: 'write', idempotency: 'required', scope: 'agent:payments:write' });
      expect(byId.get('getOpenApi')).to.deep.include({ scope: 'none', rate_class: 'read' });
      expect(byId.get('listWebhookDeliveries')).to.deep.include({ rate_class: 'read', scope: 'agent:read' });
      expect(res.body.rate_classes.webhook_management).to.deep.equal({ limit: 10, burst: 5, window_seconds: 60 });
      expect(res.body.scopes).to.have.length(9);
      expect(res.body.scopes.find((s: { scope: string }) => s.scope === 'agent:read').description)
        .to.be.a('string')
        .and.not.equal('agent:read');
      expect(res.body.event_types.subscribable).to.include('trusted_destination.confirmed');
      expect(res.body.event_types.subscribable).not.to.include('payment.submitted');
      expect(res.body.event_types.reserved).to.include('payment.submitted');
      expect(res.body.operation_types).to.include('x402.purchase');
    });
  }

  it("shows the caller's effective rate limits, overrides included", async () => {
    const tuned = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, tuned.agentId, { class: 'write', limit: 7, burst: 3, windowSeconds: 30 });
    const res = await server.request('GET', '/v1/agent/capabilities', { agent: tuned });
    expect(res.body.rate_classes.write).to.deep.equal({ limit: 7, burst: 3, window_seconds: 30 });
    expect(res.body.rate_classes.read).to.deep.equal({ limit: 600, burst: 100, window_seconds: 60 });
  });

  it('answers the limits and usage of the caller at /self/limits', async () => {
    const res = await server.request('GET', '/v1/agent/self/limits', { agent });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.ok).to.equal(true);
    expect(res.body.usage).to.have.property('period_usd');
  });
});
