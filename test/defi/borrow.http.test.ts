// Route tests of tag borrow (response validation on): summary, collateral, borrow, repay, deleverage, remove.
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from './http-helpers.js';

describe('borrow routes', () => {
  let s: DefiServer;
  before(async () => {
    s = await startDefiServer();
  });
  after(async () => {
    await s.close();
  });

  const post = (agent: Awaited<ReturnType<DefiServer['agent']>>, path: string, body: Record<string, unknown>) =>
    s.request('POST', `/v1/agent/borrow${path}`, { agent, body, idempotencyKey: newKey() });

  it('answers the summary of an empty account', async () => {
    const agent = await s.agent();
    const res = await s.request('GET', '/v1/agent/borrow', { agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.borrow).to.include({ collateral_value_usd: '0', debt_usd: '0', ltv: 0, health_factor: null, liquidation_price_usd: null });
  });

  it('adds collateral, borrows, repays, deleverages and removes collateral through the routes', async () => {
    const agent = await s.agent({ funds: { WETH: '2', USDC: '500' } });
    const add = await post(agent, '/collateral/add', { asset: 'WETH', amount: '2' });
    expect(add.status, JSON.stringify(add.body)).to.equal(200);
    const borrow = await post(agent, '', { asset: 'USDC', amount_usd: '3000', max_ltv_after: 0.6 });
    expect(borrow.status, JSON.stringify(borrow.body)).to.equal(200);
    const tooHigh = await post(agent, '', { asset: 'USDC', amount: '2000', max_ltv_after: 0.6 });
    expect([tooHigh.status, tooHigh.body.error.code]).to.deep.equal([403, 'ltv_too_high']);

    const summary = await s.request('GET', '/v1/agent/borrow', { agent });
    expect(summary.status, JSON.stringify(summary.body)).to.equal(200);
    expect(summary.body.borrow).to.include({ collateral_value_usd: '6000', debt_usd: '3000', ltv: 0.5, health_factor: 1.66 });
    const collateral = await s.request('GET', '/v1/agent/borrow/collateral', { agent });
    expect(collateral.status, JSON.stringify(collateral.body)).to.equal(200);
    expect(collateral.body.items).to.deep.equal([{ asset_symbol: 'WETH', amount: '2', amount_usd: '6000', price_usd: '3000', max_ltv: 0.805, liquidation_threshold: 0.83 }]);

    const repay = await post(agent, '/repay', { asset: 'USDC', amount: '600' });
    expect(repay.status, JSON.stringify(repay.body)).to.equal(200);
    const deleverage = await post(agent, '/deleverage', { target_ltv: 0.3, allow_conversion: true });
    expect(deleverage.status, JSON.stringify(deleverage.body)).to.equal(200);
    const unreachable = await post(agent, '/deleverage', { target_ltv: 0.1, max_repay_amount_usd: '1' });
    expect([unreachable.status, unreachable.body.error.code]).to.deep.equal([409, 'ltv_target_unreachable']);

    const removeTooMuch = await post(agent, '/collateral/remove', { asset: 'WETH', remove_all: true });
    expect([removeTooMuch.status, removeTooMuch.body.error.code]).to.deep.equal([403, 'ltv_too_high']);
    const remove = await post(agent, '/collateral/remove', { asset: 'WETH', amount: '0.1' });
    expect(remove.status, JSON.stringify(remove.body)).to.equal(200);
    const repayAll = await post(agent, '/repay', { asset: 'USDC', repay_all: true });
    expect(repayAll.status, JSON.stringify(repayAll.body)).to.equal(200);
    const nothing = await post(agent, '/repay', { asset: 'USDC', repay_all: true });
    expect([nothing.status, nothing.body.error.code]).to.deep.equal([409, 'invalid_state_transition']);
    const types = (await s.db('events').where({ agent_id: agent.agentId }).select('type')).map((e) => e.type);
    expect(types).to.include.members(['collateral.added', 'debt.borrowed', 'debt.repaid', 'debt.deleveraged', 'collateral.removed']);
  });

  it('answers 400 for both amounts and 422 price_stale on a stale collateral price', async () => {
    const agent = await s.agent({ funds: { WETH: '1' } });
    expect((await post(agent, '', { asset: 'USDC', amount: '1', amount_usd: '1' })).status).to.equal(400);
    expect((await post(agent, '/collateral/add', { asset: 'WETH', amount: '1' })).status).to.equal(200);
    await s.services.ledger.ledger.setPrice(s.db, 'WETH', '3000', new Date(s.clock.now().getTime() - 7200_000));
    try {
      const stale = await post(agent, '', { asset: 'USDC', amount: '1' });
      expect([stale.status, stale.body.error.code]).to.deep.equal([422, 'price_stale']);
      expect((await s.request('GET', '/v1/agent/borrow', { agent })).status).to.equal(200);
    } finally {
      await s.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
    }
  });

  it('simulates a borrow without changing rows', async () => {
    const agent = await s.agent({ funds: { WETH: '1' } });
    await post(agent, '/collateral/add', { asset: 'WETH', amount: '1' });
    const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/borrow', body: { asset: 'USDC', amount: '100' } } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.would_succeed, JSON.stringify(res.body)).to.equal(true);
    expect(await s.db('borrow_debts').where({ wallet_id: agent.walletId })).to.have.length(0);
  });
});
