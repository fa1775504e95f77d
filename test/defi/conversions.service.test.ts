// Conversions on the ledger: quote, execute, settle; expiry, single use, slippage, staleness, policy and the race.
import { expect } from 'chai';
import { createDefiHarness, errorCode, type DefiHarness } from './helpers.js';
import fc from 'fast-check';
import { convertAtPrice } from '../../src/lib/defi/pricing.js';
import { parseAmount } from '../../src/lib/money.js';
import { poolAddressFor } from '../../src/services/defi/conversions/conversion.service.js';

const E6 = 10n ** 6n;

describe('conversions (service)', () => {
  let h: DefiHarness;
  before(async () => {
    h = await createDefiHarness();
  });
  after(async () => {
    await h.ledger.ledger.setPrice(h.db, 'WETH', '3000', null);
    await h.db('prices').where({ asset_symbol: 'WETH' }).update({ observed_at: null, source: 'configured' });
    await h.close();
  });
  afterEach(async () => {
    // Each test starts from the seeded constant WETH price.
    await h.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
  });

  describe('createConversionQuote', () => {
    it('prices 1000 USDC into WETH at the feed with a 30 bps fee and a 1 % floor', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '1000' });
      expect(q.from_amount).to.equal('1000');
      // gross 1000/3000 = 0.333333333333333333; fee ceil(0.3 %) = 0.001; min = floor(net · 0.99)
      expect(q.expected_out).to.equal('0.332333333333333333');
      expect(q.min_amount_out).to.equal('0.329009999999999999');
      expect(q.slippage_percent).to.equal(1);
      expect(q.expires_in_seconds).to.equal(60);
      expect(new Date(q.expires_at).getTime() - new Date(q.created_at).getTime()).to.equal(60_000);
      expect(q.route.legs[0]).to.include({ protocol: 'uniswap-v3', fee_bps: 30, pool_address: poolAddressFor('USDC', 'WETH') });
      expect(q.fee_usd).to.equal('3');
      expect(q.human_rate).to.equal('1 USDC = 0.000332333333333333 WETH');
      expect(q.price_source).to.equal('price-feed:configured');
    });

    it('refuses with insufficient_funds when the wallet holds less than the input', async () => {
      const who = await h.newAgent({ funds: { USDC: '5' } });
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '6' }))).to.equal('insufficient_funds');
    });

    it('refuses with validation_failed for the same asset on both sides or both amounts', async () => {
      const who = await h.newAgent();
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'USDC', amount: '1' }))).to.equal('validation_failed');
      // A body the document's types refuse (both amounts): the service refuses it too.
      const both = { from_asset: 'USDC', to_asset: 'WETH', amount: '1', amount_usd: '1' } as unknown as Parameters<typeof h.defi.conversions.quote>[2];
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, both))).to.equal('validation_failed');
    });

    it('refuses with price_stale when the feed is older than an hour', async () => {
      const who = await h.newAgent();
      await h.ledger.ledger.setPrice(h.db, 'WETH', '3000', new Date(h.clock.now().getTime() - 2 * 3600_000));
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' }))).to.equal('price_stale');
    });

    it('refuses with limit_exceeded when slippage exceeds the policy cap', async () => {
      const who = await h.newAgent({ policy: { operation_types: 'all', max_slippage_bps: 50 } });
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10', slippage_percent: 1 }))).to.equal('limit_exceeded');
      const ok = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10', slippage_percent: 0.5 });
      expect(ok.slippage_percent).to.equal(0.5);
    });
  });

  describe('createConversion', () => {
    it('holds the input, then settles the output and emits conversion.executed', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '1000' });
      const res = await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'key-1');
      expect(res.status).to.equal('accepted');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9000n * E6);
      expect((await h.ledger.ledger.balance(h.db, who.walletId, 'USDC')).held).to.equal(1000n * E6);
      await h.ledger.operations.settleDue(h.db);
      expect(await h.balance(who.walletId, 'WETH')).to.equal(332_333_333_333_333_333n);
      expect((await h.ledger.ledger.balance(h.db, who.walletId, 'USDC')).held).to.equal(0n);
      const op = await h.defi.conversions.get(h.db, who, res.operation_id);
      expect(op.status).to.equal('executed');
      expect(op.type).to.equal('conversion');
      const events = await h.db('events').where({ agent_id: who.agentId, type: 'conversion.executed' });
      expect(events).to.have.length(1);
      const page = await h.defi.conversions.list(h.db, who, {});
      expect(page.items.map((i) => i.id)).to.deep.equal([res.operation_id]);
    });

    it('fails settlement, releases the hold and emits conversion.execution_failed when the pool address fails', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'EURC', amount: '100' });
      await h.ledger.ledger.setFailingAddress(h.db, poolAddressFor('USDC', 'EURC'), true);
      try {
        const res = await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'key-fail');
        await h.ledger.operations.settleDue(h.db);
        const op = await h.defi.conversions.get(h.db, who, res.operation_id);
        expect(op.status).to.equal('execution_failed');
        expect(op.error?.code).to.equal('settlement_failed');
        expect(await h.balance(who.walletId, 'USDC')).to.equal(10_000n * E6);
        expect(await h.balance(who.walletId, 'EURC')).to.equal(0n);
        expect(await h.db('events').where({ agent_id: who.agentId, type: 'conversion.execution_failed' })).to.have.length(1);
      } finally {
        await h.ledger.ledger.setFailingAddress(h.db, poolAddressFor('USDC', 'EURC'), false);
      }
    });

    it('answers quote_expired once 60 seconds have passed', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
      h.clock.advance(60_000);
      expect(await errorCode(() => h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k'))).to.equal('quote_expired');
    });

    it('answers quote_already_consumed on a second execution', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
      await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k1');
      expect(await errorCode(() => h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k2'))).to.equal('quote_already_consumed');
    });

    it('answers not_found for a quote of another agent', async () => {
      const who = await h.newAgent();
      const other = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
      expect(await errorCode(() => h.defi.conversions.execute(h.db, other, { quote_id: q.quote_id }, 'k'))).to.equal('not_found');
    });

    it('answers slippage_exceeded when the feed moves against the quote, and leaves the quote usable', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '1000' });
      await h.ledger.ledger.setPrice(h.db, 'WETH', '3060'); // +2 %: out 0.325816993464052286 < min 0.329009999999999999
      expect(await errorCode(() => h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k'))).to.equal('slippage_exceeded');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(10_000n * E6);
      await h.ledger.ledger.setPrice(h.db, 'WETH', '3015'); // +0.5 %: within the 1 % tolerance
      const res = await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k2');
      expect(res.status).to.equal('accepted');
    });

    it('answers price_stale when the feed went stale after the quote', async () => {
      const who = await h.newAgent();
      await h.ledger.ledger.setPrice(h.db, 'WETH', '3000');
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
      await h
        .db('prices')
        .where({ asset_symbol: 'WETH' })
        .update({ observed_at: new Date(h.clock.now().getTime() - 3601_000) });
      expect(await errorCode(() => h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k'))).to.equal('price_stale');
    });

    it('records a policy rejection without consuming the quote', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
      await h.ledger.policy.set(h.db, who.agentId, { operation_types: 'all', max_slippage_bps: 10 });
      const err = await h.db.transaction(async (trx) => errorCode(() => h.defi.conversions.execute(trx, who, { quote_id: q.quote_id }, 'k')));
      expect(err).to.equal('limit_exceeded');
      const rejected = await h.db('operations').where({ agent_id: who.agentId, status: 'policy_rejected', type: 'conversion' });
      expect(rejected).to.have.length(1);
      await h.ledger.policy.allowAll(h.db, who.agentId);
      expect((await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k2')).status).to.equal('accepted');
    });

    it('lets exactly one of 50 concurrent executions of one quote succeed', async () => {
      const who = await h.newAgent();
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '100' });
      const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, `race-${i}`)));
      const ok = results.filter((r) => r.status === 'fulfilled');
      const codes = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => (r.reason as { code?: string }).code);
      expect(ok).to.have.length(1);
      expect(codes).to.have.length(49);
      expect(new Set(codes)).to.deep.equal(new Set(['quote_already_consumed']));
      expect(await h.db('operations').where({ agent_id: who.agentId, type: 'conversion' })).to.have.length(1);
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9900n * E6);
    });
  });

  describe('vault-linked conversions', () => {
    it('redeems the input from an earn position with from_vault_address', async () => {
      const who = await h.newAgent({ funds: { USDC: '500' } });
      const v = await h.defi.earn.addVault(h.db, { name: 'test conv-from', protocol: 'morpho', asset: 'USDC', apyBps: 0 });
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '500' }, 'd');
      // The wallet is empty: only the vault position can pay.
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'EURC', amount: '108', from_vault_address: v.vault_address });
      expect(q.from_vault_address).to.equal(v.vault_address);
      await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k');
      await h.ledger.operations.settleDue(h.db);
      expect((await h.defi.earn.getPosition(h.db, who, dep.resource.id)).value).to.equal('392');
      expect(await h.balance(who.walletId, 'EURC')).to.equal(99_950_000n);
      expect(await h.balance(who.walletId, 'USDC')).to.equal(0n);
    });

    it('deposits the output into a vault with to_vault_address at settlement', async () => {
      const who = await h.newAgent({ funds: { USDC: '108' } });
      const v = await h.defi.earn.addVault(h.db, { name: 'test conv-to', protocol: 'morpho', asset: 'EURC', apyBps: 0 });
      const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'EURC', amount: '108', to_vault_address: v.vault_address });
      await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, 'k');
      await h.ledger.operations.settleDue(h.db);
      const positions = (await h.defi.earn.listPositions(h.db, who, {})).items;
      expect(positions).to.have.length(1);
      expect(positions[0]).to.include({ vault_id: v.vault_id, value: '99.95', principal: '99.95' });
      expect(await h.balance(who.walletId, 'EURC')).to.equal(0n);
    });

    it('refuses a vault of another asset', async () => {
      const who = await h.newAgent();
      const v = await h.defi.earn.addVault(h.db, { name: 'test conv-bad', protocol: 'morpho', asset: 'WETH', apyBps: 0 });
      expect(await errorCode(() => h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'EURC', amount: '1', to_vault_address: v.vault_address }))).to.equal('validation_failed');
    });
  });

  it('reaches slippage_exceeded and price_stale exactly when the moved feed says so (property)', async () => {
    const who = await h.newAgent({ funds: { USDC: '1000000' } });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 9_500, max: 10_500 }), fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 7200 }), async (moveBps, slippageBps, ageSeconds) => {
        n += 1;
        await h.db('prices').where({ asset_symbol: 'WETH' }).update({ usd_e8: '300000000000', observed_at: null, source: 'configured' });
        const q = await h.defi.conversions.quote(h.db, who, { from_asset: 'USDC', to_asset: 'WETH', amount: '100', slippage_percent: slippageBps / 100 });
        const newPrice = (300_000_000_000n * BigInt(moveBps)) / 10_000n;
        await h
          .db('prices')
          .where({ asset_symbol: 'WETH' })
          .update({ usd_e8: newPrice.toString(), observed_at: new Date(h.clock.now().getTime() - ageSeconds * 1000), source: 'agentctl' });
        const out = convertAtPrice(100n * E6, { symbol: 'USDC', decimals: 6, priceE8: 100_000_000n }, { symbol: 'WETH', decimals: 18, priceE8: newPrice }, 30n).netOut;
        const expected = ageSeconds > 3600 ? 'price_stale' : out < parseAmount(q.min_amount_out, 18) ? 'slippage_exceeded' : 'ok';
        let got = 'ok';
        try {
          await h.defi.conversions.execute(h.db, who, { quote_id: q.quote_id }, `prop-${n}`);
        } catch (err) {
          got = (err as { code: string }).code;
        }
        expect(got, `move ${moveBps} slippage ${slippageBps} age ${ageSeconds}`).to.equal(expected);
      }),
      { numRuns: 40 },
    );
  });
});
