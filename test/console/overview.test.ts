// Issue 27, acceptance (the console owners would choose): the agents overview (balances in USD with a total, meters of
// what the caps leave, pending approvals), the policy as a form (a cap edited, saved and read back; a bad value's
// problem at its field) and the spending chart render with data seeded through the API on the server's injected
// clock; the pending approval is reached by keyboard from the overview; webhook health shows failing since and the
// last error; axe-clean on the desktop and at 375 px; screenshots in docs/console/.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { repoRoot } from '../helpers/process.js';
import { adminApi, expectAccessible, startConsoleEnv, type ConsoleEnv } from './helpers.js';

const VIEWPORTS = [
  ['desktop', { width: 1200, height: 900 }],
  ['375', { width: 375, height: 760 }],
] as const;
const PAYEE = '0x00000000000000000000000000000000000000b7';
const DAY = 86_400_000;

describe('owner console: overview, policy form and spending chart (Chromium)', function () {
  this.timeout(240_000);
  const clock = createFakeClock(new Date());
  let env: ConsoleEnv;
  before(async () => {
    env = await startConsoleEnv({ clock });
    mkdirSync(`${repoRoot}/docs/console`, { recursive: true });
  });
  after(async () => {
    await env?.close();
  });

  async function signIn(page: Page, email: string) {
    await page.goto(`${env.srv.baseUrl}/console/`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('One-time code').fill(await env.mail.nextCode(email));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
  }
  const axeClean = async (page: Page, where: string) => {
    const summary = await expectAccessible(page, where);
    expect(
      summary.violations.map((v) => `${v.impact} ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
      where,
    ).to.deep.equal([]);
  };

  it('shows the overview, edits a cap through the policy form and draws 30 days of spending against the cap', async () => {
    const api = adminApi(env.srv);
    const now = new Date();
    clock.set(now);
    const email = `overview-${randomUUID()}@example.com`;
    const owner = await api('POST', '/v1/admin/owners', { email });
    const treasury = await api('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'treasury bot' });
    const research = await api('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'research bot' });
    await api('POST', `/v1/owner/agents/${treasury.agent_id}/fund`, { asset: 'USDC', amount: '12500' });
    await api('POST', `/v1/owner/agents/${research.agent_id}/fund`, { asset: 'USDC', amount: '40.5' });
    const policy = {
      operation_types: ['payment', 'conversion'],
      allowed_assets: ['USDC'],
      allowed_recipients: 'all',
      per_tx_usd: '250',
      per_period_usd: '300',
      period: 'day',
      lifetime_usd: '5000',
      approval_threshold_usd: '200',
    };
    await api('PUT', `/v1/owner/agents/${treasury.agent_id}/policy`, policy);
    const agent = { 'x-agent-id': treasury.agent_id, 'x-api-key': treasury.api_key };
    const pay = async (amount: string) => {
      const res = await env.srv.request('POST', '/v1/agent/payments', { headers: agent, body: { to: PAYEE, asset: 'USDC', amount }, idempotencyKey: randomUUID() });
      expect(res.status, res.text).to.equal(200);
      return res.body;
    };
    // Payments over the last 20 days on the server's clock, then one above the approval threshold today.
    let spent = 0;
    for (let d = 20; d >= 1; d -= 3) {
      clock.set(new Date(now.getTime() - d * DAY));
      for (const amount of [String(40 + ((d * 17) % 120)), String(30 + ((d * 7) % 50))]) {
        await pay(amount);
        spent += Number(amount);
      }
    }
    clock.set(now);
    await pay('90');
    const held = await pay('210');
    expect(held.approval).to.include({ state: 'pending' });
    const overview = await api('GET', '/v1/owner/overview');
    const row = overview.items.find((i: { agent_id: string }) => i.agent_id === treasury.agent_id);
    expect(row).to.include({ per_period_usd: '300', period_spent_usd: '300', period_remaining_usd: '0', pending_approvals: 1 });
    expect(Number(row.lifetime_spent_usd)).to.equal(spent + 300);
    const spending = await api('GET', `/v1/owner/agents/${treasury.agent_id}/spending`);
    expect(spending.days).to.have.length(30);
    expect(spending.days.reduce((t: number, d: { spent_usd: string }) => t + Number(d.spent_usd), 0)).to.equal(spent + 300);
    // A failing webhook endpoint of the treasury bot: failing for 3 hours, the last attempt answered 503.
    const hook = await env.srv.request('POST', '/v1/agent/webhooks', { headers: agent, body: { url: env.receiver.url('/overview'), event_types: ['payment.executed'] }, idempotencyKey: randomUUID() });
    expect(hook.status, hook.text).to.equal(200);
    const endpointId = hook.body.webhook.id as string;
    const failingSince = new Date(now.getTime() - 3 * 3600_000);
    await env.srv.db('webhook_endpoints').where({ id: endpointId }).update({ failing_since: failingSince, consecutive_failures: 4, last_failure_at: now });
    const wallet = (await api('GET', `/v1/owner/agents/${treasury.agent_id}`)).agent.wallet_id as string;
    const event = await env.srv.db.transaction((trx) =>
      appendEvent(trx, { type: 'payment.executed', agentId: treasury.agent_id, walletId: wallet, operationId: null, resource: { type: 'operation', id: randomUUID() }, data: {}, createdAt: now }),
    );
    // The event's delivery to the endpoint (appended with the event), its fourth attempt answered 503.
    const deliveryId = (await env.srv.db('webhook_deliveries').where({ event_id: event.id, endpoint_id: endpointId }).first('id')).id as string;
    await env.srv
      .db('webhook_deliveries')
      .where({ id: deliveryId })
      .update({ status: 'retrying', attempt: 4, http_status: 503, next_attempt_at: new Date(now.getTime() + 600_000), last_attempt_at: now });
    await env.srv.db('webhook_delivery_attempts').insert({ delivery_id: deliveryId, attempt: 4, attempted_at: now, finished_at: now, outcome: 'retrying', http_status: 503 });

    for (const [size, viewport] of VIEWPORTS) {
      const context = await env.browser.newContext({ viewport });
      const page = await context.newPage();
      await signIn(page, email);

      // The overview: balances with USD values, the owner's total, meters of what the caps leave, the pending approval.
      const table = page.getByRole('table', { name: 'Your agents' });
      await table.waitFor();
      await page.getByText(`All agents together hold $${Number(overview.total_usd).toLocaleString('en-US', { minimumFractionDigits: 2 })}.`).waitFor();
      await table.getByText('40.5 USDC').waitFor();
      expect(await table.getByRole('meter', { name: 'treasury bot this day: $300.00 of $300.00 spent' }).count()).to.equal(1);
      await table.getByText('$0.00 left of $300.00').waitFor();
      await table.getByText(`left of $5,000.00`).waitFor();
      const pending = table.getByRole('link', { name: '1 pending' });
      await pending.waitFor();
      await page.screenshot({ path: `docs/console/overview-${size}.png`, fullPage: true });
      await axeClean(page, `${size} overview`);
      // Keyboard only: focus the pending link and follow it to the inbox.
      await pending.focus();
      await page.keyboard.press('Enter');
      const inbox = page.getByRole('table', { name: 'Waiting for your approval' });
      await inbox.waitFor();
      await inbox.getByRole('cell', { name: /^Paying 210 USDC to / }).waitFor();
      await page.getByRole('button', { name: 'Approve with passkey' }).first().focus();

      // The agent's page: the spending chart, then the policy form.
      await page.goto(`${env.srv.baseUrl}/console/#/agents/${treasury.agent_id}`);
      const chart = page.getByRole('img', { name: /^USD spent per day over the last 30 days: / });
      await chart.waitFor();
      expect(await chart.getAttribute('aria-label'))
        .to.contain(`$${(spent + 300).toLocaleString('en-US', { minimumFractionDigits: 2 })} in all`)
        .and.to.contain('cap $300.00 a day');
      expect(await chart.locator('canvas').count()).to.be.greaterThan(0);
      await page.getByText('daily cap $300.00').waitFor();
      await page.evaluate('document.querySelector(".chart").scrollIntoView({ block: "center" })');
      await page.screenshot({ path: `docs/console/chart-${size}.png` });
      await axeClean(page, `${size} chart`);

      // The form shows the policy in words and as fields.
      await page.getByText('It may: payment, conversion.').waitFor();
      await page.getByText('It may spend at most $250 per operation, $300 a day, $5,000 in total.').waitFor();
      await page.getByText('Operations above $200 wait for your approval.').waitFor();
      expect(await page.getByRole('checkbox', { name: 'payment', exact: true }).isChecked()).to.equal(true);
      expect(await page.getByRole('checkbox', { name: 'earn deposit' }).isChecked()).to.equal(false);
      expect(await page.getByRole('list', { name: 'Assets allowed' }).getByText('USDC').count()).to.equal(1);
      // A bad value: its problem shows at its field, and nothing is saved.
      const cap = page.getByLabel('Per period (USD)');
      await cap.fill('lots');
      await page.getByRole('button', { name: 'Save policy' }).click();
      const problem = page.locator('#cap-per_period_usd-problems li');
      await problem.waitFor();
      expect(await problem.textContent()).to.contain('per_period_usd must be a non-negative decimal string');
      expect(await cap.getAttribute('aria-invalid')).to.equal('true');
      expect((await api('GET', `/v1/owner/agents/${treasury.agent_id}/policy`)).policy.per_period_usd).to.equal('300');
      await cap.scrollIntoViewIfNeeded();
      await page.screenshot({ path: `docs/console/policy-form-${size}.png` });
      await axeClean(page, `${size} policy form with a problem`);
      // A good value, then an allow-list entry, saved through the form and read back.
      const newCap = size === 'desktop' ? '450' : '500';
      await cap.fill(newCap);
      await page.getByLabel('Asset symbol').fill('EURC');
      await page.getByRole('button', { name: 'Add to assets' }).click();
      await page.getByText('It may use only USDC, EURC.').waitFor();
      await page.getByRole('button', { name: 'Save policy' }).click();
      await page.getByText('Policy saved.').waitFor();
      const saved = (await api('GET', `/v1/owner/agents/${treasury.agent_id}/policy`)).policy;
      expect(saved).to.include({ per_period_usd: newCap, per_tx_usd: '250' });
      expect(saved.allowed_assets).to.deep.equal(['USDC', 'EURC']);
      expect(await cap.getAttribute('aria-invalid')).to.equal('false');
      // The JSON stays beside the form and follows it.
      expect(JSON.parse(await page.getByLabel('Policy (JSON, contract §9 keys)').inputValue()).per_period_usd).to.equal(newCap);
      await api('PUT', `/v1/owner/agents/${treasury.agent_id}/policy`, policy);

      // Webhook health: failing since, how often, the last error.
      await page.goto(`${env.srv.baseUrl}/console/#/webhooks`);
      const hooks = page.getByRole('table', { name: 'Webhook endpoints of your agents' });
      await hooks.waitFor();
      await hooks.getByText(`failing since ${await page.evaluate(`new Date(${failingSince.getTime()}).toLocaleString()`)}, 4 in a row; last error`).waitFor();
      await hooks.getByText('http_503').waitFor();
      await axeClean(page, `${size} webhooks`);
      await context.close();
    }
  });
});
