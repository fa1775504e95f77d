// Prices from the pools (issue 16): on the development chain the worker's pool-price pass records WETH's and EURC's
// USD prices from their USDC pairs, spot on the first observation and time-weighted (Uniswap v2 cumulative prices)
// afterwards; price_stale still applies when the observations stop.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { maxUint256, parseUnits } from 'viem';
import { createDex, swapRouterAbi, type DexContracts } from '../../src/chain/dex.js';
import { mintToken } from '../../src/chain/token.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createPoolPriceRecorder } from '../../src/services/defi/pool-prices.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { startChainServer, type ChainServer } from '../helpers/chain.js';

const approveAbi = [
  {
    type: 'function',
    name: 'approve',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 's', type: 'address' },
      { name: 'v', type: 'uint256' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
] as const;

describe('DeFi on chain: USD prices from the pools', function () {
  this.timeout(120_000);
  const clock = createFakeClock(new Date());
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };
  let dex: DexContracts;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { clock, env: { CHAIN_POOL_PRICE_INTERVAL_MS: '0' } });
    dex = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'dex' }).first()).value) as DexContracts;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('records the spot price first, then the time-weighted price across a large swap, and price_stale once it stops', async () => {
    const record = createPoolPriceRecorder({ db: s.db, dex: createDex({ client: node.client, chainId: 31337 }), ledger: s.services.ledger.ledger, clock });
    const first = await record();
    const t0 = (await node.client.getBlock()).timestamp;
    const weth = first.find((p) => p.symbol === 'WETH')!;
    // Seeded 3,000,000 USDC / 1,000 WETH: 3000 USD, floored through the UQ112x112 price.
    expect(weth.source).to.equal('uniswap-v2:spot');
    expect(weth.usdE8 <= 300_000_000_000n && weth.usdE8 >= 300_000_000_000n - 1n).to.equal(true);
    expect(first.map((p) => p.symbol).sort()).to.deep.equal(['EURC', 'WETH']);
    expect((await s.services.ledger.ledger.price(s.db, 'WETH')).source).to.equal('uniswap-v2:spot');

    // Someone buys WETH with 500,000 USDC: the spot price rises to ~4083 USD; 300 s pass.
    const whale = node.devWallet(2);
    await mintToken(node.devWallet(0), node.client, s.token, whale.account.address, parseUnits('500000', 6));
    await node.client.waitForTransactionReceipt({ hash: await whale.writeContract({ address: s.token, abi: approveAbi, functionName: 'approve', args: [dex.router, maxUint256] }) });
    const pair = dex.pairs['USDC/WETH']!;
    const swap = await whale.writeContract({
      address: dex.router,
      abi: swapRouterAbi,
      functionName: 'swapExactIn',
      args: [[pair], [s.token, dex.tokens.WETH!], parseUnits('500000', 6), 0n, whale.account.address, BigInt(Math.floor(Date.now() / 1000) + 3600)],
    });
    await node.client.waitForTransactionReceipt({ hash: swap });
    await node.rpc('evm_increaseTime', [300]);
    await node.mine(1);
    const t2 = (await node.client.getBlock()).timestamp;

    const second = (await record()).find((p) => p.symbol === 'WETH')!;
    expect(second.source).to.equal(`uniswap-v2:twap:${t2 - t0}s`);
    // Between the old price and the new spot (~4083): mostly the new one, weighted by time.
    expect(second.usdE8 > 400_000_000_000n && second.usdE8 < 408_400_000_000n).to.equal(true);
    expect((await s.services.ledger.ledger.price(s.db, 'WETH')).usdE8).to.equal(second.usdE8);

    // No observation for two hours: the pool price is stale like any other.
    const agent = await s.agent({ USDC: '10' });
    clock.advance(2 * 3600_000);
    const stale = await s.request('POST', '/v1/agent/conversions/quote', { agent, body: { from_asset: 'USDC', to_asset: 'WETH', amount: '5' }, idempotencyKey: randomUUID() });
    expect([stale.status, stale.body.error?.code]).to.deep.equal([422, 'price_stale']);
    expect(JSON.stringify(stale.body.error)).to.contain('WETH');
    await record();
    const fresh = await s.request('POST', '/v1/agent/conversions/quote', { agent, body: { from_asset: 'USDC', to_asset: 'WETH', amount: '5' }, idempotencyKey: randomUUID() });
    expect(fresh.status, JSON.stringify(fresh.body)).to.equal(200);
  });
});
