// The three x402 routes over HTTP (responses validated against the OpenAPI document), paying a real loopback seller.
import { createSealer } from '../../src/lib/crypto.js';
import { expect } from 'chai';
import { createX402Service } from '../../src/services/x402/service.js';
import { decodeBase64Json } from '../../src/x402/challenge.js';
import { newKey } from '../helpers/server.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { SELLER_PAY_TO, startSeller, USDC, type Seller } from './seller.js';

describe('x402 routes over HTTP', function () {
  this.timeout(30_000);
  let s: LedgerServer;
  let seller: Seller;

  before(async () => {
    s = await startLedgerServer({ UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' });
    // The seller's facilitator checks validBefore against real time.
    s.clock.set(new Date());
    seller = await startSeller();
    // As the composition root builds it, plus the seller's CA.
    (s.services as { x402: unknown }).x402 = createX402Service({ config: s.config, sealer: createSealer(s.config.masterKey), clock: s.clock, ledger: s.ledger, ca: seller.ca });
  });
  after(async () => {
    await seller.close();
    await s.close();
  });

  const balance = (walletId: string) => s.ledger.ledger.balance(s.db, walletId, 'USDC');

  describe('signX402Payment', () => {
    it('answers 200 with the payment header, replays it for the same key, and settles the operation', async () => {
      const agent = await s.agent({ fund: { USDC: '3' } });
      const key = newKey();
      const body = { pay_to: SELLER_PAY_TO, amount: '250000', target_url: 'https://seller.example.com/item' };
      const res = await s.request('POST', '/v1/agent/x402/sign', { agent, body, idempotencyKey: key });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ ok: true, payment_header_name: 'X-PAYMENT', x402_version: 1, amount: '250000', asset_symbol: 'USDC', network: 'base' });
      expect((decodeBase64Json(res.body.payment_header) as { payload: { authorization: { value: string } } }).payload.authorization.value).to.equal('250000');
      const replay = await s.request('POST', '/v1/agent/x402/sign', { agent, body, idempotencyKey: key });
      expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(replay.body).to.deep.equal(res.body);
      expect(await balance(agent.walletId)).to.deep.equal({ available: 2_750_000n, held: 250_000n });
      await s.settle();
      const op = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}`, { agent });
      expect(op.status).to.equal(200);
      expect(op.body.operation).to.include({ type: 'x402.sign', status: 'executed', amount: '0.25', asset_symbol: 'USDC' });
      expect(await balance(agent.walletId)).to.deep.equal({ available: 2_750_000n, held: 0n });
    });

    it('answers 400 without an Idempotency-Key, for both forms at once, and for a non-USDC requirement', async () => {
      const agent = await s.agent({ fund: { USDC: '1' } });
      expect((await s.request('POST', '/v1/agent/x402/sign', { agent, body: { pay_to: SELLER_PAY_TO, amount: '100000' } })).status).to.equal(400);
      const both = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: newKey(), body: { pay_to: SELLER_PAY_TO, amount: '100000', payment_requirements: { scheme: 'exact' } } });
      expect(both.status).to.equal(400);
      const eth = await s.request('POST', '/v1/agent/x402/sign', {
        agent,
        idempotencyKey: newKey(),
        body: { payment_requirements: { scheme: 'exact', network: 'base', maxAmountRequired: '1000', asset: '0x4200000000000000000000000000000000000006', payTo: SELLER_PAY_TO } },
      });
      expect(eth.status).to.equal(400);
      expect(eth.body.error.code).to.equal('validation_failed');
      expect(eth.body.error.message).to.match(/not USDC on Base/);
    });

    it('answers 403 and records a policy_rejected operation when policy refuses', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '1' } });
      const res = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: newKey(), body: { pay_to: SELLER_PAY_TO, amount: '100000' } });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('permission_not_granted');
      const op = await s.request('GET', `/v1/agent/operations/${res.body.error.details.operation_id}`, { agent });
      expect(op.body.operation).to.include({ type: 'x402.sign', status: 'policy_rejected' });
    });

    it('is simulated as a policy failure when policy refuses (a refusal the handler returns), and records nothing', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '1' } });
      const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/x402/sign', body: { pay_to: SELLER_PAY_TO, amount: '100000' } } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ ok: true, would_succeed: false, status: 403 });
      expect(res.body.error.code).to.equal('permission_not_granted');
      expect(res.body.stages.map((st: { name: string; outcome: string }) => `${st.name}:${st.outcome}`)).to.deep.equal([
        'route:passed',
        'scope:passed',
        'validation:passed',
        'policy:failed',
        'funds:skipped',
        'execution:skipped',
      ]);
      const ops = await s.request('GET', '/v1/agent/operations?status=policy_rejected', { agent });
      expect(ops.body.items).to.have.length(0);
    });
  });

  describe('quoteX402', () => {
    it('answers the v1 body and v2 header prices, and supported false for a free URL', async () => {
      const agent = await s.agent();
      const v1 = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/v1/report') } });
      expect(v1.status, JSON.stringify(v1.body)).to.equal(200);
      expect(v1.body).to.include({ supported: true, x402_required: true, upstream_status: 402 });
      expect(v1.body.price).to.include({ amount: '0.05', asset: USDC, x402_version: 1 });
      const v2 = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/v2/weather'), timeout_ms: 5000 } });
      expect(v2.status).to.equal(200);
      expect(v2.body.price).to.include({ amount: '0.01', network: 'eip155:8453', x402_version: 2 });
      const free = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/free') } });
      expect(free.body).to.deep.equal({ ok: true, supported: false, x402_required: false, upstream_status: 200, price: null });
    });

    it('answers 502 upstream_error for a 5xx target', async () => {
      const agent = await s.agent();
      const res = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/boom') } });
      expect(res.status).to.equal(502);
      expect(res.body.error.code).to.equal('upstream_error');
    });

    it('answers 400 for a loopback URL when UNSAFE_ALLOW_LOOPBACK_TARGETS is off', async () => {
      const agent = await s.agent();
      const lenient = s.services.x402;
      (s.services as { x402: unknown }).x402 = createX402Service({
        config: { ...s.config, unsafeAllowLoopbackTargets: false },
        sealer: createSealer(s.config.masterKey),
        clock: s.clock,
        ledger: s.ledger,
        ca: seller.ca,
      });
      try {
        const before = seller.requests.length;
        const res = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/v1/report') } });
        expect(res.status).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        expect(seller.requests.length).to.equal(before);
      } finally {
        (s.services as { x402: unknown }).x402 = lenient;
      }
    });
  });

  describe('purchaseX402', () => {
    it('pays, answers the upstream body, and replays without paying twice', async () => {
      const agent = await s.agent({ fund: { USDC: '1' } });
      const key = newKey();
      const body = { url: seller.url('/v2/weather'), max_amount: '10000' };
      const before = seller.settlements.length;
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, body, idempotencyKey: key });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.deep.include({ ok: true, paid: true, settled: true, status: 200, body: { forecast: 'sunny', temperature_c: 21 } });
      const replay = await s.request('POST', '/v1/agent/x402/purchase', { agent, body, idempotencyKey: key });
      expect(replay.body.operation_id).to.equal(res.body.operation_id);
      expect(seller.settlements.length).to.equal(before + 1);
      const op = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}`, { agent });
      expect(op.body.operation).to.include({ type: 'x402.purchase', status: 'executed', amount: '0.01' });
      expect(await balance(agent.walletId)).to.deep.equal({ available: 990_000n, held: 0n });
    });

    it('answers 403 limit_exceeded when the price is above max_amount, without paying', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const before = seller.settlements.length;
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: newKey(), body: { url: seller.url('/v2/premium'), max_amount: '1000000' } });
      expect(res.status).to.equal(403);
      expect(res.body.error).to.deep.include({ code: 'limit_exceeded' });
      expect(res.body.error.details).to.include({ price: '5000000', max_amount: '1000000' });
      expect(seller.settlements.length).to.equal(before);
      expect(await balance(agent.walletId)).to.deep.equal({ available: 10_000_000n, held: 0n });
    });

    it('answers 502 upstream_error for a 5xx target', async () => {
      const agent = await s.agent({ fund: { USDC: '1' } });
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: newKey(), body: { url: seller.url('/boom'), max_amount: '1000000' } });
      expect(res.status).to.equal(502);
      expect(res.body.error.code).to.equal('upstream_error');
    });
  });
});
