// Accessibility of the owner console: axe-core finds no serious or critical violation (contrast,
// labels, names, lang, title…) on any page, filled with data, on the desktop and at 375 px wide;
// the sign-in form works from the keyboard alone; and the check itself does catch what it claims to.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { disableEndpointForFailures } from '../../src/db/repositories/webhook.repository.js';
import { failWaitingDeliveries } from '../../src/db/repositories/delivery.repository.js';
import { adminApi, expectAccessible, runAxe, seriousViolations, shot, startConsoleEnv, type ConsoleEnv } from './helpers.js';

const VIEWPORTS = [
  ['desktop', { width: 1100, height: 900 }],
  ['phone', { width: 375, height: 740 }],
] as const;

// Browser-side expressions (this project's TypeScript has no DOM library, on purpose).
/** The label (or aria-label, or text) of the focused element. */
const FOCUSED_NAME = `(() => { const el = document.activeElement; return (el && ((el.labels && el.labels[0] && el.labels[0].textContent) || el.getAttribute('aria-label') || el.textContent)) || ''; })()`;
/** Ids used twice, and form fields without exactly one label. */
const LABELLING = `(() => {
  const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
  const dupIds = ids.filter((id, i) => ids.indexOf(id) !== i);
  const badFields = [...document.querySelectorAll('input, select, textarea')].filter((f) => !f.labels || f.labels.length !== 1).map((f) => f.name || f.id);
  return { dupIds, badFields };
})()`;

