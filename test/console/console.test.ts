// The owner console in headless Chromium (Debian's /usr/bin/chromium through playwright-core): sign
// in with the e-mailed code, create an agent, fund it, edit its policy, approve a destination,
// re-enable a disabled endpoint and recover its events, revoke a connected app. Each step is checked
// in the API afterwards; every page is screenshotted into test-artifacts/ and checked by axe-core
// (no serious or critical violation), on the desktop and at 375 px wide.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { disableEndpointForFailures } from '../../src/db/repositories/webhook.repository.js';
import { failWaitingDeliveries } from '../../src/db/repositories/delivery.repository.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createLogger } from '../../src/lib/logger.js';
import { systemClock } from '../../src/lib/clock.js';
import { createDeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import type { TestServer } from '../helpers/server.js';
import type { MailSink } from '../oauth/helpers.js';
import { TEST_MASTER_KEY, waitUntil } from '../webhooks/helpers/context.js';
import type { Receiver } from '../webhooks/helpers/receiver.js';
import { ADMIN, adminApi, expectAccessible, shot, startConsoleEnv, type ConsoleEnv } from './helpers.js';

describe('owner console in headless Chromium', function () {
  this.timeout(180_000);
  let env: ConsoleEnv;
  let srv: TestServer;
  let mail: MailSink;
  let browser: Browser;
  let receiver: Receiver;
  let ca: string;
  const admin = { authorization: `Bearer ${ADMIN}` };

  before(async () => {
    env = await startConsoleEnv();
    ({ srv, mail, browser, receiver, ca } = env);
  });
  after(async () => {
    await env?.close();
  });

  const api = (method: string, path: string, body?: unknown) => adminApi(srv)(method, path, body);

  it('walks the owner through every page, each change visible in the API', async () => {
    const email = `console-${randomUUID()}@example.com`;
    const owner = await api('POST', '/v1/admin/owners', { email });
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const base = `${srv.baseUrl}/console/`;

    // Sign in with the e-mailed code.
    await page.goto(base);
    await shot(page, 'sign-in');
    await expectAccessible(page, 'sign-in');
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    const code = await mail.nextCode(email);
    await page.getByLabel('One-time code').fill(code);
    await expectAccessible(page, 'sign-in code');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'owner_session');
    expect(session).to.include({ httpOnly: true, sameSite: 'Lax', secure: true });

    // Create an agent.
    await page.getByLabel('Agent name').fill('console bot');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('link', { name: 'console bot' }).waitFor();
    expect(await page.getByText('x-api-key: agk_').isVisible()).to.equal(true);
    await shot(page, 'agents');
    await expectAccessible(page, 'agents');
    const agents = await api('GET', '/v1/owner/agents');
    const agent = agents.items.find((a: { owner_id: string; name: string }) => a.owner_id === owner.owner_id && a.name === 'console bot');
    expect(agent, 'agent created through the console').to.not.equal(undefined);
    const agentId = agent.agent_id as string;

    // Fund it.
    await page.getByRole('link', { name: 'console bot' }).click();
    await page.getByRole('heading', { name: 'console bot' }).waitFor();
    await page.getByLabel('Amount').fill('100');
    await page.getByRole('button', { name: 'Fund wallet' }).click();
    await page.getByText('Funded 100 USDC; available 100.').waitFor();
    await page.getByRole('cell', { name: 'Deposit of 100 USDC' }).waitFor();
    expect((await api('GET', `/v1/owner/agents/${agentId}`)).agent.balances).to.deep.equal([{ asset: 'USDC', amount: '100' }]);

    // Edit its policy: the problems show in place, then a valid one is saved.
    const policy = page.getByLabel('Policy (JSON, contract §9 keys)');
    await policy.fill('{"operation_types": ["teleport"], "per_tx_usd": 5}');
    await page.getByRole('button', { name: 'Validate' }).click();
    await page.locator('#policy-problems li', { hasText: 'operation_types: unknown value teleport' }).waitFor();
    expect(await page.locator('#policy-problems li', { hasText: 'per_tx_usd must be a decimal string' }).count()).to.equal(1);
    expect(await policy.getAttribute('aria-invalid')).to.equal('true');
    await shot(page, 'agent-policy-errors');
    await expectAccessible(page, 'agent-policy-errors');
    await policy.fill('{"operation_types": ["payment"], "per_tx_usd": "10"}');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByText('Policy saved.').waitFor();
    expect((await api('GET', `/v1/owner/agents/${agentId}/policy`)).policy).to.include({ per_tx_usd: '10' });
    await shot(page, 'agent');
    await expectAccessible(page, 'agent');

    // Approve a destination.
    await page.getByLabel('Address (0x…)').fill('0x7777777777777777777777777777777777777777');
    await page.getByLabel('Label').fill('cold wallet');
    await page.getByRole('button', { name: 'Propose destination' }).click();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.locator('.badge.confirmed').waitFor();
    const dests = await api('GET', `/v1/owner/agents/${agentId}/trusted-destinations`);
    expect(dests.items.map((d: { label: string; status: string }) => [d.label, d.status])).to.deep.equal([['cold wallet', 'confirmed']]);
    await page.goto(`${base}#/destinations`);
    await page.getByRole('heading', { name: 'Trusted destinations' }).first().waitFor();
    await shot(page, 'destinations');
    await expectAccessible(page, 'destinations');

    // A webhook endpoint disabled for sustained failures, with three events that never arrived.
    const created = await api('GET', `/v1/owner/agents/${agentId}`);
    const rotated = await api('POST', `/v1/owner/agents/${agentId}/rotate-key`);
    const agentHeaders = { 'x-agent-id': agentId, 'x-api-key': rotated.api_key };
    const hook = await srv.request('POST', '/v1/agent/webhooks', { headers: agentHeaders, body: { url: receiver.url('/console'), event_types: ['payment.executed'] }, idempotencyKey: randomUUID() });
    expect(hook.status, hook.text).to.equal(200);
    const webhookId = hook.body.webhook.id as string;
    const eventIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const event = await srv.db.transaction((trx) =>
        appendEvent(trx, {
          type: 'payment.executed',
          agentId,
          walletId: created.agent.wallet_id,
          operationId: null,
          resource: { type: 'operation', id: randomUUID() },
          data: { i },
          createdAt: new Date(),
        }),
      );
      eventIds.push(event.id);
    }
    await srv.db.transaction(async (trx) => {
      await disableEndpointForFailures(trx, webhookId, new Date());
      await failWaitingDeliveries(trx, webhookId, 'endpoint_disabled', new Date());
    });

    await page.goto(`${base}#/webhooks`);
    await page.getByRole('link', { name: receiver.url('/console') }).click();
    await page.getByText('disabled (sustained_failures)').waitFor();
    await shot(page, 'webhook-disabled');
    await expectAccessible(page, 'webhook-disabled');
    await page.getByRole('button', { name: 'Re-enable' }).click();
    await page.getByText('Endpoint re-enabled.').waitFor();
    await page.getByRole('button', { name: 'Recover events' }).click();
    await page.getByText('3 events queued again, in their original order.').waitFor();
    const worker = createDeliveryWorker({
      db: srv.db,
      clock: systemClock,
      log: createLogger('silent'),
      sealer: createSealer(TEST_MASTER_KEY),
      leaseMs: 30_000,
      attemptTimeoutMs: 2_000,
      allowLoopback: true,
      ca,
      idleMs: 10,
    });
    await waitUntil('recovered deliveries', async () => {
      await worker.runOnce();
      return receiver.requests.filter((r) => r.path === '/console').length >= 3;
    });
    expect(receiver.requests.filter((r) => r.path === '/console').map((r) => r.headers['service-webhook-id'])).to.deep.equal(eventIds);
    const deliveries = await api('GET', `/v1/owner/webhooks/${webhookId}/deliveries`);
    expect(deliveries.items.map((d: { status: string }) => d.status)).to.deep.equal(['delivered', 'delivered', 'delivered']);
    await page.getByRole('button', { name: 'Refresh deliveries' }).click();
    await page.getByRole('cell', { name: 'delivered' }).first().waitFor();
    await shot(page, 'webhook');
    await expectAccessible(page, 'webhook');

    // Revoke a connected app.
    const grantId = `grant-${randomUUID()}`;
    await srv.services.oauth.bindGrant(srv.db, { grantId, clientId: 'console-test-client', ownerId: owner.owner_id, agentId, resource: `${srv.baseUrl}/v1/agent`, scopes: ['agent:read'] });
    await page.goto(`${base}#/apps`);
    await page.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('cell', { name: 'revoked' }).waitFor();
    await shot(page, 'connected-apps');
    await expectAccessible(page, 'connected-apps');
    const apps = await api('GET', `/v1/owner/connected-apps?owner_id=${owner.owner_id}`);
    expect(apps.items.map((g: { grant_id: string; status: string }) => [g.grant_id, g.status])).to.deep.equal([[grantId, 'revoked']]);

    // The audit log shows the console's actions, as the owner.
    await page.goto(`${base}#/audit`);
    await page.getByRole('cell', { name: 'ownerRevokeConnectedApp' }).waitFor();
    await shot(page, 'audit');
    await expectAccessible(page, 'audit');
    const audit = await srv.request('GET', '/v1/owner/audit?limit=100', { headers: admin });
    const mine = audit.body.items.filter((e: { owner_id: string; actor: string }) => e.owner_id === owner.owner_id && e.actor === 'owner').map((e: { action: string }) => e.action);
    expect(mine).to.include.members([
      'console.sign_in',
      'ownerCreateAgent',
      'ownerFundWallet',
      'ownerReplacePolicy',
      'ownerConfirmTrustedDestination',
      'ownerEnableWebhook',
      'ownerRecoverWebhook',
      'ownerRevokeConnectedApp',
    ]);

    // Readable on a phone-sized screen: no page scrolls sideways.
    await page.setViewportSize({ width: 375, height: 740 });
    for (const [name, hash] of [
      ['agents', '#/'],
      ['agent', `#/agents/${agentId}`],
      ['destinations', '#/destinations'],
      ['webhooks', '#/webhooks'],
      ['webhook', `#/webhooks/${webhookId}`],
      ['apps', '#/apps'],
      ['audit', '#/audit'],
    ] as const) {
      await page.goto(`${base}${hash}`);
      await page.locator('main h1').first().waitFor();
      expect(await page.evaluate('document.documentElement.scrollWidth'), name).to.be.at.most(375);
      await shot(page, `phone-${name}`);
      await expectAccessible(page, `phone-${name}`);
    }
    await page.close();
  });

  it("refuses a console write without the session's CSRF token", async () => {
    const email = `csrf-${randomUUID()}@example.com`;
    await api('POST', '/v1/admin/owners', { email });
    const page = await browser.newPage();
    await page.goto(`${srv.baseUrl}/console/`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('One-time code').fill(await mail.nextCode(email));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
    const statuses = await page.evaluate(async () => {
      const read = await fetch('/v1/owner/agents');
      const write = await fetch('/v1/owner/agents', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() }, body: '{"name":"forged"}' });
      return [read.status, write.status];
    });
    expect(statuses).to.deep.equal([200, 401]);
    await page.close();
  });
});
