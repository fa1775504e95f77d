// A token address from configuration (CHAIN_ASSET_ADDRESSES, as on a real chain): recorded as the asset's contract
// address with the EIP-712 domain read from the token, and the development bootstrap deploys nothing.
import { expect } from 'chai';
import { deployToken } from '../../src/chain/token.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { startChainServer } from '../helpers/chain.js';

describe('chain settlement: configured token address', function () {
  this.timeout(60_000);
  let node: AnvilNode;
  let s: Awaited<ReturnType<typeof startChainServer>> | undefined;
  before(async () => {
    node = await startAnvil();
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('records CHAIN_ASSET_ADDRESSES and skips the development bootstrap', async () => {
    const token = await deployToken(node.devWallet(3), node.client);
    const blockBefore = await node.client.getBlockNumber();
    s = await startChainServer(node, { env: { CHAIN_ASSET_ADDRESSES: `USDC=${token}` } });
    expect(s.token).to.equal(token);
    const usdc = await s.db('assets').where({ symbol: 'USDC' }).first();
    expect(usdc).to.include({ eip712_name: 'USD Coin', eip712_version: '2' });
    expect(await s.db('chain_settings').where({ key: 'usdc_token' })).to.have.length(0);
    // Nothing deployed, and the generated relayer was not funded by the bootstrap either.
    expect(await node.client.getBlockNumber()).to.equal(blockBefore);
  });
});
