// Issue 27 in headless Chromium with the DevTools virtual authenticator (acceptance 1 and 4): register a passkey,
// sign in with it, approve an agent's 300 USDC payment (above a 100 USD threshold) from the inbox with the keyboard
// alone, reject another, let a third expire on the clock; axe on the new pages, screenshots under docs/console/.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { repoRoot } from '../helpers/process.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import type { TestAgent } from '../helpers/server.js';
import { expectAccessible } from './helpers.js';

const PAYEE = '0x00000000000000000000000000000000000000c1';

describe('owner approvals in headless Chromium', function () {
  this.timeout(180_000);
  let srv: LedgerServer;
  let browser: Browser;
  let agent: TestAgent;
  let origin: string;

  before(async () => {
    if (process.env.npm_lifecycle_event !== 'test') execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: repoRoot, stdio: 'ignore' });
    // Browsers refuse an IP address as the RP id: the console is opened as http://localhost:<port>.
    srv = await startLedgerServer({ WEBAUTHN_RP_ID: 'localhost' });
    origin = srv.baseUrl.replace('127.0.0.1', 'localhost');
    // The page counts down in the browser's time: the server's clock starts at the same moment.
    srv.clock.set(new Date());
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email: `o-${randomUUID()}@example.com` })).owner_id;
    agent = await srv.createAgent({
      ownerId,
      name: 'shopper',
      policy: { operation_types: 'all', allowed_recipients: 'all', approval_threshold_usd: '100', approval_ttl_seconds: 3600 },
      fund: { USDC: '1000' },
    });
    mkdirSync(`${repoRoot}/docs/console`, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await srv?.close();
  });

  const pay = async (amount: string) =>
    (await srv.request('POST', '/v1/agent/payments', { agent, body: { to: PAYEE, asset: 'USDC', amount }, idempotencyKey: randomUUID() })).body.operation_id as string;
  const status = async (id: string) => (await srv.request('GET', `/v1/agent/operations/${id}`, { agent })).body.operation;

  async function withAuthenticator(page: Page) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
  }

  async function tabTo(page: Page, name: RegExp) {
    for (let i = 0; i < 80; i++) {
      await page.keyboard.press('Tab');
      const label = await page.evaluate('document.activeElement ? (document.activeElement.closest("form")?.getAttribute("aria-label") || "") + " " + document.activeElement.textContent : ""');
      if (name.test(String(label))) return;
    }
    throw new Error(`no focusable element matches ${name}`);
  }

  it('registers a passkey, signs in with it, approves with the keyboard, rejects, and lets one expire', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await withAuthenticator(page);
    // The first sign-in is the e-mailed code's (test/console/console.test.ts); its session here comes from the service.
    const session = await srv.services.owner.createSession(srv.db, agent.ownerId);
    await context.addCookies([{ name: 'owner_session', value: session.token, url: origin }]);

    await page.goto(`${origin}/console/#/passkeys`);
    await page.getByLabel('Name (optional)').fill('Virtual key');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByText('Passkey added.').waitFor();
    expect((await srv.request('GET', '/v1/owner/passkeys', { headers: { authorization: `Bearer ${(await srv.services.owner.createToken(srv.db, agent.ownerId)).token}` } })).body.items).to.have.length(
      1,
    );
    await expectAccessible(page, 'passkeys');

    // Signed out, then in with the passkey alone.
    await context.clearCookies();
    await page.goto(`${origin}/console/`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByRole('navigation', { name: 'Console' }).waitFor();

    const approveMe = await pay('300');
    const rejectMe = await pay('200');
    const expireMe = await pay('150');
    await srv.settle();
    expect((await status(approveMe)).approval.state).to.equal('pending');

    await page.goto(`${origin}/console/#/approvals`);
    await page.getByRole('table', { name: 'Waiting for your approval' }).waitFor();
    await page
      .getByText('300 USDC from shopper')
      .first()
      .waitFor({ state: 'attached' })
      .catch(() => undefined);
    await expectAccessible(page, 'approvals');
    await page.screenshot({ path: `${repoRoot}/docs/console/approvals-desktop.png`, fullPage: true });

    // Keyboard only: Tab to the approve button of the 300 USDC payment and press Enter.
    await tabTo(page, /Approve 300 USDC from shopper/);
    await page.keyboard.press('Enter');
    await page
      .getByText('Approved: 300 USDC from shopper.')
      .waitFor({ timeout: 10_000 })
      .catch(async (err: unknown) => {
        throw new Error(`not approved: ${(await page.locator('[role=alert]').allTextContents()).join(' | ')} (${String(err)})`);
      });
    await srv.settle();
    expect((await status(approveMe)).status).to.equal('executed');

    await page.getByRole('button', { name: 'Reject' }).and(page.locator('form[aria-label="Reject 200 USDC from shopper"] button')).click();
    await page.getByText('Rejected: 200 USDC from shopper.').waitFor();
    srv.clock.advance(3601_000);
    await srv.settle();
    for (const [id, state] of [
      [rejectMe, 'rejected'],
      [expireMe, 'expired'],
    ] as const) {
      const op = await status(id);
      expect(op.status).to.equal('cancelled');
      expect(op.approval.state).to.equal(state);
      const types = (await srv.db('events').where({ operation_id: id }).orderBy('seq')).map((e: { type: string }) => e.type);
      expect(types).to.deep.equal(['operation.approval_requested', 'operation.approval_decided']);
    }
    const balances = (await srv.request('GET', '/v1/agent/balances', { agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC');
    expect(balances).to.include({ available: '700', held: '0' });

    await page.reload();
    await page.getByRole('table', { name: 'Recent approvals' }).waitFor();
    await page.setViewportSize({ width: 375, height: 800 });
    await expectAccessible(page, 'approvals at 375 px');
    await page.screenshot({ path: `${repoRoot}/docs/console/approvals-375.png`, fullPage: true });
    await context.close();
  });
});
