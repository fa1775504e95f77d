// Every delivery attempt keeps its outcome (issue 30 item 1): manual retries and the owner's recovery queue a
// delivery again without erasing it, `attempt` counts on, and GET .../deliveries/{delivery_id}/attempts reads
// each attempt's time, status, error class, latency and captured body.
import { expect } from 'chai';
import type { ServerResponse } from 'node:http';
import { createWebhookTestContext, type WebhookTestContext } from './helpers/context.js';
import { createTestPki, startReceiver, type Receiver, type ReceivedRequest } from './helpers/receiver.js';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

describe('listWebhookDeliveryAttempts', function () {
  this.timeout(60_000);
  let ctx: WebhookTestContext;
  let receiver: Receiver;
  let server: TestServer;
  const answers = new Map<string, Array<[number, string]>>();

  before(async () => {
    const pki = await createTestPki();
    receiver = await startReceiver(pki);
    // Each path answers its queued (status, body) pairs in turn, then 200 "ok".
    receiver.handle((req: ReceivedRequest, res: ServerResponse) => {
      const [status, body] = answers.get(req.path)?.shift() ?? [200, 'ok'];
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(body);
    });
    ctx = await createWebhookTestContext(pki.ca);
    server = await startTestServer({ clock: ctx.clock });
  });
  after(async () => {
    await receiver.close();
    await ctx.close();
    await server.close();
  });

  async function subscribed(path: string, queued: Array<[number, string]>): Promise<{ agent: TestAgent; webhookId: string }> {
    const agent = await server.createAgent({ name: 'attempts' });
    answers.set(path, queued);
    const { webhook } = await ctx.service.create(ctx.db, agent, { url: receiver.url(path), event_types: ['payment.executed'] });
    return { agent, webhookId: webhook.id };
  }
  const attemptsOver = (agent: TestAgent, webhookId: string, deliveryId: string, query = '') =>
    server.request('GET', `/v1/agent/webhooks/${webhookId}/deliveries/${deliveryId}/attempts${query}`, { agent });

  it('keeps three attempts with their outcomes after two manual retries, attempt counting on', async () => {
    const { agent, webhookId } = await subscribed('/retried', [
      [500, 'first: server error'],
      [404, 'second: gone'],
    ]);
    await ctx.emit(agent);
    await ctx.worker().runOnce();
    const [first] = await ctx.deliveriesOf(webhookId);
    expect(first).to.include({ status: 'retrying', attempt: 1, http_status: 500, error_class: 'http_5xx' });

    ctx.clock.advance(1_000);
    const retried = await server.request('POST', `/v1/agent/webhooks/${webhookId}/deliveries/${first!.id}/retry`, { agent, idempotencyKey: crypto.randomUUID() });
    expect(retried.status, retried.text).to.equal(200);
    // Queued again, the record still tells of the attempt made: its count, its first time and its outcome.
    expect(retried.body.delivery).to.include({ status: 'pending', attempt: 1, http_status: 500, error_class: 'http_5xx', response_body: 'first: server error' });
    expect(retried.body.delivery.first_attempt_at).to.equal(first!.first_attempt_at!.toISOString());
    await ctx.worker().runOnce();

    ctx.clock.advance(1_000);
    expect((await server.request('POST', `/v1/agent/webhooks/${webhookId}/deliveries/${first!.id}/retry`, { agent, idempotencyKey: crypto.randomUUID() })).status).to.equal(200);
    await ctx.worker().runOnce();

    const [row] = await ctx.deliveriesOf(webhookId);
    expect(row).to.include({ status: 'delivered', attempt: 3, http_status: 200, error_class: null, response_body: 'ok' });
    expect(row!.first_attempt_at!.toISOString()).to.equal(first!.first_attempt_at!.toISOString());

    const page = await attemptsOver(agent, webhookId, row!.id);
    expect(page.status, page.text).to.equal(200);
    expect(page.body).to.include({ ok: true, delivery_id: row!.id, has_more: false, next_cursor: null });
    const outcomes = page.body.items.map((a: Record<string, unknown>) => [a.attempt, a.outcome, a.http_status, a.error_class, a.response_body, a.lease_expired]);
    expect(outcomes).to.deep.equal([
      [3, 'delivered', 200, null, 'ok', false],
      [2, 'failed', 404, 'http_4xx', 'second: gone', false],
      [1, 'retrying', 500, 'http_5xx', 'first: server error', false],
    ]);
    for (const a of page.body.items) {
      expect(a.latency_ms).to.be.a('number').and.at.least(0);
      expect(Date.parse(a.attempted_at)).to.be.at.most(Date.parse(a.finished_at));
    }
    // Distinct times: each attempt was made after the retry that asked for it.
    expect(new Set(page.body.items.map((a: { attempted_at: string }) => a.attempted_at)).size).to.equal(3);

    const firstPage = await attemptsOver(agent, webhookId, row!.id, '?limit=2');
    expect(firstPage.body.items.map((a: { attempt: number }) => a.attempt)).to.deep.equal([3, 2]);
    expect(firstPage.body).to.include({ has_more: true, next_cursor: '2' });
    const rest = await attemptsOver(agent, webhookId, row!.id, '?limit=2&cursor=2');
    expect(rest.body.items.map((a: { attempt: number }) => a.attempt)).to.deep.equal([1]);
    expect(rest.body.has_more).to.equal(false);
  });

  it("keeps the attempts of a delivery the owner's recovery queued again", async () => {
    const { agent, webhookId } = await subscribed('/recovered', [[410, 'gone for now']]);
    const since = ctx.clock.now();
    await ctx.emit(agent);
    await ctx.worker().runOnce();
    const [failed] = await ctx.deliveriesOf(webhookId);
    expect(failed).to.include({ status: 'failed', attempt: 1, http_status: 410 });
    ctx.clock.advance(1_000);
    expect(await ctx.service.recover(ctx.db, webhookId, since)).to.deep.equal({ webhook_id: webhookId, requeued: 1 });
    const [requeued] = await ctx.deliveriesOf(webhookId);
    expect(requeued).to.include({ status: 'pending', attempt: 1, http_status: 410, response_body: 'gone for now' });
    await ctx.worker().runOnce();
    const page = await attemptsOver(agent, webhookId, failed!.id);
    expect(page.body.items.map((a: Record<string, unknown>) => [a.attempt, a.outcome, a.http_status, a.response_body])).to.deep.equal([
      [2, 'delivered', 200, 'ok'],
      [1, 'failed', 410, 'gone for now'],
    ]);
  });

  it('records an attempt whose lease expired without an outcome, not as a copy of the one before', async () => {
    const { agent, webhookId } = await subscribed('/expired', [[503, 'busy']]);
    await ctx.emit(agent);
    await ctx.worker().runOnce();
    const [row] = await ctx.deliveriesOf(webhookId);
    // A worker claims attempt 2 and dies: its lease lapses with the row in flight.
    await ctx
      .db('webhook_deliveries')
      .where({ id: row!.id })
      .update({ status: 'in_flight', attempt: 2, claim_token: crypto.randomUUID(), lease_until: new Date(ctx.clock.now().getTime() - 1), last_attempt_at: ctx.clock.now() });
    ctx.clock.advance(60_000);
    await ctx.worker().runOnce();
    const page = await attemptsOver(agent, webhookId, row!.id);
    expect(page.body.items.map((a: Record<string, unknown>) => [a.attempt, a.outcome, a.http_status, a.response_body, a.lease_expired])).to.deep.equal([
      [3, 'delivered', 200, 'ok', false],
      [2, 'retrying', null, null, true],
      [1, 'retrying', 503, 'busy', false],
    ]);
  });

  it("answers 404 for another endpoint's delivery and 400 for a bad cursor", async () => {
    const { agent, webhookId } = await subscribed('/foreign', []);
    await ctx.emit(agent);
    const [row] = await ctx.deliveriesOf(webhookId);
    const other = await subscribed('/foreign-2', []);
    expect((await attemptsOver(other.agent, other.webhookId, row!.id)).status).to.equal(404);
    expect((await attemptsOver(agent, webhookId, crypto.randomUUID())).status).to.equal(404);
    expect((await attemptsOver(agent, webhookId, row!.id, '?cursor=abc')).status).to.equal(400);
    const none = await attemptsOver(agent, webhookId, row!.id);
    expect(none.body).to.deep.include({ items: [], has_more: false, next_cursor: null });
  });
});
