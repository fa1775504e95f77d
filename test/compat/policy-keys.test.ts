// Issue 26, item 5: the three policy keys Hightop's /self/limits shows and ours lacked, accepted by the owner's
// policy and enforced like the others (page api-reference/get-self-limits, reference/errors for cooldown_active).
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { SELLER_PAY_TO } from '../x402/seller.js';

describe('Hightop policy keys: tx_cooldown_blocks, max_swaps_per_period, fail_on_zero_price (issue 26, item 5)', function () {
  this.timeout(60_000);
  let s: LedgerServer;

  before(async () => {
    s = await startLedgerServer();
  });
  after(async () => {
    await s?.close();
  });

  const pay = (agent: Awaited<ReturnType<LedgerServer['agent']>>, amount = '1', asset = 'USDC') =>
    s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: SELLER_PAY_TO, asset, amount } });

  it('refuses a malformed key with validation_failed naming it', async () => {
    const agent = await s.agent({ policy: null });
    for (const bad of [{ tx_cooldown_blocks: -1 }, { tx_cooldown_blocks: 1.5 }, { max_swaps_per_period: 'two' }, { fail_on_zero_price: 'yes' }]) {
      const err = await s.services.ledger.policy.set(s.db, agent.agentId, { operation_types: ['payment'], ...bad }).then(
        () => null,
        (e: { code?: string; message?: string }) => e,
      );
      expect(err?.code, JSON.stringify(bad)).to.equal('validation_failed');
      expect(err?.message).to.contain(Object.keys(bad)[0]);
    }
  });

  it('shows the keys in /self/limits and keeps them in the stored policy', async () => {
    const agent = await s.agent({ policy: { operation_types: ['payment', 'conversion'], tx_cooldown_blocks: 15, max_swaps_per_period: 3, fail_on_zero_price: true } });
    const res = await s.request('GET', '/v1/agent/self/limits', { agent });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.spend_limits).to.include({ tx_cooldown_blocks: 15, fail_on_zero_price: true });
    expect(res.body.swap_limits).to.include({ max_swaps_per_period: 3 });
    expect(await s.services.ledger.policy.get(s.db, agent.agentId)).to.include({ tx_cooldown_blocks: 15, max_swaps_per_period: 3, fail_on_zero_price: true });
  });

  it('tx_cooldown_blocks: a second payment inside the cooldown is 403 cooldown_active with the wait; after it, accepted', async () => {
    // 30 blocks of 2 s: 60 s between counted operations.
    const agent = await s.agent({ policy: { operation_types: ['payment'], allowed_recipients: 'all', tx_cooldown_blocks: 30 }, fund: { USDC: '10' } });
    expect((await pay(agent)).status).to.equal(200);
    s.clock.advance(20_000);
    const early = await pay(agent);
    expect(early.status, early.text).to.equal(403);
    expect(early.body.error.code).to.equal('cooldown_active');
    expect(early.body.error.details).to.include({ cooldown_blocks: 30, retry_after_seconds: 40 });
    // Nothing was held for the refused payment.
    expect(await s.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).to.deep.equal({ available: 9_000_000n, held: 1_000_000n });
    s.clock.advance(40_000);
    expect((await pay(agent)).status).to.equal(200);
  });

  it('max_swaps_per_period: the conversion past the cap is 403 limit_exceeded naming max_swaps_per_period; payments do not count', async () => {
    const agent = await s.agent({ policy: { operation_types: ['payment', 'conversion'], allowed_recipients: 'all', max_swaps_per_period: 1 }, fund: { USDC: '20' } });
    expect((await pay(agent)).status).to.equal(200);
    const convert = async () => {
      const q = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'WETH', amount: '1' } });
      if (q.status !== 200) return q;
      return s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id: q.body.quote.quote_id }, idempotencyKey: newKey() });
    };
    const first = await convert();
    expect(first.status, first.text).to.equal(200);
    const second = await convert();
    expect(second.status, second.text).to.equal(403);
    expect(second.body.error.code).to.equal('limit_exceeded');
    expect(second.body.error.details).to.include({ limit: 'max_swaps_per_period', cap: 1, used: 1 });
    const limits = await s.request('GET', '/v1/agent/self/limits', { agent });
    expect(limits.body.current_usage).to.include({ swaps_in_period: 1, txs_in_period: 2 });
  });

  it('fail_on_zero_price: an operation valued at 0 USD is 422 price_stale when set, and counts as 0 USD when not', async () => {
    // A feed answering 0 (the far edge: our own price route refuses to record one).
    const before = await s.db('prices').where({ asset_symbol: 'EURC' }).first();
    await s.db('prices').where({ asset_symbol: 'EURC' }).update({ usd_e8: '0', observed_at: s.clock.now() });
    try {
      const strict = await s.agent({ policy: { operation_types: ['payment'], allowed_recipients: 'all', fail_on_zero_price: true }, fund: { EURC: '10' } });
      const refused = await pay(strict, '1', 'EURC');
      expect(refused.status, refused.text).to.equal(422);
      expect(refused.body.error.code).to.equal('price_stale');
      const lenient = await s.agent({ policy: { operation_types: ['payment'], allowed_recipients: 'all' }, fund: { EURC: '10' } });
      expect((await pay(lenient, '1', 'EURC')).status).to.equal(200);
    } finally {
      await s.db('prices').where({ asset_symbol: 'EURC' }).update({ usd_e8: before.usd_e8, observed_at: before.observed_at });
    }
  });

  describe('payees (issue 26, item 2)', () => {
    it('without allowed_recipients only approved payees are paid: a raw address is 403 recipient_not_allowed, nothing held', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '10' } });
      const res = await pay(agent);
      expect(res.status, res.text).to.equal(403);
      expect(res.body.error.code).to.equal('recipient_not_allowed');
      expect(res.body.error.details).to.include({ rule: 'approved_payees_only' });
      expect(await s.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).to.deep.equal({ available: 10_000_000n, held: 0n });
      const limits = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(limits.body.limits.allowed_recipients).to.equal('approved');
    });

    it('pays the owner\'s recipient by id, by its address, and by its e-mail-like handle; "all" pays any address', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '10' } });
      const vendor = '0x4444444444444444444444444444444444444444';
      const r = await s.services.ledger.payments.addRecipient(s.db, agent.agentId, { kind: 'recurring', name: 'billing@acme.example', address: vendor });
      for (const to of [r.recipient_id, vendor, 'billing@acme.example']) {
        const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to, asset: 'USDC', amount: '1' } });
        expect(res.status, `${to}: ${res.text}`).to.equal(200);
        const op = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}`, { agent });
        expect(op.body.operation.details ?? op.body.operation).to.not.equal(undefined);
      }
      const open = await s.agent({ policy: { operation_types: ['payment'], allowed_recipients: 'all' }, fund: { USDC: '10' } });
      expect((await pay(open)).status).to.equal(200);
      // "approved" is accepted in a policy as the same as no list.
      const same = await s.services.ledger.policy.set(s.db, open.agentId, { operation_types: ['payment'], allowed_recipients: 'approved' });
      expect(same.allowed_recipients).to.equal(undefined);
      expect((await pay(open)).status).to.equal(403);
    });
  });
});
