// The owner is warned by e-mail when an endpoint has been failing for 24 hours and again at 48
// hours, with the failure reason and a console link; both land in the audit log; no webhook event.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createLogger } from '../../src/lib/logger.js';
import { createDeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import { createFailureWarnings, createWarningMailer } from '../../src/webhooks/failure-warnings.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startMailSink, type MailSink } from '../oauth/helpers.js';
import { TEST_MASTER_KEY, waitUntil } from '../webhooks/helpers/context.js';
import { createTestPki, startReceiver, type Receiver } from '../webhooks/helpers/receiver.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('webhook failure warnings', function () {
  this.timeout(60_000);
  const clock = createFakeClock('2026-06-01T00:00:00.000Z');
  let sink: MailSink;
  let srv: TestServer;
  let receiver: Receiver;
  let ca: string;

  before(async () => {
    sink = await startMailSink();
    const pki = await createTestPki();
    ca = pki.ca;
    receiver = await startReceiver(pki);
    receiver.handle((_req, res) => {
      res.writeHead(503);
      res.end('down');
    });
    srv = await startTestServer({ clock, env: { ADMIN_TOKEN: ADMIN, UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true', SMTP_URL: sink.url } });
  });
  after(async () => {
    await srv?.close();
    await receiver?.close();
    await sink?.close();
  });

  it('mails the owner at 24 h and at 48 h of failures, once each, and records both in the audit log', async () => {
    const write = (path: string, headers: Record<string, string>, body?: unknown) => srv.request('POST', path, { headers, body, idempotencyKey: randomUUID() });
    const admin = { authorization: `Bearer ${ADMIN}` };
    const email = `warn-${randomUUID()}@example.com`;
    const owner = await write('/v1/admin/owners', admin, { email });
    const token = await write(`/v1/admin/owners/${owner.body.owner_id}/tokens`, admin, {});
    const auth = { authorization: `Bearer ${token.body.token}` };
    const agent = await write('/v1/owner/agents', auth, { name: 'flaky' });
    const agentHeaders = { 'x-agent-id': agent.body.agent_id, 'x-api-key': agent.body.api_key };
    const hook = await write('/v1/agent/webhooks', agentHeaders, { url: receiver.url('/flaky'), event_types: ['payment.executed'] });
    const webhookId = hook.body.webhook.id as string;
    await srv.db.transaction((trx) =>
      appendEvent(trx, {
        type: 'payment.executed',
        agentId: agent.body.agent_id,
        walletId: agent.body.wallet_id,
        operationId: null,
        resource: { type: 'operation', id: randomUUID() },
        data: {},
        createdAt: clock.now(),
      }),
    );
    const worker = createDeliveryWorker({
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
    expect(await worker.runOnce()).to.equal(1);
    const warnings = createFailureWarnings({
      db: srv.db,
      clock,
      log: createLogger('silent'),
      mailer: createWarningMailer({ smtpUrl: sink.url, log: createLogger('silent') }),
      owner: srv.services.owner,
      baseUrl: srv.baseUrl,
    });

    clock.advance(23 * 3600_000);
    expect(await warnings.runOnce()).to.equal(0);
    clock.advance(3600_000);
    expect(await warnings.runOnce()).to.equal(1);
    expect(await warnings.runOnce()).to.equal(0);
    const first = await waitUntil('the 24 h warning', async () => sink.texts(email)[0]);
    expect(sink.received(email)).to.equal(1);
    expect(first).to.contain('failing for 24 hours');
    expect(first).to.contain(receiver.url('/flaky'));
    expect(first).to.contain('HTTP 503');
    expect(first).to.contain(`${srv.baseUrl}/console/#/webhooks/${webhookId}`);

    clock.advance(24 * 3600_000);
    expect(await warnings.runOnce()).to.equal(1);
    expect(await warnings.runOnce()).to.equal(0);
    const second = await waitUntil('the 48 h warning', async () => sink.texts(email)[1]);
    expect(sink.received(email)).to.equal(2);
    expect(second).to.contain('failing for 48 hours');

    const audit = await srv.request('GET', '/v1/owner/audit', { headers: auth });
    const warned = audit.body.items.filter((e: { action: string }) => e.action === 'webhook.failure_warning');
    expect(warned.map((e: { actor: string; target_id: string; details: { hours: number } }) => [e.actor, e.target_id, e.details.hours])).to.deep.equal([
      ['system', webhookId, 48],
      ['system', webhookId, 24],
    ]);
    // No event type of its own: the agent's events are only the one payment event.
    const types = await srv.db('events').where({ agent_id: agent.body.agent_id }).pluck('type');
    expect(types).to.deep.equal(['payment.executed']);
  });
});
