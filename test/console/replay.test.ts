// Issue 28, acceptance 5: the console shows a replay before a policy is saved (daily spend under the recorded and the
// candidate policy against the cap, the writes whose outcome changes) and the agent's shadow policy with its
// differing decisions; axe-clean on the desktop and at 375 px; screenshots in docs/console/.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { adminApi, expectAccessible, startConsoleEnv, type ConsoleEnv } from './helpers.js';

const VIEWPORTS = [
  ['desktop', { width: 1100, height: 900 }],
  ['375', { width: 375, height: 740 }],
] as const;

describe('owner console: policy replay and shadow policy (Chromium)', function () {
  this.timeout(180_000);
  let env: ConsoleEnv;
  before(async () => {
    env = await startConsoleEnv();
  });
  after(async () => {
    await env?.close();
  });

  it('replays the edited policy as a chart and a list of changed writes, and lists the shadow policy and its decisions', async () => {
    const api = adminApi(env.srv);
    const email = `replay-${randomUUID()}@example.com`;
    const owner = await api('POST', '/v1/admin/owners', { email });
    const agent = await api('POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'replay bot' });
    await api('POST', `/v1/owner/agents/${agent.agent_id}/fund`, { asset: 'USDC', amount: '500' });
    await api('PUT', `/v1/owner/agents/${agent.agent_id}/policy`, { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_period_usd: '1000', period: 'day' });
    // Two weeks of history before today (as live writes record them, in lock order before today's), so the chart has days to show.
    const wallet = (await api('GET', `/v1/owner/agents/${agent.agent_id}`)).agent.wallet_id as string;
    const seeded = [];
    for (let d = 15; d >= 2; d--) {
      const day = new Date(Date.now() - d * 86_400_000).toISOString().slice(0, 10);
      for (const [hour, usd] of [
        [9, ((d * 13) % 50) + 20],
        [12, ((d * 7) % 40) + 25],
        [15, ((d * 11) % 30) + 15],
      ] as const) {
        const at = new Date(`${day}T${String(hour).padStart(2, '0')}:00:00.000Z`);
        const id = randomUUID();
        const usdE8 = String(BigInt(usd) * 100_000_000n);
        const facts = {
          v: 1,
          at: at.toISOString(),
          type: 'payment',
          asset: 'USDC',
          usd_e8: usdE8,
          counts: true,
          recipient: { ids: [], address: '0x000000000000000000000000000000000000dead' },
          protocol: null,
          slippage_bps: null,
          ltv_bps: null,
          allowed: true,
          code: null,
          key: null,
        };
        seeded.push({
          id,
          agent_id: agent.agent_id,
          wallet_id: wallet,
          type: 'payment',
          status: 'executed',
          resource_type: 'payment',
          resource_id: id,
          asset_symbol: 'USDC',
          amount: String(usd * 1_000_000),
          amount_usd_e8: usdE8,
          fee_usd_e8: '0',
          counts_toward_limits: true,
          human_message: `Paying ${usd} USDC`,
          details: JSON.stringify({}),
          to_address: '0x000000000000000000000000000000000000dEaD',
          created_at: at,
          updated_at: at,
          executed_at: at,
          policy_facts: JSON.stringify(facts),
        });
      }
    }
    await env.srv.db('operations').insert(seeded);
    // Stricter shadow: 40 USD a payment.
    await api('PUT', `/v1/owner/agents/${agent.agent_id}/shadow-policy`, { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_tx_usd: '40', period: 'day' });
    for (const amount of ['60', '50', '30', '10']) {
      const res = await env.srv.request('POST', '/v1/agent/payments', {
        headers: { 'x-agent-id': agent.agent_id, 'x-api-key': agent.api_key },
        body: { to: '0x000000000000000000000000000000000000dEaD', asset: 'USDC', amount },
        idempotencyKey: randomUUID(),
      });
      expect(res.status, res.text).to.equal(200);
    }
    const candidate = { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_period_usd: '100', period: 'day' };
    // The route itself: 60 allowed, 50 refused (110 > 100), 30 and 10 allowed (the refusal freed their room: 100 <= 100).
    const replay = await api('POST', `/v1/owner/agents/${agent.agent_id}/policy/replay`, { policy: candidate, since: new Date(Date.now() - 86_400_000).toISOString() });
    expect(replay.counts).to.deep.equal({ operations: 4, unchanged: 3, newly_refused: 1, newly_allowed: 0 });
    const full = await api('POST', `/v1/owner/agents/${agent.agent_id}/policy/replay`, { policy: candidate, since: new Date(Date.now() - 30 * 86_400_000).toISOString() });
    expect(full.counts.operations).to.equal(4 + seeded.length);
    expect(full.counts.newly_refused).to.be.greaterThan(1);
    const decisions = await api('GET', `/v1/owner/agents/${agent.agent_id}/shadow-decisions`);
    expect(decisions.decisions.map((d: { amount_usd: string }) => d.amount_usd)).to.deep.equal(['50', '60']);

    for (const [size, viewport] of VIEWPORTS) {
      const context = await env.browser.newContext({ viewport });
      const page = await context.newPage();
      await page.goto(`${env.srv.baseUrl}/console/`);
      await page.getByLabel('E-mail address').fill(email);
      await page.getByRole('button', { name: 'Send me a code' }).click();
      await page.getByLabel('One-time code').fill(await env.mail.nextCode(email));
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Agents' }).waitFor();
      await page.goto(`${env.srv.baseUrl}/console/#/agents/${agent.agent_id}`);

      // The shadow policy and its two differing decisions.
      await page.getByRole('heading', { name: 'Shadow policy' }).waitFor();
      const shadowTable = page.getByRole('table', { name: 'Writes the shadow policy decides differently' });
      await shadowTable.waitFor();
      expect(await shadowTable.locator('tbody tr').count()).to.equal(2);
      expect(await shadowTable.getByRole('cell', { name: 'refused: limit_exceeded (per_tx_usd)' }).count()).to.equal(2);
      await page.getByRole('table', { name: 'Writes the shadow policy decides differently' }).scrollIntoViewIfNeeded();
      await page.screenshot({ path: `docs/console/shadow-${size}.png`, fullPage: true });

      // Replay the edited policy before saving it.
      await page.getByLabel('Policy (JSON, contract §9 keys)').fill(JSON.stringify(candidate, null, 2));
      await page.getByRole('button', { name: 'Replay last 30 days' }).click();
      const changed = page.getByRole('table', { name: 'Writes whose outcome changes' });
      await changed.waitFor();
      expect(await changed.locator('tbody tr').count()).to.equal(full.counts.newly_refused);
      expect(await changed.getByRole('cell', { name: 'refused: limit_exceeded (per_period_usd)' }).count()).to.equal(full.counts.newly_refused);
      await page.getByText(`${full.counts.operations} writes: ${full.counts.unchanged} unchanged, ${full.counts.newly_refused} newly refused, 0 newly allowed.`).waitFor();
      const sum = (f: 'recorded_usd' | 'candidate_usd') => full.days.reduce((t: number, d: Record<string, string>) => t + Number(d[f]), 0).toFixed(2);
      const chart = page.getByRole('img', { name: `Daily spend over 15 days: ${sum('recorded_usd')} USD recorded, ${sum('candidate_usd')} USD under the candidate, cap 100 USD a day.` });
      await chart.waitFor();
      expect(await chart.locator('canvas').count()).to.be.greaterThan(0);
      // The policy was not saved: the live policy still has its cap of 1000.
      expect((await api('GET', `/v1/owner/agents/${agent.agent_id}/policy`)).policy.per_period_usd).to.equal('1000');
      await chart.scrollIntoViewIfNeeded();
      await page.screenshot({ path: `docs/console/replay-${size}.png`, fullPage: false });
      const summary = await expectAccessible(page, `${size} agent page with a replay`);
      expect(
        summary.violations.map((v) => `${v.impact} ${v.id} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
        size,
      ).to.deep.equal([]);
      await context.close();
    }
  });
});
