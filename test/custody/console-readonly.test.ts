// Issue 24, "until the console can sign": in evm mode the owner sees the agent's account on chain read-only
// (GET /v1/owner/agents/{agent_id}/account, `agentctl agent account`, the console's agent page), with the caps and
// usage the account holds and the exact agentctl command that signs each owner change; the console offers no control
// that would need the owner's signature. On the simulated chain the same route says the database enforces the limits.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress, parseUnits } from 'viem';
import { chromium, type Browser } from 'playwright-core';
import { readAccountState } from '../../src/chain/accounts.js';
import type { Address } from '../../src/chain/port.js';
import { mintToken } from '../../src/chain/token.js';
import { formatAmount } from '../../src/lib/money.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainServer } from '../helpers/chain.js';
import { agentctlWith } from '../helpers/agentctl.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';
import { startMailSink, type MailSink } from '../oauth/helpers.js';
import { expectAccessible } from '../console/helpers.js';

const ADMIN = 'console-readonly-admin-token-0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN}` };

describe('custody: the owner sees the account on chain read-only, with the agentctl command of each change (issue 24)', function () {
  this.timeout(300_000);
  let node: AnvilNode;
  let mail: MailSink;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let dir: string;
  let browser: Browser;
  let email: string;
  let agentId: string;
  let account: Address;

  const { json } = agentctlWith(() => ({ ...process.env, ...testConfigEnv(chainEnv(node, s.databaseUrl, { ADMIN_TOKEN: ADMIN, AGENT_API_BASE_URL: s.baseUrl, DATA_DIR: dir })) }), 120_000);
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await s.request(method, p, { headers: admin, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
    expect(res.status, `${method} ${p}: ${res.text}`).to.be.lessThan(300);
    return res.body;
  };

  before(async () => {
    node = await startAnvil();
    mail = await startMailSink();
    dir = mkdtempSync(path.join(tmpdir(), 'console-readonly-'));
    s = await startChainServer(node, { env: { ADMIN_TOKEN: ADMIN, DATA_DIR: dir, SMTP_URL: mail.url } });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    email = `readonly-${randomUUID()}@example.com`;
    const owner = await call('POST', '/v1/admin/owners', { email });
    // On chain 31337 an owner without a signer gets a development key in DATA_DIR/owner-keys/, which signs here.
    agentId = (await call('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'chain bot' })).agent_id;
    await call('PUT', `/v1/owner/agents/${agentId}/policy`, { operation_types: ['payment'], per_tx_usd: '10', per_period_usd: '30', period: 'day', allowed_recipients: 'all' });
    const wallet = await s.db('wallets').where({ agent_id: agentId }).first();
    account = getAddress(wallet.address) as Address;
    await mintToken(s.node.devWallet(0), node.client, s.token, account, parseUnits('50', 6));
    // The deposit watcher credits the ledger (ticked here: no worker runs in this server).
    for (const deadline = Date.now() + 30_000; ;) {
      const { agent } = await call('GET', `/v1/owner/agents/${agentId}`);
      if (agent.balances.some((b: { asset: string; amount: string }) => b.asset === 'USDC' && Number(b.amount) >= 50)) break;
      if (Date.now() > deadline) throw new Error('the deposit was not credited');
      if ((await s.services.inbound!.deposits.tick()) === 0) await new Promise((r) => setTimeout(r, 30));
    }
  });
  after(async () => {
    await browser?.close();
    await s?.close();
    await s?.dropDatabase();
    await mail?.close();
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('GET /v1/owner/agents/{agent_id}/account answers the caps, usage and exposure the account holds, and a command per owner change', async () => {
    const view = await call('GET', `/v1/owner/agents/${agentId}/account`);
    const state = await readAccountState(node.client, account);
    const wallet = await s.db('wallets').where({ agent_id: agentId }).first();
    expect(view).to.include({ agent_id: agentId, custody: 'account', account, agent_wrapper_address: account, deployed: true, paused: false });
    expect(view.owner_signer).to.equal(state.owner);
    expect(view.agent_sender_address).to.equal(getAddress(wallet.lane_address));
    expect(view.policy_version).to.equal(state.policyVersion.toString());
    // The caps are the account's (read from the chain), not the database row's: equal here, and read from the chain.
    expect(view.limits).to.include({ per_tx_usd: formatAmount(state.limits!.perTxUsd, 8), per_period_usd: formatAmount(state.limits!.perPeriodUsd, 8) });
    expect(view.limits).to.include({ per_tx_usd: '10', per_period_usd: '30' });
    expect(view.exposure_usd).to.equal(formatAmount(state.allowance!.exposureUsd, 8));
    const keyFile = path.resolve(dir, 'owner-keys', `${(await s.db('agents').where({ id: agentId }).first()).owner_id}.key`);
    const commands = view.commands as Array<{ action: string; command: string }>;
    expect(commands.map((c) => c.action)).to.deep.equal(['set_policy', 'add_destination', 'add_recipient', 'cancel_one_off', 'pause', 'resume', 'rotate_lane_key']);
    for (const c of commands) expect(c.command, c.action).to.match(new RegExp(`^npm run --silent agentctl -- .* --owner-key-file ${keyFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
    expect(commands.find((c) => c.action === 'set_policy')!.command).to.contain(`agent set-policy ${agentId} --file policy.json`);
    expect(commands.find((c) => c.action === 'pause')!.command).to.contain(`agent disable ${agentId}`);
    expect(commands.find((c) => c.action === 'rotate_lane_key')!.command).to.contain(`agent rotate-lane-key ${agentId}`);
  });

  it("follows the chain: the owner's pause shows as paused, and usage after a payment is the account's", async () => {
    const key = await s.request('POST', `/v1/owner/agents/${agentId}/rotate-key`, { headers: admin, idempotencyKey: randomUUID() });
    expect(key.status).to.equal(200);
    const paid = await s.request('POST', '/v1/agent/payments', {
      headers: { 'x-agent-id': agentId, 'x-api-key': key.body.api_key },
      idempotencyKey: randomUUID(),
      body: { to: '0x00000000000000000000000000000000000000a1', asset: 'USDC', amount: '4' },
    });
    expect(paid.status, paid.text).to.equal(200);
    await s.settle([paid.body.operation_id]);
    const after = await call('GET', `/v1/owner/agents/${agentId}/account`);
    const state = await readAccountState(node.client, account);
    expect(after.usage.period_usd).to.equal(formatAmount(state.usage!.periodUsd, 8)).and.to.equal('4');
    await call('POST', `/v1/owner/agents/${agentId}/disable`, {});
    expect((await call('GET', `/v1/owner/agents/${agentId}/account`)).paused).to.equal(true);
    await call('POST', `/v1/owner/agents/${agentId}/enable`, {});
    expect((await call('GET', `/v1/owner/agents/${agentId}/account`)).paused).to.equal(false);
  });

  it('agentctl agent account prints the same view', async () => {
    const out = await json('agent', 'account', agentId, '--json');
    const view = await call('GET', `/v1/owner/agents/${agentId}/account`);
    delete view.ok;
    expect(out).to.deep.equal(view);
  });

  it('answers an account whose policy has no USD cap: exposure null (unbounded), not a 500', async () => {
    const owner = await call('POST', '/v1/admin/owners', { email: `uncapped-${randomUUID()}@example.com` });
    const uncapped = (await call('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'uncapped bot' })).agent_id;
    await call('PUT', `/v1/owner/agents/${uncapped}/policy`, { operation_types: ['payment'], allowed_recipients: 'all' });
    const view = await call('GET', `/v1/owner/agents/${uncapped}/account`);
    expect(view).to.include({ custody: 'account', deployed: true, exposure_usd: null });
    expect(view.limits).to.include({ per_tx_usd: null, per_period_usd: null, lifetime_usd: null });
  });

  it("the console shows the account read-only, offers no control that needs the owner's signature, and passes axe", async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    await page.goto(`${s.baseUrl}/console/`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('One-time code').fill(await mail.nextCode(email));
    await page.getByRole('button', { name: 'Sign in' }).click();
    // While the account view has not answered, no control that signs (or not) by it is offered: an owner who clicked
    // one then would send an unsigned change (a loaded suite run once caught 'Disable agent' offered in that window).
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/v1/owner/agents/*/account', async (route) => {
      await held;
      await route.continue();
    });
    await page.getByRole('link', { name: 'chain bot' }).click();
    await page.getByRole('button', { name: 'Rotate key' }).waitFor();
    await page.getByRole('heading', { name: 'Trusted destinations' }).waitFor();
    for (const name of ['Save policy', 'Disable agent', 'Propose destination']) expect(await page.getByRole('button', { name }).count(), `${name} before the account view`).to.equal(0);
    release();
    await page.unroute('**/v1/owner/agents/*/account');
    await page.getByRole('heading', { name: 'On-chain limits (read-only)' }).waitFor();
    const facts = page.getByLabel('Account on chain');
    expect(await facts.textContent()).to.contain(account);
    const caps = page.getByRole('region', { name: 'Caps and usage held by the account' });
    expect(await caps.textContent())
      .to.contain('$10.00')
      .and.contain('$30.00');
    const commands = page.getByRole('list', { name: 'agentctl commands for owner changes' });
    expect(await commands.textContent()).to.contain(`agent set-policy ${agentId} --file policy.json --owner-key-file`);
    // No control that would need the owner's signature: save, promote, disable, propose a destination.
    for (const name of ['Save policy', 'Disable agent', 'Propose destination']) expect(await page.getByRole('button', { name }).count(), name).to.equal(0);
    // What stays: validating a draft (no change), the API key rotation (not an account change).
    expect(await page.getByRole('button', { name: 'Validate' }).count()).to.equal(1);
    expect(await page.getByText(`destination add ${agentId}`).count()).to.be.greaterThan(0);
    await page.screenshot({ path: 'test-artifacts/console-onchain-readonly.png', fullPage: true });
    await expectAccessible(page, 'agent page, evm mode');
    await page.setViewportSize({ width: 375, height: 800 });
    // Drawn again at the phone's width (the chart is sized when drawn).
    await page.reload();
    await page.getByRole('heading', { name: 'On-chain limits (read-only)' }).waitFor();
    await expectAccessible(page, 'agent page, evm mode, 375 px');
    await page.close();
  });
});

describe('the account view on the simulated chain (issue 24)', function () {
  let srv: TestServer;
  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
  });
  after(async () => srv?.close());

  it('says the database enforces the limits: no account, no commands', async () => {
    const agent = await srv.createAgent({ policy: { operation_types: ['payment'], per_tx_usd: '10' } });
    const res = await srv.request('GET', `/v1/owner/agents/${agent.agentId}/account`, { headers: admin });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ custody: 'database', account: null, owner_signer: null, agent_wrapper_address: null, agent_sender_address: null, deployed: null, paused: null, exposure_usd: null });
    expect(res.body.commands).to.deep.equal([]);
    expect(res.body.limits.per_tx_usd).to.equal('10');
  });
});
