// The owner's overview and spending per day (issue 27, the console's overview and chart): balances valued in USD with
// a total, what the caps still allow, pending approvals, exposure (null off chain); USD per UTC day on the injected clock.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';

const PAYEE = '0x00000000000000000000000000000000000000b7';
const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('owner overview', function () {
  this.timeout(60_000);
  let srv: LedgerServer;
  before(async () => {
    srv = await startLedgerServer({ ADMIN_TOKEN: ADMIN });
  });
  after(async () => srv.close());

  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    srv.request(method, path, { headers, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });

  async function setUp() {
    srv.clock.set('2026-03-02T10:00:00.000Z');
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email: `o-${randomUUID()}@example.com` })).owner_id;
    const policy = { operation_types: 'all', allowed_recipients: 'all', per_period_usd: '200', period: 'day', lifetime_usd: '1000', approval_threshold_usd: '80' };
    const spender = await srv.createAgent({ ownerId, name: 'spender', policy, fund: { USDC: '500' } });
    const idle = await srv.createAgent({ ownerId, name: 'idle', fund: { USDC: '20' } });
    const { token } = await srv.services.owner.createToken(srv.db, ownerId);
    return { spender, idle, auth: { authorization: `Bearer ${token}` } };
  }
  const pay = (agent: Awaited<ReturnType<typeof setUp>>['spender'], amount: string) =>
    srv.request('POST', '/v1/agent/payments', { agent, body: { to: PAYEE, asset: 'USDC', amount }, idempotencyKey: randomUUID() });

  describe('ownerGetOverview', () => {
    it('lists each agent with USD balances, a total, the caps left, pending approvals and no exposure off chain', async () => {
      const { spender, idle, auth } = await setUp();
      expect((await pay(spender, '30')).status).to.equal(200);
      const held = await pay(spender, '90');
      expect(held.body.approval, held.text).to.include({ state: 'pending' });
      const res = await call('GET', '/v1/owner/overview', auth);
      expect(res.status, res.text).to.equal(200);
      const byName = Object.fromEntries(res.body.items.map((i: { name: string }) => [i.name, i]));
      expect(Object.keys(byName)).to.have.members(['spender', 'idle']);
      const s = byName.spender;
      // The 90 held for approval counts toward the caps, as an accepted write does.
      expect(s.agent_id).to.equal(spender.agentId);
      expect(s).to.include({
        status: 'active',
        period: 'day',
        per_period_usd: '200',
        period_spent_usd: '120',
        period_remaining_usd: '80',
        lifetime_usd: '1000',
        lifetime_spent_usd: '120',
        lifetime_remaining_usd: '880',
        pending_approvals: 1,
        exposure_usd: null,
      });
      expect(s.balances).to.have.length(1);
      expect(s.balances[0].asset).to.equal('USDC');
      expect(Number(s.balances[0].value_usd)).to.equal(Number(s.balances[0].amount));
      expect(Number(s.total_usd)).to.equal(Number(s.balances[0].value_usd));
      const i = byName.idle;
      expect(i.agent_id).to.equal(idle.agentId);
      expect(i).to.include({ per_period_usd: null, period_remaining_usd: null, lifetime_remaining_usd: null, pending_approvals: 0, total_usd: '20' });
      expect(Number(res.body.total_usd)).to.equal(Number(s.total_usd) + 20);
    });

    it('shows another owner none of these agents', async () => {
      await setUp();
      const other = await setUp();
      const res = await call('GET', '/v1/owner/overview', other.auth);
      expect(res.body.items.map((i: { agent_id: string }) => i.agent_id)).to.have.members([other.spender.agentId, other.idle.agentId]);
    });
  });

  describe('ownerGetSpending', () => {
    it('sums USD per UTC day on the injected clock, every day listed, beside the period cap', async () => {
      const { spender, idle, auth } = await setUp();
      srv.clock.set('2026-03-02T23:30:00.000Z');
      await pay(spender, '10');
      await pay(spender, '15');
      srv.clock.set('2026-03-04T00:10:00.000Z');
      await pay(spender, '40');
      srv.clock.set('2026-03-06T12:00:00.000Z');
      const res = await call('GET', `/v1/owner/agents/${spender.agentId}/spending?days=7`, auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ agent_id: spender.agentId, period: 'day', per_period_usd: '200' });
      expect(res.body.days).to.deep.equal([
        { date: '2026-02-28', spent_usd: '0', txs: 0 },
        { date: '2026-03-01', spent_usd: '0', txs: 0 },
        { date: '2026-03-02', spent_usd: '25', txs: 2 },
        { date: '2026-03-03', spent_usd: '0', txs: 0 },
        { date: '2026-03-04', spent_usd: '40', txs: 1 },
        { date: '2026-03-05', spent_usd: '0', txs: 0 },
        { date: '2026-03-06', spent_usd: '0', txs: 0 },
      ]);
      const dflt = await call('GET', `/v1/owner/agents/${idle.agentId}/spending`, auth);
      expect(dflt.body.days).to.have.length(30);
      expect(dflt.body.days[29].date).to.equal('2026-03-06');
      expect(dflt.body.per_period_usd).to.equal(null);
    });

    it('is not_found for another owner’s agent and refuses a window over a year', async () => {
      const mine = await setUp();
      const theirs = await setUp();
      expect((await call('GET', `/v1/owner/agents/${theirs.spender.agentId}/spending`, mine.auth)).status).to.equal(404);
      expect((await call('GET', `/v1/owner/agents/${mine.spender.agentId}/spending?days=400`, mine.auth)).status).to.equal(400);
    });
  });
});
