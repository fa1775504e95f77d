// Route tests of tag conversions (response validation on): quote, execute, list, detail and their errors.
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from './http-helpers.js';

describe('conversions routes', () => {
  let s: DefiServer;
  before(async () => {
    s = await startDefiServer();
  });
  after(async () => {
    await s.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
    await s.close();
  });
  afterEach(async () => {
    await s.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
  });

  const quote = (agent: Awaited<ReturnType<DefiServer['agent']>>, body: Record<string, unknown>) => s.request('POST', '/v1/agent/conversions/quote', { agent, body, idempotencyKey: newKey() });

  describe('createConversionQuote', () => {
    it('answers 200 with a stored quote', async () => {
      const agent = await s.agent();
      const res = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1000', slippage_percent: 0.5 });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.quote).to.include({ from_asset: 'USDC', to_asset: 'WETH', from_amount: '1000', expected_out: '0.332333333333333333', slippage_percent: 0.5, expires_in_seconds: 60 });
      expect(res.body.quote.min_amount_out).to.equal('0.330671666666666666');
    });

    it('answers 400 validation_failed for both amounts, and without an Idempotency-Key', async () => {
      const agent = await s.agent();
      expect((await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1', amount_usd: '1' })).status).to.equal(400);
      const res = await s.request('POST', '/v1/agent/conversions/quote', { agent, body: { from_asset: 'USDC', to_asset: 'WETH', amount: '1' } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    });

    it('answers 403 permission_not_granted without a policy and 403 limit_exceeded above max_slippage_bps', async () => {
      const denied = await s.agent({ policy: null });
      expect((await quote(denied, { from_asset: 'USDC', to_asset: 'WETH', amount: '1' })).body.error.code).to.equal('permission_not_granted');
      const capped = await s.agent({ policy: { operation_types: ['conversion'], max_slippage_bps: 20 } });
      const res = await quote(capped, { from_asset: 'USDC', to_asset: 'WETH', amount: '1', slippage_percent: 1 });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
    });

    it('answers 404 for an unknown vault address and 422 insufficient_funds and price_stale', async () => {
      const agent = await s.agent({ funds: { USDC: '5' } });
      expect((await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1', from_vault_address: '0x9999999999999999999999999999999999999999' })).status).to.equal(404);
      const poor = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '6' });
      expect([poor.status, poor.body.error.code]).to.deep.equal([422, 'insufficient_funds']);
      await s.services.ledger.ledger.setPrice(s.db, 'WETH', '3000', new Date(s.clock.now().getTime() - 7200_000));
      const stale = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1' });
      expect([stale.status, stale.body.error.code]).to.deep.equal([422, 'price_stale']);
    });
  });

  describe('createConversion', () => {
    it('answers 200 accepted, settles to executed, lists and details the operation, and replays by key', async () => {
      const agent = await s.agent();
      const q = (await quote(agent, { from_asset: 'USDC', to_asset: 'EURC', amount: '108' })).body.quote;
      const key = newKey();
      const res = await s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id: q.quote_id }, idempotencyKey: key });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ ok: true, status: 'accepted' });
      expect(res.body.resource).to.deep.equal({ type: 'conversion', id: res.body.operation_id });
      const replay = await s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id: q.quote_id }, idempotencyKey: key });
      expect(replay.status).to.equal(200);
      expect(replay.body.operation_id).to.equal(res.body.operation_id);
      expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
      await s.settle();
      const detail = await s.request('GET', `/v1/agent/conversions/${res.body.operation_id}?include=onchain`, { agent });
      expect(detail.status, JSON.stringify(detail.body)).to.equal(200);
      expect(detail.body.operation).to.include({ type: 'conversion', status: 'executed', asset_symbol: 'USDC', amount: '108' });
      const list = await s.request('GET', '/v1/agent/conversions?limit=10', { agent });
      expect(list.status).to.equal(200);
      expect(list.body.items.map((i: { id: string }) => i.id)).to.deep.equal([res.body.operation_id]);
      expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'EURC')).available).to.equal(99_950_000n);
    });

    it('answers 409 quote_expired, 409 quote_already_consumed, 404 not_found and 422 slippage_exceeded', async () => {
      const agent = await s.agent();
      const exec = (quote_id: string) => s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id }, idempotencyKey: newKey() });
      const q1 = (await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' })).body.quote;
      expect((await exec(q1.quote_id)).status).to.equal(200);
      const again = await exec(q1.quote_id);
      expect([again.status, again.body.error.code]).to.deep.equal([409, 'quote_already_consumed']);
      const q2 = (await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' })).body.quote;
      s.clock.advance(61_000);
      const expired = await exec(q2.quote_id);
      expect([expired.status, expired.body.error.code]).to.deep.equal([409, 'quote_expired']);
      expect((await exec('00000000-0000-4000-8000-000000000000')).status).to.equal(404);
      const q3 = (await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '10', slippage_percent: 0.1 })).body.quote;
      await s.services.ledger.ledger.setPrice(s.db, 'WETH', '3010');
      const slipped = await exec(q3.quote_id);
      expect([slipped.status, slipped.body.error.code]).to.deep.equal([422, 'slippage_exceeded']);
    });

    it('lets exactly one of 50 concurrent executions of one quote succeed', async () => {
      const agent = await s.agent();
      const q = (await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '100' })).body.quote;
      const results = await Promise.all(Array.from({ length: 50 }, () => s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id: q.quote_id }, idempotencyKey: newKey() })));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((x) => x === 200)).to.have.length(1);
      expect(results.filter((r) => r.status === 409 && r.body.error.code === 'quote_already_consumed')).to.have.length(49);
      expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available).to.equal(9_900_000_000n);
    });
  });

  it('simulates a quote execution without changing rows', async () => {
    const agent = await s.agent();
    const q = (await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' })).body.quote;
    const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/conversions', body: { quote_id: q.quote_id } } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.would_succeed, JSON.stringify(res.body)).to.equal(true);
    expect(await s.db('conversion_quote_consumptions').where({ quote_id: q.quote_id })).to.have.length(0);
    expect(await s.db('operations').where({ agent_id: agent.agentId })).to.have.length(0);
  });
});
