// Issue 26: an agent written against Hightop's Agent API docs runs here unchanged. Each `describe` names the Hightop
// page (https://www.hightop.com/docs/<page>) whose request examples it replays, in our own paraphrase, against a live
// server (responses validated against the OpenAPI document), and checks the fields and codes that page documents.
import { expect } from 'chai';
import { createSealer } from '../../src/lib/crypto.js';
import { createX402Service } from '../../src/services/x402/service.js';
import { newKey } from '../helpers/server.js';
import { checksumTables, startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { SELLER_PAY_TO, startSeller, type Seller } from '../x402/seller.js';

describe('Hightop compatibility (issue 26)', function () {
  this.timeout(60_000);
  let s: LedgerServer;
  let seller: Seller;

  before(async () => {
    s = await startLedgerServer({ UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' });
    // The seller's facilitator checks validBefore against real time.
    s.clock.set(new Date());
    seller = await startSeller();
    (s.services as { x402: unknown }).x402 = createX402Service({ config: s.config, sealer: createSealer(s.config.masterKey), clock: s.clock, ledger: s.ledger, ca: seller.ca });
  });
  after(async () => {
    await seller?.close();
    await s?.close();
  });

  const usdcBalance = (walletId: string) => s.ledger.ledger.balance(s.db, walletId, 'USDC');

  describe('page api-and-integrations/recipes/pay-with-x402 and api-and-integrations/x402', () => {
    it('quote: a GET of a paid URL reports supported, x402_required and the price (base units beside the USDC figure)', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/v2/paid-api'), method: 'GET' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ ok: true, supported: true, x402_required: true });
      expect(res.body.price).to.include({ amount: '1.5', amount_base_units: '1500000', asset_symbol: 'USDC' });
    });

    it('sign: amount "1000000" is 1 USDC in base units; the answer carries payment_header, payment_header_name and payment_headers', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: `x402-${newKey()}`, body: { target_url: 'https://example.com/paid-api', pay_to: SELLER_PAY_TO, amount: '1000000' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.payment_header).to.be.a('string').and.not.equal('');
      expect(res.body.payment_headers).to.deep.equal({ [res.body.payment_header_name]: res.body.payment_header });
      expect(res.body.amount).to.equal('1000000');
      // One USDC held, not a million (nor refused as insufficient funds).
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 4_000_000n, held: 1_000_000n });
    });

    it('sign: a decimal amount is validation_failed', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: newKey(), body: { pay_to: SELLER_PAY_TO, amount: '1.5' } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    });

    it('purchase: max_amount "1000000" (1 USDC) against a seller asking 1.5 USDC is refused before signing and moves nothing', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const paidBefore = seller.requests.filter((r) => r.headers['payment-signature'] || r.headers['x-payment']).length;
      const settlementsBefore = seller.settlements.length;
      const before = await checksumTables(s.db);
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: `x402-${newKey()}`, body: { url: seller.url('/v2/paid-api'), max_amount: '1000000', method: 'GET' } });
      expect(res.status, res.text).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
      expect(res.body.error.details).to.include({ limit: 'max_amount', price: '1500000', max_amount: '1000000' });
      expect(seller.requests.filter((r) => r.headers['payment-signature'] || r.headers['x-payment'])).to.have.length(paidBefore);
      expect(seller.settlements).to.have.length(settlementsBefore);
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 5_000_000n, held: 0n });
      const after = await checksumTables(s.db);
      // Nothing written but the idempotency record of the refused request.
      delete before.idempotency_keys;
      delete after.idempotency_keys;
      expect(after).to.deep.equal(before);
    });

    it('purchase: max_amount "2000000" pays the 1.5 USDC seller and answers operation_id, paid, seller_accepted, settled and the upstream response', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: `x402-${newKey()}`, body: { url: seller.url('/v2/paid-api'), max_amount: '2000000', method: 'GET' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ paid: true, seller_accepted: true, status: 200 });
      expect(res.body.operation_id).to.be.a('string');
      expect(res.body.settled).to.be.a('boolean');
      expect(res.body.body).to.deep.equal({ result: 'paid content' });
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 3_500_000n, held: 0n });
    });

    it('purchase: a decimal max_amount is validation_failed and never reaches the seller', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const seen = seller.requests.length;
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: newKey(), body: { url: seller.url('/v2/paid-api'), max_amount: '1.5' } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(seller.requests).to.have.length(seen);
    });
  });

  describe('page api-reference/get-self', () => {
    it('GET /self answers agent.wallet_address, agent.active_window, permissions, limits per class, cannot and current_usage beside our fields', async () => {
      const agent = await s.agent();
      const res = await s.request('GET', '/v1/agent/self', { agent });
      expect(res.status, res.text).to.equal(200);
      const a = res.body.agent;
      expect(a).to.include({ id: agent.agentId, enabled: true });
      expect(a.wallet_address).to.equal(res.body.wallet.address);
      expect(a.active_window).to.deep.equal({ starts_at: a.starts_at, expires_at: a.ends_at });
      expect(res.body.permissions.operation_types).to.include.members(['payment', 'conversion', 'earn.deposit']);
      expect(res.body.permissions.webhook_event_types).to.include('payment.executed');
      expect(res.body.limits.read).to.have.all.keys('limit', 'burst', 'windowSeconds');
      expect(res.body.limits.read.windowSeconds).to.equal(60);
      expect(res.body.cannot).to.deep.equal([]);
      expect(res.body.current_usage).to.deep.equal({});
    });
  });

  describe('page api-reference/get-self-limits', () => {
    it('GET /self/limits answers spend_limits, swap_limits, permissions (always lists) and current_usage; null is no cap', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment', 'conversion'], per_tx_usd: '100', per_period_usd: '500', period: 'day', max_slippage_bps: 50 }, fund: { USDC: '50' } });
      const pay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '5' } });
      expect(pay.status, pay.text).to.equal(200);
      const res = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.spend_limits).to.deep.equal({ per_tx_usd: '100', per_period_usd: '500', lifetime_usd: null, max_txs_per_period: null, tx_cooldown_blocks: null, fail_on_zero_price: false });
      expect(res.body.swap_limits).to.deep.equal({ max_slippage_bps: 50, max_swaps_per_period: null });
      expect(res.body.permissions.operation_types).to.deep.equal(['payment', 'conversion']);
      expect(res.body.permissions.cannot).to.include('earn.deposit').and.not.include('payment');
      expect(res.body.current_usage).to.deep.equal({ txs_in_period: 1, spent_in_period_usd: '5', swaps_in_period: 0, total_txs: 1, total_spent_usd: '5' });
      // Our own view stays as it was.
      expect(res.body.limits).to.include({ per_tx_usd: '100', period: 'day' });
      expect(res.body.usage).to.include({ period_txs: 1, period_usd: '5' });
    });

    it('an allow-all policy lists every operation type in permissions.operation_types, never the string "all"', async () => {
      const agent = await s.agent({ policy: 'all' });
      const res = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(res.body.limits.operation_types).to.equal('all');
      expect(res.body.permissions.operation_types).to.be.an('array').that.includes.members(['payment', 'conversion', 'x402.purchase']);
      expect(res.body.permissions.cannot).to.deep.equal([]);
    });
  });

  describe('page api-reference/get-balances', () => {
    it('GET /balances items carry asset_symbol, asset_display_name, amount, amount_usd and category', async () => {
      const agent = await s.agent({ fund: { USDC: '12.5' } });
      const res = await s.request('GET', '/v1/agent/balances', { agent });
      expect(res.status, res.text).to.equal(200);
      const usdc = res.body.items.find((i: { asset_symbol: string }) => i.asset_symbol === 'USDC');
      expect(usdc).to.include({ asset_symbol: 'USDC', amount: '12.5', amount_usd: '12.5', category: 'cash', total: '12.5', value_usd: '12.5' });
      expect(usdc.asset_display_name).to.be.a('string').and.not.equal('');
      const cash = await s.request('GET', '/v1/agent/balances/cash', { agent });
      expect(cash.body.items.every((i: { category: string; amount: string }) => i.category === 'cash' && typeof i.amount === 'string')).to.equal(true);
    });
  });

  describe('page api-and-integrations/reference/capabilities', () => {
    for (const path of ['/v1/agent/capabilities', '/v1/agent/capabilities.json']) {
      it(`GET ${path} answers agent_api_contract_version, base_path, Hightop's endpoint fields and both event lists`, async () => {
        const agent = await s.agent();
        const res = await s.request('GET', path, { agent });
        expect(res.status, res.text).to.equal(200);
        expect(res.body.agent_api_contract_version).to.be.a('string').and.not.equal('');
        expect(res.body.base_path).to.equal('/v1/agent');
        const quote = res.body.endpoints.find((e: { method: string; path: string }) => e.method === 'POST' && e.path === '/v1/agent/conversions/quote');
        expect(quote).to.include({ rate_limit_class: 'simulate', idempotency_required: true, request_schema: 'ConversionQuoteRequest' });
        expect(quote.description).to.be.a('string').and.not.equal('');
        expect(quote.response_schema).to.be.a('string');
        expect(res.body.webhook_event_types).to.include.members(res.body.subscribable_webhook_event_types);
        expect(res.body.subscribable_webhook_event_types).to.include('payment.executed');
        expect(res.body.operation_types).to.include('payment');
      });
    }
  });

  describe('page api-reference/post-conversions-quote and api-and-integrations/recipes/convert-with-quote', () => {
    it('POST /conversions/quote answers legs with protocol_id and protocol_name and the route intermediate_assets; the quote executes once', async () => {
      const agent = await s.agent({ fund: { USDC: '1000' } });
      const res = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'WETH', amount: '100', slippage_percent: 0.5 } });
      expect(res.status, res.text).to.equal(200);
      const q = res.body.quote;
      expect(q).to.include.keys('quote_id', 'from_asset', 'to_asset', 'from_amount', 'expected_out', 'min_amount_out', 'slippage_percent', 'human_rate', 'route', 'expires_at', 'expires_in_seconds');
      expect(q.expires_in_seconds).to.equal(60);
      expect(q.route.intermediate_assets).to.deep.equal([]);
      for (const leg of q.route.legs) {
        expect(leg.protocol_id).to.equal(leg.protocol);
        expect(leg.protocol_name).to.be.a('string').and.not.equal('');
        expect(leg).to.include.keys('pool_address', 'from_asset', 'to_asset', 'expected_out', 'fee_bps');
      }
      const exec = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: q.quote_id } });
      expect(exec.status, exec.text).to.equal(200);
      const again = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: q.quote_id } });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('quote_already_consumed');
    });
  });
});
