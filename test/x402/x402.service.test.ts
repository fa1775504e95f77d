// The x402 service against real Postgres and a real x402 seller on loopback HTTPS (v2 via @x402/express, v1 by hand).
import { createSealer } from '../../src/lib/crypto.js';
import { expect } from 'chai';
import { verifyTypedData } from 'viem';
import { isRefusal, type Refusal } from '../../src/lib/refusal.js';
import { createX402Service, type X402Service } from '../../src/services/x402/service.js';
import { decodeBase64Json } from '../../src/x402/challenge.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, USDC_BASE_DOMAIN } from '../../src/x402/signing.js';
import { createLedgerFixture, makeAgent, MASTER_KEY, rejectingRefusals, settleAll, type LedgerFixture, type RefusalsRejected, type TestAgent } from '../ledger/factory.js';
import { SELLER_PAY_TO, startSeller, USDC, type Seller } from './seller.js';
import { refusal } from '../support/refusals.js';

/** The result of a write that was not refused. */
function accepted<T>(result: T | Refusal): T {
  if (isRefusal(result)) throw new Error(`refused: ${result.refusal.code} ${result.refusal.message}`);
  return result;
}

describe('x402 service', function () {
  this.timeout(30_000);
  let f: LedgerFixture;
  let seller: Seller;
  let x402: RefusalsRejected<X402Service>;

  before(async () => {
    f = await createLedgerFixture();
    // The seller's facilitator checks validBefore against real time: run the fake clock at the real now.
    f.clock.set(new Date());
    seller = await startSeller();
    x402 = rejectingRefusals(createX402Service({ config: { unsafeAllowLoopbackTargets: true }, sealer: createSealer(MASTER_KEY), clock: f.clock, ledger: f.area, ca: seller.ca }));
  });
  after(async () => {
    await seller.close();
    await f.close();
  });

  const usdc = async (agent: TestAgent) => {
    const b = await f.area.ledger.balance(f.db, agent.walletId, 'USDC');
    return { available: b.available, held: b.held };
  };
  const walletAddress = async (agent: TestAgent) => (await f.db('wallets').where({ id: agent.walletId }).first()).address as `0x${string}`;

  describe('signX402Payment', () => {
    it('signs exactly the amount, holds it, and settles the x402.sign operation when pay_to and amount are given', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '10' } });
      const res = accepted(await x402.sign(f.db, agent, { pay_to: SELLER_PAY_TO, amount: '1500000', max_timeout_seconds: 120 }, 'sign-key-1'));
      expect(res).to.include({ ok: true, payment_header_name: 'X-PAYMENT', x402_version: 1, pay_to: SELLER_PAY_TO, amount: '1500000', asset_symbol: 'USDC', network: 'base' });
      expect(res.valid_before).to.equal(new Date((Math.floor(f.clock.now().getTime() / 1000) + 120) * 1000).toISOString());
      const payload = decodeBase64Json(res.payment_header) as { x402Version: number; scheme: string; network: string; payload: { signature: `0x${string}`; authorization: Record<string, string> } };
      expect(payload).to.include({ x402Version: 1, scheme: 'exact', network: 'base' });
      const auth = payload.payload.authorization;
      const from = await walletAddress(agent);
      expect(auth).to.deep.equal({ from, to: SELLER_PAY_TO, value: '1500000', validAfter: '0', validBefore: String(Date.parse(res.valid_before) / 1000), nonce: res.nonce });
      const valid = await verifyTypedData({
        address: from,
        domain: USDC_BASE_DOMAIN,
        types: TRANSFER_WITH_AUTHORIZATION_TYPES,
        primaryType: 'TransferWithAuthorization',
        message: { from, to: SELLER_PAY_TO, value: 1_500_000n, validAfter: 0n, validBefore: BigInt(auth.validBefore!), nonce: res.nonce as `0x${string}` },
        signature: payload.payload.signature,
      });
      expect(valid).to.equal(true);

      const op = await f.db('operations').where({ id: res.operation_id }).first();
      expect(op).to.include({ type: 'x402.sign', status: 'accepted', asset_symbol: 'USDC', to_address: SELLER_PAY_TO });
      expect(op.amount).to.equal('1500000');
      expect(await usdc(agent)).to.deep.equal({ available: 8_500_000n, held: 1_500_000n });
      await settleAll(f);
      expect((await f.db('operations').where({ id: res.operation_id }).first()).status).to.equal('executed');
      expect(await usdc(agent)).to.deep.equal({ available: 8_500_000n, held: 0n });
    });

    it('signs a v2 requirement with PAYMENT-SIGNATURE, echoing it as `accepted`', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '1' } });
      const requirement = { scheme: 'exact', network: 'eip155:8453', amount: '10000', asset: USDC, payTo: SELLER_PAY_TO, maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' } };
      const res = accepted(await x402.sign(f.db, agent, { payment_requirements: requirement }, null));
      expect(res).to.include({ payment_header_name: 'PAYMENT-SIGNATURE', x402_version: 2, amount: '10000', network: 'eip155:8453' });
      // No max_timeout_seconds: the requirement's 300 s applies.
      expect(Date.parse(res.valid_before) - Math.floor(f.clock.now().getTime() / 1000) * 1000).to.equal(300_000);
      const payload = decodeBase64Json(res.payment_header) as { x402Version: number; accepted: unknown; payload: { authorization: { value: string } } };
      expect(payload.x402Version).to.equal(2);
      expect(payload.accepted).to.deep.equal(requirement);
      expect(payload.payload.authorization.value).to.equal('10000');
    });

    it('refuses a requirement that is not USDC on Base with validation_failed, recording nothing', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '1' } });
      for (const bad of [
        { scheme: 'exact', network: 'base', maxAmountRequired: '1', asset: '0x4200000000000000000000000000000000000006', payTo: SELLER_PAY_TO },
        { scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '1', asset: USDC, payTo: SELLER_PAY_TO },
        { scheme: 'exact', network: 'eip155:1', amount: '1', asset: USDC, payTo: SELLER_PAY_TO },
      ]) {
        const err = await refusal(x402.sign(f.db, agent, { payment_requirements: bad }, null));
        expect(err.code).to.equal('validation_failed');
      }
      expect((await refusal(x402.sign(f.db, agent, { pay_to: SELLER_PAY_TO, amount: '0' }, null))).code).to.equal('validation_failed');
      expect((await refusal(x402.sign(f.db, agent, { pay_to: SELLER_PAY_TO, amount: '1000000', payment_requirements: {} }, null))).code).to.equal('validation_failed');
      expect(await f.db('operations').where({ agent_id: agent.agentId })).to.have.length(0);
    });

    it('answers the policy code and records a policy_rejected operation when policy refuses', async () => {
      const agent = await makeAgent(f, { policy: { operation_types: ['payment'] }, fund: { USDC: '5' } });
      const err = await refusal(x402.sign(f.db, agent, { pay_to: SELLER_PAY_TO, amount: '1000000' }, null));
      expect(err.code).to.equal('permission_not_granted');
      expect(err.status).to.equal(403);
      const ops = await f.db('operations').where({ agent_id: agent.agentId });
      expect(ops.map((o) => [o.type, o.status])).to.deep.equal([['x402.sign', 'policy_rejected']]);
      expect(await f.db('events').where({ agent_id: agent.agentId, type: 'operation.policy_rejected' })).to.have.length(1);
      expect(await usdc(agent)).to.deep.equal({ available: 5_000_000n, held: 0n });

      const capped = await makeAgent(f, { policy: { operation_types: ['x402.sign'], per_tx_usd: '0.5' }, fund: { USDC: '5' } });
      expect((await refusal(x402.sign(f.db, capped, { pay_to: SELLER_PAY_TO, amount: '750000' }, null))).code).to.equal('limit_exceeded');
      const eurOnly = await makeAgent(f, { policy: { operation_types: 'all', allowed_assets: ['EURC'] }, fund: { USDC: '5' } });
      expect((await refusal(x402.sign(f.db, eurOnly, { pay_to: SELLER_PAY_TO, amount: '750000' }, null))).code).to.equal('asset_not_allowed');
    });

    it('answers insufficient_funds when the wallet lacks the USDC', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '0.5' } });
      expect((await refusal(x402.sign(f.db, agent, { pay_to: SELLER_PAY_TO, amount: '1000000' }, null))).code).to.equal('insufficient_funds');
    });
  });

  describe('quoteX402', () => {
    it('reads the v1 body price', async () => {
      const res = await x402.quote({ url: seller.url('/v1/report') });
      expect(res).to.deep.include({ ok: true, supported: true, x402_required: true, upstream_status: 402 });
      expect(res.price).to.deep.equal({
        amount: '0.05',
        amount_base_units: '50000',
        asset: USDC,
        asset_symbol: 'USDC',
        network: 'base',
        pay_to: SELLER_PAY_TO,
        scheme: 'exact',
        x402_version: 1,
        max_timeout_seconds: 300,
        resource: seller.url('/v1/report'),
        description: 'Quarterly report',
      });
    });

    it('reads the v2 PAYMENT-REQUIRED header price', async () => {
      const res = await x402.quote({ url: seller.url('/v2/weather') });
      expect(res).to.include({ supported: true, x402_required: true, upstream_status: 402 });
      expect(res.price).to.include({ amount: '0.01', asset_symbol: 'USDC', network: 'eip155:8453', x402_version: 2, max_timeout_seconds: 120, pay_to: SELLER_PAY_TO });
      expect(res.price?.asset.toLowerCase()).to.equal(USDC.toLowerCase());
      expect(res.price?.resource).to.equal(seller.url('/v2/weather'));
    });

    it('answers supported false when the URL asks for no payment or for another asset', async () => {
      expect(await x402.quote({ url: seller.url('/free') })).to.deep.equal({ ok: true, supported: false, x402_required: false, upstream_status: 200, price: null });
      expect(await x402.quote({ url: seller.url('/redirect') })).to.include({ supported: false, upstream_status: 302 });
      const eth = await x402.quote({ url: seller.url('/v1/eth-only') });
      expect(eth).to.include({ supported: false, x402_required: true });
      expect(eth.price).to.include({ asset_symbol: null, amount: '1000000000000000' });
    });

    it('answers upstream_error for a 5xx, a timeout and an unreachable target', async () => {
      const boom = await refusal(x402.quote({ url: seller.url('/boom') }));
      expect(boom.code).to.equal('upstream_error');
      expect(boom.status).to.equal(502);
      expect(boom.details).to.include({ upstream_status: 500 });
      expect((await refusal(x402.quote({ url: seller.url('/slow'), timeout_ms: 300 }))).details).to.include({ reason: 'timeout' });
      expect((await refusal(x402.quote({ url: 'https://127.0.0.1:1/x' }))).code).to.equal('upstream_error');
    });

    it('refuses private and loopback URLs with validation_failed when the unsafe flag is off', async () => {
      const strict = createX402Service({ config: { unsafeAllowLoopbackTargets: false }, sealer: createSealer(MASTER_KEY), clock: f.clock, ledger: f.area, ca: seller.ca });
      for (const url of [seller.url('/v1/report'), 'https://10.0.0.1/x', 'https://169.254.169.254/latest', 'http://example.com/x', 'https://localhost/x']) {
        const err = await refusal(strict.quote({ url }));
        expect(err.code, url).to.equal('validation_failed');
      }
      expect(seller.requests.filter((r) => r.path === '/x')).to.have.length(0);
    });
  });

  describe('purchaseX402', () => {
    it('pays a v2 seller, returns its body, and records an executed x402.purchase', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '2' } });
      const before = seller.settlements.length;
      const res = accepted(await x402.purchase(f.db, agent, { url: seller.url('/v2/weather'), max_amount: '20000' }, 'buy-1'));
      expect(res).to.deep.include({ ok: true, paid: true, settled: true, status: 200, body: { forecast: 'sunny', temperature_c: 21 }, body_truncated: false });
      expect(res.headers['payment-response']).to.be.a('string');
      const from = await walletAddress(agent);
      expect(seller.settlements.slice(before)).to.deep.equal([{ from, to: SELLER_PAY_TO, value: 10_000n, nonce: seller.settlements[before]!.nonce }]);
      const paidRequest = seller.requests.filter((r) => r.path === '/v2/weather' && r.headers['payment-signature']).at(-1);
      expect(paidRequest).to.not.equal(undefined);
      const op = await f.db('operations').where({ id: res.operation_id }).first();
      expect(op).to.include({ type: 'x402.purchase', status: 'executed', to_address: SELLER_PAY_TO, amount: '10000' });
      expect(await usdc(agent)).to.deep.equal({ available: 1_990_000n, held: 0n });
    });

    it('pays a v1 seller with X-PAYMENT and sends a POST body upstream', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '2' } });
      const v1 = accepted(await x402.purchase(f.db, agent, { url: seller.url('/v1/report'), max_amount: '50000' }, null));
      expect(v1).to.deep.include({ paid: true, settled: true, status: 200, body: { report: 'Q3', revenue: 1234 } });
      expect(seller.requests.filter((r) => r.path === '/v1/report' && r.headers['x-payment'])).to.have.length.greaterThan(0);
      const post = accepted(await x402.purchase(f.db, agent, { url: seller.url('/v2/answer'), method: 'POST', body: { question: 'life' }, max_amount: '1000000' }, null));
      expect(post).to.deep.include({ paid: true, settled: true, body: { answer: 42, question: 'life' } });
      expect(await usdc(agent)).to.deep.equal({ available: 2_000_000n - 50_000n - 250_000n, held: 0n });
    });

    it('keeps the purchase executed with its hold captured and answers seller_accepted false when the seller fails after settling', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '1' } });
      const before = seller.settlements.length;
      const res = accepted(await x402.purchase(f.db, agent, { url: seller.url('/v2/fails-after-settlement'), max_amount: '20000' }, null));
      expect(res).to.deep.include({ ok: true, paid: true, seller_accepted: false, settled: true, status: 500, body: { error: 'broke after settlement' } });
      expect(seller.settlements.slice(before).map((x) => x.value)).to.deep.equal([20_000n]);
      const op = await f.db('operations').where({ id: res.operation_id }).first();
      expect(op).to.include({ type: 'x402.purchase', status: 'executed' });
      expect(op.details).to.include({ upstream_status: 500, seller_settled: true, seller_accepted: false });
      expect(await usdc(agent)).to.deep.equal({ available: 980_000n, held: 0n });
    });

    it('refuses a price above max_amount with limit_exceeded, without paying or recording', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '10' } });
      const before = seller.settlements.length;
      const err = await refusal(x402.purchase(f.db, agent, { url: seller.url('/v2/premium'), max_amount: '4990000' }, null));
      expect(err.code).to.equal('limit_exceeded');
      expect(err.details).to.deep.include({ price: '5000000', max_amount: '4990000', price_usdc: '5', max_amount_usdc: '4.99' });
      expect(seller.settlements.length).to.equal(before);
      expect(seller.requests.filter((r) => r.path === '/v2/premium' && r.headers['payment-signature'])).to.have.length(0);
      expect(await f.db('operations').where({ agent_id: agent.agentId })).to.have.length(0);
      expect(await usdc(agent)).to.deep.equal({ available: 10_000_000n, held: 0n });
    });

    it('returns a free resource unpaid with no operation', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '1' } });
      expect(accepted(await x402.purchase(f.db, agent, { url: seller.url('/free'), max_amount: '1000000' }, null))).to.deep.include({
        operation_id: null,
        paid: false,
        settled: false,
        status: 200,
        body: { free: true },
      });
      const big = accepted(await x402.purchase(f.db, agent, { url: seller.url('/big'), max_amount: '1000000' }, null));
      expect(big.body_truncated).to.equal(true);
      expect((big.body as string).length).to.equal(64 * 1024);
    });

    it('does not pay when policy refuses, and records the policy_rejected operation', async () => {
      const agent = await makeAgent(f, { policy: { operation_types: ['x402.sign'] }, fund: { USDC: '1' } });
      const before = seller.settlements.length;
      expect((await refusal(x402.purchase(f.db, agent, { url: seller.url('/v2/weather'), max_amount: '1000000' }, null))).code).to.equal('permission_not_granted');
      expect(seller.settlements.length).to.equal(before);
      expect((await f.db('operations').where({ agent_id: agent.agentId })).map((o) => o.status)).to.deep.equal(['policy_rejected']);
    });

    it('answers upstream_error for a 5xx target and validation_failed for an unsupported challenge', async () => {
      const agent = await makeAgent(f, { fund: { USDC: '1' } });
      expect((await refusal(x402.purchase(f.db, agent, { url: seller.url('/boom'), max_amount: '1000000' }, null))).code).to.equal('upstream_error');
      expect((await refusal(x402.purchase(f.db, agent, { url: seller.url('/v1/eth-only'), max_amount: '1000000' }, null))).code).to.equal('validation_failed');
      expect(await f.db('operations').where({ agent_id: agent.agentId })).to.have.length(0);
    });
  });
});
