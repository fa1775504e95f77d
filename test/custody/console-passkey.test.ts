// Issue 27 in headless Chromium on Anvil, with the DevTools virtual authenticator: the owner registers a passkey in
// the console, the account is handed to it with the development owner key (agentctl agent hand-to-passkey), and from
// then on the console is no longer read-only: it saves a policy, approves a payment above the threshold and pauses
// the agent, each signed by the passkey (an assertion over the change's EIP-712 digest, checked by the account's
// ERC-1271 owner on chain). The chain shows each: the policy version and cap, the payment settled, paused().
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress } from 'viem';
import { chromium, type Browser, type Page } from 'playwright-core';
import { readAccountState } from '../../src/chain/accounts.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import type { Address } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { agentctlWith } from '../helpers/agentctl.js';
import { chainEnv, randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv, type TestAgent } from '../helpers/server.js';
import { expectAccessible } from '../console/helpers.js';

const ADMIN = 'console-passkey-admin-token-0123456789abcdef';

describe('the console signs owner changes with the passkey that owns the account (issue 27)', function () {
  this.timeout(300_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let dir: string;
  let browser: Browser;
  let origin: string;
  let ownerId: string;
  let agent: TestAgent;
  let account: Address;
  const payee = randomAddress();
  const POLICY = { operation_types: 'all', allowed_assets: ['USDC'], allowed_recipients: [payee], per_period_usd: '5000', approval_threshold_usd: '100' };

  before(async () => {
    if (process.env.npm_lifecycle_event !== 'test') execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: repoRoot, stdio: 'ignore' });
    node = await startAnvil();
    dir = mkdtempSync(path.join(tmpdir(), 'console-passkey-'));
    // Browsers refuse an IP address as the RP id: the console is opened as http://localhost:<port>.
    s = await startChainServer(node, { env: { ADMIN_TOKEN: ADMIN, DATA_DIR: dir, WEBAUTHN_RP_ID: 'localhost' } });
    origin = s.baseUrl.replace('127.0.0.1', 'localhost');
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    // On chain 31337 an owner without a signer gets a development key in DATA_DIR/owner-keys/, which signs the policy.
    ownerId = (await s.services.agents.createOwner(s.db, { email: `console-passkey-${randomUUID()}@example.com` })).owner_id;
    agent = await s.createAgent({ ownerId, name: 'chain bot' });
    await s.services.ledger.policy.set(s.db, agent.agentId, POLICY);
    account = getAddress((await s.db('wallets').where({ id: agent.walletId }).first()).address) as Address;
    await mintAndCredit(s, agent.walletId, account, '1000');
  });
  after(async () => {
    await browser?.close();
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const onChain = {
    paused: () => node.client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paused' }),
    state: () => readAccountState(node.client, account),
  };

  async function done(page: Page, text: string) {
    await page
      .getByText(text)
      .first()
      .waitFor({ timeout: 30_000 })
      .catch(async (err: unknown) => {
        throw new Error(`"${text}" not shown: ${(await page.locator('[role=alert]').allTextContents()).join(' | ')} (${String(err)})`);
      });
  }

  it('registers a passkey, takes the account over, then saves a policy, approves and pauses with it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    const session = await s.services.owner.createSession(s.db, ownerId);
    await context.addCookies([{ name: 'owner_session', value: session.token, url: origin }]);

    await page.goto(`${origin}/console/#/passkeys`);
    await page.getByLabel('Name (optional)').fill('Virtual key');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await done(page, 'Passkey added.');
    const [passkey] = await s.db('owner_passkeys').where({ owner_id: ownerId });

    // Key-owned: read-only, with agentctl commands.
    await page.goto(`${origin}/console/#/agents/${agent.agentId}`);
    await page.getByRole('heading', { name: 'On-chain limits (read-only)' }).waitFor();
    expect(await page.getByRole('button', { name: 'Save policy' }).count()).to.equal(0);

    // The development owner key hands the account to the passkey (agentctl through the owner API).
    const { json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { ADMIN_TOKEN: ADMIN, AGENT_API_BASE_URL: s.baseUrl, DATA_DIR: dir })) }), 120_000);
    const keyFile = path.join(dir, 'owner-keys', `${ownerId}.key`);
    const handed = await json('agent', 'hand-to-passkey', agent.agentId, '--passkey', passkey.id, '--owner-key-file', keyFile);
    expect(handed).to.include({ owner_signer_kind: 'passkey', owner_passkey_id: passkey.id });
    expect((await onChain.state()).owner).to.equal(handed.owner_signer);

    await page.reload();
    await page.getByRole('heading', { name: 'On-chain limits (signed with your passkey)' }).waitFor();
    expect(await page.getByLabel('Account on chain').textContent()).to.contain('passkey Virtual key');
    await expectAccessible(page, 'agent page, passkey-owned account');

    // The policy: a per-transaction cap of 500, signed by the passkey.
    const version = (await onChain.state()).policyVersion;
    await page.getByLabel('Policy (JSON, contract §9 keys)').fill(JSON.stringify({ ...POLICY, per_tx_usd: '500' }));
    await page.getByRole('button', { name: 'Save policy' }).click();
    await done(page, 'Policy saved.');
    const state = await onChain.state();
    expect(state.policyVersion).to.equal(version + 1n);
    expect(state.limits!.perTxUsd).to.equal(500n * 10n ** 8n);

    // A payment above the threshold waits; the passkey signs its ApproveSpend from the inbox.
    const paid = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to: payee, asset: 'USDC', amount: '300' } });
    expect(paid.status, paid.text).to.equal(200);
    expect(paid.body.approval).to.include({ state: 'pending' });
    await page.goto(`${origin}/console/#/approvals`);
    await page.getByRole('table', { name: 'Waiting for your approval' }).waitFor();
    await page.locator('form[aria-label="Approve 300 USDC from chain bot"] button').click();
    await done(page, 'Approved: 300 USDC from chain bot.');
    const [op] = await s.settle([paid.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(300_000_000n);

    // Pause, then resume, from the agent page.
    await page.goto(`${origin}/console/#/agents/${agent.agentId}`);
    await page.getByRole('button', { name: 'Disable agent' }).click();
    await done(page, 'Agent disabled.');
    expect(await onChain.paused()).to.equal(true);
    await page.getByRole('button', { name: 'Enable agent' }).click();
    await done(page, 'Agent enabled.');
    expect(await onChain.paused()).to.equal(false);
    await page.screenshot({ path: 'test-artifacts/console-onchain-passkey.png', fullPage: true });
    await context.close();
  });
});
