// Event recovery end to end: an endpoint disabled for sustained_failures with 30 failed events
// (exhausted, failed at the disable, or skipped while disabled) is re-enabled and recovered by its
// owner through /v1/owner, and a receiver now answering 200 gets all 30 once, in their original
// order. Then the agent's side: /v1/agent/events and one delivery retried.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createLogger } from '../../src/lib/logger.js';
import { createDeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_MASTER_KEY, waitUntil } from '../webhooks/helpers/context.js';
import { createTestPki, startReceiver, type Receiver } from '../webhooks/helpers/receiver.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('ownerRecoverWebhook', function () {
  this.timeout(120_000);
  let srv: TestServer;
  let receiver: Receiver;
  let failing = true;
  let ca: string;
  const clock = createFakeClock('2026-05-01T00:00:00.000Z');
  const admin = { authorization: `Bearer ${ADMIN}` };

  before(async () => {
    const pki = await createTestPki();
    ca = pki.ca;
    receiver = await startReceiver(pki);
    receiver.handle((_req, res) => {
      res.writeHead(failing ? 503 : 200);
      res.end(failing ? 'down' : 'ok');
    });
    srv = await startTestServer({ clock, env: { ADMIN_TOKEN: ADMIN, UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' } });
  });
  after(async () => {
    await srv?.close();
    await receiver?.close();
  });

  const worker = () =>
    createDeliveryWorker({
      db: srv.db,
      clock,
      log: createLogger('silent'),
      sealer: createSealer(TEST_MASTER_KEY),
      leaseMs: 30_000,
      attemptTimeoutMs: 2_000,
      allowLoopback: true,
      ca,
      idleMs: 10,
      random: () => 0.5,
    });
  const write = (path: string, headers: Record<string, string>, body?: unknown) => srv.request('POST', path, { headers, body, idempotencyKey: randomUUID() });

  it('delivers all 30 failed or skipped events once, in their original order, to a receiver that now answers 200', async () => {
    const owner = await write('/v1/admin/owners', admin, { email: `r-${randomUUID()}@example.com` });
    const token = await write(`/v1/admin/owners/${owner.body.owner_id}/tokens`, admin, {});
    const auth = { authorization: `Bearer ${token.body.token}` };
    const agent = await write('/v1/owner/agents', auth, { name: 'recovering' });
    const agentHeaders = { 'x-agent-id': agent.body.agent_id, 'x-api-key': agent.body.api_key };
    const hook = await write('/v1/agent/webhooks', agentHeaders, { url: receiver.url('/recover'), event_types: ['payment.executed'] });
    expect(hook.status, hook.text).to.equal(200);
    const webhookId = hook.body.webhook.id as string;
    const since = clock.now().toISOString();

    const emitted: string[] = [];
    const emit = async () => {
      const event = await srv.db.transaction((trx) =>
        appendEvent(trx, {
          type: 'payment.executed',
          agentId: agent.body.agent_id,
          walletId: agent.body.wallet_id,
          operationId: null,
          resource: { type: 'operation', id: randomUUID() },
          data: { n: emitted.length },
          createdAt: clock.now(),
        }),
      );
      emitted.push(event.id);
    };
    // 20 events fail for 72 hours (retried with backoff) until the endpoint is disabled.
    for (let i = 0; i < 20; i++) await emit();
    const failingWorker = worker();
    const controller = new AbortController();
    const running = failingWorker.loop.run(controller.signal);
    try {
      await waitUntil(
        'sustained_failures',
        async () => {
          const ep = await srv.db('webhook_endpoints').where({ id: webhookId }).first();
          if (ep.disabled_reason === 'sustained_failures') return true;
          const due = await srv.db('webhook_deliveries').where({ endpoint_id: webhookId, status: 'retrying' }).min('next_attempt_at as at').first();
          const busy = await srv.db('webhook_deliveries').where({ endpoint_id: webhookId }).whereIn('status', ['pending', 'in_flight']).first();
          if (due?.at && !busy) clock.set(new Date(Math.max(clock.now().getTime(), new Date(due.at).getTime())));
          return false;
        },
        60_000,
      );
    } finally {
      controller.abort();
      await running;
    }
    // 10 more while disabled: never queued for this endpoint.
    clock.advance(60_000);
    for (let i = 0; i < 10; i++) {
      clock.advance(1_000);
      await emit();
    }
    const rows = await srv.db('webhook_deliveries').where({ endpoint_id: webhookId });
    expect(rows).to.have.length(20);
    expect(rows.every((r) => r.status === 'failed')).to.equal(true);
    const failedRequests = receiver.requests.length;
    expect(failedRequests).to.be.greaterThan(20);

    // The agent cannot recover; the owner re-enables and recovers.
    const agentRetry = await write(`/v1/agent/webhooks/${webhookId}/deliveries/${rows[0].id}/retry`, agentHeaders);
    expect(agentRetry.status).to.equal(403);
    expect(agentRetry.body.error.code).to.equal('owner_only_action');
    const early = await write(`/v1/owner/webhooks/${webhookId}/recover`, auth, { since });
    expect(early.status).to.equal(409);
    expect((await write(`/v1/owner/webhooks/${webhookId}/enable`, auth)).status).to.equal(200);
    failing = false;
    const recovered = await write(`/v1/owner/webhooks/${webhookId}/recover`, auth, { since });
    expect(recovered.status, recovered.text).to.equal(200);
    expect(recovered.body).to.deep.include({ webhook_id: webhookId, requeued: 30 });

    // Several workers at once still deliver recovered events one by one, in order.
    const workers = [worker(), worker(), worker()];
    await waitUntil(
      '30 deliveries',
      async () => {
        await Promise.all(workers.map((w) => w.runOnce()));
        return Number((await srv.db('webhook_deliveries').where({ endpoint_id: webhookId, status: 'delivered' }).count<{ count: string }[]>('* as count'))[0]!.count) === 30;
      },
      60_000,
    );
    const received = receiver.requests.slice(failedRequests).map((r) => String(r.headers['service-webhook-id']));
    expect(received).to.deep.equal(emitted);
    const again = await write(`/v1/owner/webhooks/${webhookId}/recover`, auth, { since });
    expect(again.body.requeued).to.equal(0);

    const audit = await srv.request('GET', '/v1/owner/audit', { headers: auth });
    expect(audit.body.items.slice(0, 2).map((e: { action: string }) => e.action)).to.deep.equal(['ownerRecoverWebhook', 'ownerRecoverWebhook']);
    expect(audit.body.items.map((e: { action: string }) => e.action)).to.include('ownerEnableWebhook');

    // The agent's side: its events newest first, one event as delivered, and one delivery retried.
    const page = await srv.request('GET', '/v1/agent/events?type=payment.executed&limit=25', { headers: agentHeaders });
    expect(page.status, page.text).to.equal(200);
    expect(page.body.items.map((e: { id: string }) => e.id)).to.deep.equal([...emitted].reverse().slice(0, 25));
    const rest = await srv.request('GET', `/v1/agent/events?type=payment.executed&limit=25&cursor=${page.body.next_cursor}`, { headers: agentHeaders });
    expect(rest.body.items.map((e: { id: string }) => e.id)).to.deep.equal([...emitted].reverse().slice(25));
    expect(rest.body.has_more).to.equal(false);
    const sinceLast = await srv.request('GET', `/v1/agent/events?since=${encodeURIComponent(clock.now().toISOString())}`, { headers: agentHeaders });
    expect(sinceLast.body.items.map((e: { id: string }) => e.id)).to.deep.equal([emitted[29]]);
    const one = await srv.request('GET', `/v1/agent/events/${emitted[0]}`, { headers: agentHeaders });
    const firstDelivered = receiver.requests.slice(failedRequests)[0]!;
    expect(one.body.event).to.deep.equal(JSON.parse(firstDelivered.rawBody.toString()));
    const other = await srv.createAgent();
    expect((await srv.request('GET', `/v1/agent/events/${emitted[0]}`, { agent: other })).status).to.equal(404);

    const delivery = await srv.db('webhook_deliveries').where({ endpoint_id: webhookId, event_id: emitted[5] }).first();
    const retried = await write(`/v1/agent/webhooks/${webhookId}/deliveries/${delivery.id}/retry`, agentHeaders);
    expect(retried.status, retried.text).to.equal(200);
    expect(retried.body.delivery).to.include({ id: delivery.id, status: 'pending' });
    const before = receiver.requests.length;
    await waitUntil('retried delivery', async () => {
      await workers[0]!.runOnce();
      return receiver.requests.length > before;
    });
    expect(receiver.requests.slice(before).map((r) => r.headers['service-webhook-id'])).to.deep.equal([emitted[5]]);
  });
});
