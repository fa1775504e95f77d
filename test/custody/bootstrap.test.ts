// The development bootstrap (issue 24): with CHAIN_RPC_URL on chain 31337 the server deploys the agent account factory
// and the USD price feeds, records them under chain_settings `custody`, and the feeds' updater is the faucet (Anvil's
// first account), not the relayer or any other key the server holds.
import { expect } from 'chai';
import { privateKeyToAccount } from 'viem/accounts';
import { agentAccountAbi, agentAccountFactoryAbi, devPriceFeedAbi, findCustodyContracts } from '../../src/chain/custody.js';
import { FAUCET_KEY } from '../../src/chain/dev-accounts.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';

describe('development bootstrap: agent account factory and price feeds', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('records the factory and one feed per asset (ETH and WETH share one), updated by the faucet only', async () => {
    const c = (await findCustodyContracts(s.db, 31337))!;
    expect(c).to.not.equal(null);
    expect(c.feedUpdater).to.equal(privateKeyToAccount(FAUCET_KEY).address);
    expect(Object.keys(c.feeds).sort()).to.deep.equal(['CBBTC', 'ETH', 'EURC', 'USDC', 'WETH']);
    expect(c.feeds.WETH).to.equal(c.feeds.ETH);
    const answers: Record<string, bigint> = { USDC: 100_000_000n, EURC: 108_000_000n, ETH: 300_000_000_000n, CBBTC: 6_000_000_000_000n };
    for (const [symbol, answer] of Object.entries(answers)) {
      const [, got] = await node.client.readContract({ address: c.feeds[symbol]!, abi: devPriceFeedAbi, functionName: 'latestRoundData' });
      expect(got, symbol).to.equal(answer);
      expect(await node.client.readContract({ address: c.feeds[symbol]!, abi: devPriceFeedAbi, functionName: 'decimals' })).to.equal(8);
      expect(await node.client.readContract({ address: c.feeds[symbol]!, abi: devPriceFeedAbi, functionName: 'updater' })).to.equal(c.feedUpdater);
    }
    expect(await node.client.readContract({ address: c.factory, abi: agentAccountFactoryAbi, functionName: 'implementation' })).to.equal(c.implementation);
  });

  it('the factory creates an account at the address it predicted, owned by the given signer', async () => {
    const c = (await findCustodyContracts(s.db, 31337))!;
    const owner = randomAddress();
    const lane = randomAddress();
    const salt = `0x${'ab'.repeat(32)}` as const;
    const predicted = await node.client.readContract({ address: c.factory, abi: agentAccountFactoryAbi, functionName: 'predictAddress', args: [owner, lane, salt] });
    expect(await node.client.getCode({ address: predicted })).to.equal(undefined);
    const wallet = node.devWallet(2);
    const hash = await wallet.writeContract({ address: c.factory, abi: agentAccountFactoryAbi, functionName: 'createAccount', args: [owner, lane, salt] });
    expect((await node.client.waitForTransactionReceipt({ hash })).status).to.equal('success');
    expect(await node.client.readContract({ address: predicted, abi: agentAccountAbi, functionName: 'owner' })).to.equal(owner);
    expect(await node.client.readContract({ address: predicted, abi: agentAccountAbi, functionName: 'lane' })).to.equal(lane);
    // Default deny until the owner sets a policy.
    expect((await node.client.readContract({ address: predicted, abi: agentAccountAbi, functionName: 'allowance' })).exposureUsd).to.equal(0n);
  });
});
