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
});
