// Issue 27 in headless Chromium with the DevTools virtual authenticator: once the owner has a passkey, the console
// rotates an agent's API key and saves its policy only after the passkey answers a step-up for that action (the
// service's 428 step_up_required, then the same request with X-Passkey-Assertion); the audit log names the passkey.
// Without the authenticator's answer nothing changes.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { repoRoot } from '../helpers/process.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import type { TestAgent } from '../helpers/server.js';
import { expectAccessible } from './helpers.js';

describe('the console asks the passkey before key rotation and policy changes (issue 27)', function () {
  this.timeout(180_000);
  let srv: LedgerServer;
  let browser: Browser;
  let agent: TestAgent;
  let origin: string;
  let ownerToken: string;

  before(async () => {
    if (process.env.npm_lifecycle_event !== 'test') execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: repoRoot, stdio: 'ignore' });
    // Browsers refuse an IP address as the RP id: the console is opened as http://localhost:<port>.
    srv = await startLedgerServer({ WEBAUTHN_RP_ID: 'localhost' });
    origin = srv.baseUrl.replace('127.0.0.1', 'localhost');
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email: `o-${randomUUID()}@example.com` })).owner_id;
    agent = await srv.createAgent({ ownerId, name: 'guarded', policy: { operation_types: ['payment'], per_tx_usd: '10' }, fund: { USDC: '100' } });
    ownerToken = (await srv.services.owner.createToken(srv.db, ownerId)).token;
  });
  after(async () => {
    await browser?.close();
    await srv?.close();
  });

  const owner = (method: string, path: string) => srv.request(method, path, { headers: { authorization: `Bearer ${ownerToken}` } });

  /** The virtual authenticator; `present` false: it never answers (the owner walked away). */
  async function authenticator(page: Page) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    return { away: () => cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled: false }) };
  }

  it('registers a passkey, then rotates the key and saves the policy through its step-up', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const key = await authenticator(page);
    const session = await srv.services.owner.createSession(srv.db, agent.ownerId);
    await context.addCookies([{ name: 'owner_session', value: session.token, url: origin }]);

    await page.goto(`${origin}/console/#/passkeys`);
    await page.getByLabel('Name (optional)').fill('Laptop key');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByText('Passkey added.').waitFor();

    await page.goto(`${origin}/console/#/agents/${agent.agentId}`);
    await page.getByRole('button', { name: 'Rotate key' }).click();
    await page.getByText('New API key').waitFor({ timeout: 20_000 });
    expect((await srv.request('GET', '/v1/agent/self', { agent })).status).to.equal(401);

    const policy = page.getByLabel('Policy (JSON, contract §9 keys)');
    await policy.fill('{"operation_types": ["payment"], "per_tx_usd": "42"}');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByText('Policy saved.').waitFor({ timeout: 20_000 });
    expect((await owner('GET', `/v1/owner/agents/${agent.agentId}/policy`)).body.policy).to.include({ per_tx_usd: '42' });
    await expectAccessible(page, 'agent page after a step-up');

    const audit = (await owner('GET', '/v1/owner/audit')).body.items as { action: string; details: { passkey_id?: string } }[];
    for (const action of ['ownerRotateAgentKey', 'ownerReplacePolicy']) expect(audit.find((e) => e.action === action)?.details.passkey_id, action).to.be.a('string');

    // The passkey does not answer (the owner walked away): the change is not made.
    await key.away();
    await policy.fill('{"operation_types": ["payment"], "per_tx_usd": "99"}');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.waitForTimeout(1500);
    expect((await owner('GET', `/v1/owner/agents/${agent.agentId}/policy`)).body.policy).to.include({ per_tx_usd: '42' });
    await context.close();
  });
});
