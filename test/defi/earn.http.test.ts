// Route tests of tag earn (response validation on): positions, opportunities, deposit, withdraw, move, rewards.
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from './http-helpers.js';

const YEAR_MS = 365 * 24 * 3600 * 1000;

describe('earn routes', () => {
  let s: DefiServer;
  before(async () => {
    s = await startDefiServer();
  });
  after(async () => {
    await s.db('earn_vaults').where('name', 'like', 'http %').update({ active: false });
    await s.close();
  });

  const vault = (opts: { apyBps?: number; capacity?: string; rewardBps?: number; protocol?: string } = {}) =>
    s.services.defi.earn.addVault(s.db, {
      name: `http ${Math.random().toString(36).slice(2, 8)}`,
      protocol: opts.protocol ?? 'morpho',
      asset: 'USDC',
      apyBps: opts.apyBps ?? 500,
      capacity: opts.capacity ?? null,
      rewardAsset: opts.rewardBps ? 'USDC' : null,
      rewardBps: opts.rewardBps,
    });
  const post = (agent: Awaited<ReturnType<DefiServer['agent']>>, path: string, body: Record<string, unknown>) => s.request('POST', `/v1/agent/earn/${path}`, { agent, body, idempotencyKey: newKey() });

  it('deposits, reads, accrues, moves, claims and withdraws through the routes', async () => {
    const agent = await s.agent();
    const a = await vault({ apyBps: 1000, rewardBps: 100, protocol: 'moonwell' });
    const b = await vault({ apyBps: 1200 });
    const dep = await post(agent, 'deposit', { asset: 'USDC', vault_id: a.vault_id, amount: '1000' });
    expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
    expect(dep.body).to.include({ status: 'executed' });
    const positionId = dep.body.resource.id;

    const list = await s.request('GET', '/v1/agent/earn', { agent });
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    expect(list.body.items.map((p: { id: string }) => p.id)).to.deep.equal([positionId]);
    s.clock.advance(YEAR_MS);
    const detail = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    expect(detail.status, JSON.stringify(detail.body)).to.equal(200);
    expect(Number(detail.body.position.earned)).to.be.closeTo(100, 0.00001);
    expect(detail.body.position.pending_rewards).to.deep.equal([{ asset_symbol: 'USDC', amount: '10' }]);

    const opportunities = await s.request('GET', '/v1/agent/earn/opportunities?limit=100', { agent });
    expect(opportunities.status, JSON.stringify(opportunities.body)).to.equal(200);
    expect(opportunities.body.items.map((o: { vault_id: string }) => o.vault_id)).to.include.members([a.vault_id, b.vault_id]);

    const claim = await post(agent, 'rewards/claim', { protocols: ['moonwell'] });
    expect(claim.status, JSON.stringify(claim.body)).to.equal(200);
    const none = await post(agent, 'rewards/claim', {});
    expect([none.status, none.body.error.code]).to.deep.equal([409, 'invalid_state_transition']);

    const move = await post(agent, 'move', { from_position_id: positionId, to_best_available: true, amount: '500' });
    expect(move.status, JSON.stringify(move.body)).to.equal(200);
    const withdraw = await post(agent, 'withdraw', { position_id: positionId, withdraw_all: true });
    expect(withdraw.status, JSON.stringify(withdraw.body)).to.equal(200);
    const events = (await s.db('events').where({ agent_id: agent.agentId }).select('type')).map((e) => e.type);
    expect(events).to.include.members(['earn.deposit.executed', 'rewards.claimed', 'earn.move.executed', 'earn.withdraw.executed']);
  });

  it('answers 400, 403, 404 and 422 for refused deposits and withdrawals', async () => {
    const agent = await s.agent({ funds: { USDC: '100' } });
    const v = await vault({ capacity: '50' });
    expect((await post(agent, 'deposit', { asset: 'USDC', vault_id: v.vault_id, use_best_available: true, amount: '1' })).status).to.equal(400);
    const full = await post(agent, 'deposit', { asset: 'USDC', vault_id: v.vault_id, amount: '51' });
    expect([full.status, full.body.error.code]).to.deep.equal([403, 'limit_exceeded']);
    const missing = await post(agent, 'deposit', { asset: 'USDC', vault_id: '00000000-0000-4000-8000-000000000000', amount: '1' });
    expect(missing.status).to.equal(404);
    const poor = await post(agent, 'deposit', { asset: 'USDC', vault_id: (await vault()).vault_id, amount: '101' });
    expect([poor.status, poor.body.error.code]).to.deep.equal([422, 'insufficient_funds']);
    expect((await s.request('GET', '/v1/agent/earn/00000000-0000-4000-8000-000000000000', { agent })).status).to.equal(404);
    expect((await post(agent, 'withdraw', { position_id: '00000000-0000-4000-8000-000000000000', withdraw_all: true })).status).to.equal(404);
    const restricted = await s.agent({ policy: { operation_types: ['earn.deposit'], allowed_protocols: ['aave-v3'] } });
    const refused = await post(restricted, 'deposit', { asset: 'USDC', vault_id: v.vault_id, amount: '1' });
    expect([refused.status, refused.body.error.code]).to.deep.equal([403, 'protocol_not_allowed']);
  });

  it('simulates a deposit without changing rows', async () => {
    const agent = await s.agent();
    const v = await vault();
    const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/earn/deposit', body: { asset: 'USDC', vault_id: v.vault_id, amount: '10' } } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.would_succeed, JSON.stringify(res.body)).to.equal(true);
    expect(await s.db('earn_positions').where({ agent_id: agent.agentId })).to.have.length(0);
    expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available).to.equal(10_000_000_000n);
  });

  it('finalises a deposit into a failing vault address as execution_failed, moving nothing and emitting no executed event', async () => {
    const agent = await s.agent();
    const v = await vault({ apyBps: 700 });
    const address = (await s.db('earn_vaults').where({ id: v.vault_id }).first()).address as string;
    const balanceBefore = await s.request('GET', '/v1/agent/balances', { agent });
    await s.services.ledger.ledger.setFailingAddress(s.db, address, true);
    try {
      const dep = await post(agent, 'deposit', { asset: 'USDC', vault_id: v.vault_id, amount: '25' });
      expect(dep.status, dep.text).to.equal(200);
      expect(dep.body.status).to.equal('execution_failed');
      const op = await s.request('GET', `/v1/agent/operations/${dep.body.operation_id}`, { agent });
      expect(op.body.operation).to.include({ status: 'execution_failed', type: 'earn.deposit' });
      expect(op.body.operation.error.code).to.equal('settlement_failed');
      expect((await s.request('GET', '/v1/agent/earn', { agent })).body.items).to.deep.equal([]);
      expect((await s.request('GET', '/v1/agent/balances', { agent })).body.items).to.deep.equal(balanceBefore.body.items);
      const events = await s.db('events').where({ agent_id: agent.agentId, operation_id: dep.body.operation_id });
      expect(events.map((e) => e.type)).to.deep.equal([]);
      const activity = await s.request('GET', '/v1/agent/activity', { agent });
      expect(activity.body.items.some((a: { operation_id: string }) => a.operation_id === dep.body.operation_id)).to.equal(true);
    } finally {
      await s.services.ledger.ledger.setFailingAddress(s.db, address, false);
    }
  });
});