describe('owner console accessibility (axe-core, keyboard)', function () {
  this.timeout(180_000);
  let env: ConsoleEnv;
  let base: string;
  const api = (method: string, path: string, body?: unknown) => adminApi(env.srv)(method, path, body);

  before(async () => {
    env = await startConsoleEnv();
    base = `${env.srv.baseUrl}/console/`;
  });
  after(async () => {
    await env?.close();
  });

  /** Presses Tab until the focused element is the one labelled `label`; returns how many presses it took. */
  const tabTo = async (page: Page, label: string, max = 10): Promise<number> => {
    for (let i = 1; i <= max; i++) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate<string>(FOCUSED_NAME);
      if (focused === label) return i;
    }
    throw new Error(`Tab never reached ${label} in ${max} presses`);
  };
  const focusRingOf = (page: Page) =>
    page.evaluate<{ style: string; color: string; page: string }>(
      '({ style: getComputedStyle(document.activeElement).outlineStyle, color: getComputedStyle(document.activeElement).outlineColor, page: getComputedStyle(document.documentElement).backgroundColor })',
    );
  /** WCAG contrast ratio of two opaque `rgb(r, g, b)` colours. */
  const contrast = (a: string, b: string): number => {
    const luminance = (rgb: string) => {
      const [r, g, bl] = (rgb.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map((c) => {
        const v = Number(c) / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
    };
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi! + 0.05) / (lo! + 0.05);
  };

  /** Signs `email` in with the keyboard alone: Tab to each field, type, Enter submits. */
  const signInByKeyboard = async (page: Page, email: string) => {
    await page.goto(base);
    await page.getByLabel('E-mail address').waitFor();
    expect(await tabTo(page, 'E-mail address'), 'Tab presses to the e-mail field').to.equal(1);
    const ring = await focusRingOf(page);
    expect(ring.style, 'the focused field shows a focus ring').to.not.equal('none');
    expect(contrast(ring.color, ring.page), `focus ring ${ring.color} on ${ring.page}`).to.be.at.least(3);
    await page.keyboard.type(email);
    await page.keyboard.press('Enter');
    const code = await env.mail.nextCode(email);
    await page.getByLabel('One-time code').waitFor();
    // Focus moves to the new field, so the keyboard user types the code straight away.
    await page.waitForFunction(`${FOCUSED_NAME} === 'One-time code'`);
    await page.keyboard.type(code);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
  };

  it('signs in with the keyboard alone: Tab to the e-mail field, type, Enter submits', async () => {
    const email = `kbd-${randomUUID()}@example.com`;
    await api('POST', '/v1/admin/owners', { email });
    const page = await env.browser.newPage({ viewport: { width: 375, height: 740 } });
    await signInByKeyboard(page, email);
    const cookies = await page.context().cookies();
    expect(cookies.map((c) => c.name)).to.include('owner_session');
    // The navigation is reachable from the keyboard too, first thing after sign-in.
    expect(await tabTo(page, 'Agents')).to.equal(1);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Trusted destinations' }).first().waitFor();
    expect(await page.evaluate('location.hash')).to.equal('#/destinations');
    await page.close();
  });

  it('has no serious or critical axe violation on any page, desktop and 375 px wide', async () => {
    const email = `a11y-${randomUUID()}@example.com`;
    const owner = await api('POST', '/v1/admin/owners', { email });
    // Data on every page: two agents (one funded, with a pending and a confirmed destination), a
    // disabled webhook endpoint with failed deliveries, an active connected app, audit entries.
    const agents = [];
    for (const name of ['alpha bot', 'beta bot']) agents.push(await api('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name }));
    const [alpha, beta] = agents as [{ agent_id: string; api_key: string; wallet_id?: string }, { agent_id: string }];
    await api('POST', `/v1/owner/agents/${alpha.agent_id}/fund`, { asset: 'USDC', amount: '25' });
    for (const [agentId, address, label] of [
      [alpha.agent_id, '0x1111111111111111111111111111111111111111', 'pending one'],
      [beta.agent_id, '0x2222222222222222222222222222222222222222', 'confirmed one'],
    ]) {
      await api('POST', `/v1/owner/agents/${agentId}/trusted-destinations`, { kind: 'crypto', chain: 'base', address, label, timelock_seconds: 0 });
      const [d] = (await api('GET', `/v1/owner/agents/${agentId}/trusted-destinations`)).items;
      if (label === 'confirmed one') await api('POST', `/v1/owner/trusted-destinations/${d.id}/confirm`);
    }
    const detail = await api('GET', `/v1/owner/agents/${alpha.agent_id}`);
    const rotated = await api('POST', `/v1/owner/agents/${alpha.agent_id}/rotate-key`);
    const hook = await env.srv.request('POST', '/v1/agent/webhooks', {
      headers: { 'x-agent-id': alpha.agent_id, 'x-api-key': rotated.api_key },
      body: { url: env.receiver.url('/a11y'), event_types: ['payment.executed'] },
      idempotencyKey: randomUUID(),
    });
    expect(hook.status, hook.text).to.equal(200);
    const webhookId = hook.body.webhook.id as string;
    await env.srv.db.transaction((trx) =>
      appendEvent(trx, {
        type: 'payment.executed',
        agentId: alpha.agent_id,
        walletId: detail.agent.wallet_id,
        operationId: null,
        resource: { type: 'operation', id: randomUUID() },
        data: {},
        createdAt: new Date(),
      }),
    );
    await env.srv.db.transaction(async (trx) => {
      await disableEndpointForFailures(trx, webhookId, new Date());
      await failWaitingDeliveries(trx, webhookId, 'endpoint_disabled', new Date());
    });
    await env.srv.services.oauth.bindGrant(env.srv.db, {
      grantId: `grant-${randomUUID()}`,
      clientId: 'a11y-client',
      ownerId: owner.owner_id,
      agentId: alpha.agent_id,
      resource: `${env.srv.baseUrl}/v1/agent`,
      scopes: ['agent:read'],
    });

    const pages: [string, string, (p: Page) => Promise<unknown>][] = [
      ['agents', '#/', (p) => p.getByRole('link', { name: 'beta bot' }).waitFor()],
      ['agent', `#/agents/${alpha.agent_id}`, (p) => p.getByRole('cell', { name: 'pending one', exact: true }).waitFor()],
      ['destinations', '#/destinations', (p) => p.getByRole('cell', { name: 'confirmed one', exact: true }).waitFor()],
      ['webhooks', '#/webhooks', (p) => p.getByRole('link', { name: env.receiver.url('/a11y') }).waitFor()],
      ['webhook', `#/webhooks/${webhookId}`, (p) => Promise.all([p.getByRole('button', { name: 'Re-enable' }).waitFor(), p.getByRole('cell', { name: 'failed' }).first().waitFor()])],
      ['apps', '#/apps', (p) => p.getByRole('button', { name: 'Revoke' }).waitFor()],
      ['audit', '#/audit', (p) => p.getByRole('cell', { name: 'ownerConfirmTrustedDestination' }).waitFor()],
    ];
    for (const [size, viewport] of VIEWPORTS) {
      const context = await env.browser.newContext({ viewport });
      const page = await context.newPage();
      await page.goto(base);
      await page.getByLabel('E-mail address').waitFor();
      await expectAccessible(page, `${size} sign-in`);
      await page.getByLabel('E-mail address').fill(email);
      await page.getByRole('button', { name: 'Send me a code' }).click();
      await page.getByLabel('One-time code').fill(await env.mail.nextCode(email));
      await expectAccessible(page, `${size} sign-in code`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Agents' }).waitFor();
      for (const [name, hash, ready] of pages) {
        await page.goto(`${base}${hash}`);
        await ready(page);
        await shot(page, `a11y-${size}-${name}`);
        const summary = await expectAccessible(page, `${size} ${name}`);
        // Stricter here than the serious-or-critical bar: no moderate or minor violation either.
        expect(
          summary.violations.map((v) => `${v.impact} ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
          `${size} ${name}`,
        ).to.deep.equal([]);
        // axe only marks duplicate ids "incomplete"; a label must name its own field, so every id is
        // unique and every field has exactly one label.
        expect(await page.evaluate(LABELLING), `${size} ${name}`).to.deep.equal({ dupIds: [], badFields: [] });
        // Each page says where the owner is, in the window title as well as the heading.
        const h1 = (await page.locator('main h1').first().textContent()) ?? '';
        expect(await page.title(), `${size} ${name} title`).to.equal(`${h1} · Agent API console`);
      }
      await context.close();
    }
  });

  it('the axe check fails on low contrast, an unlabelled field and a nameless button', async () => {
    const page = await env.browser.newPage();
    await page.goto(base);
    await page.getByLabel('E-mail address').waitFor();
    // Styled through the CSSOM: the console's CSP (style-src 'self') ignores style attributes.
    await page.evaluate(`{
      const faint = document.createElement('p');
      faint.textContent = 'faint text';
      faint.style.color = '#aaa';
      const bad = document.createElement('div');
      bad.append(faint, document.createElement('input'), document.createElement('button'));
      document.querySelector('main').append(bad);
    }`);
    const ids = seriousViolations(await runAxe(page)).map((line) => line.split(' ')[1]);
    expect(ids).to.include.members(['color-contrast', 'label', 'button-name']);
    let failed = false;
    try {
      await expectAccessible(page, 'a broken page');
    } catch {
      failed = true;
    }
    expect(failed, 'expectAccessible refuses the broken page').to.equal(true);
    await page.close();
  });
});
