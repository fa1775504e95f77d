// A token address from configuration (CHAIN_ASSET_ADDRESSES, as on a real chain): recorded as the asset's contract
// address with the EIP-712 domain read from the token, and the development bootstrap deploys nothing.
import { expect } from 'chai';
import { deployToken } from '../../src/chain/token.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomUUID } from 'node:crypto';
import { createIsolatedDatabase, randomAddress, startChainServer } from '../helpers/chain.js';

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
    const blockBefore = await node.client.getBlockNumber({ cacheTime: 0 });
    s = await startChainServer(node, { env: { CHAIN_ASSET_ADDRESSES: `USDC=${token}` } });
    expect(s.token).to.equal(token);
    const usdc = await s.db('assets').where({ symbol: 'USDC' }).first();
    expect(usdc).to.include({ eip712_name: 'USD Coin', eip712_version: '2' });
    expect(await s.db('chain_settings').where({ key: 'usdc_token' })).to.have.length(0);
    // Nothing deployed, and the generated relayer was not funded by the bootstrap either.
    expect(await node.client.getBlockNumber({ cacheTime: 0 })).to.equal(blockBefore);
  });

  it('redeploys the token on a fresh development node and takes nonces from it again', async () => {
    const first = await startAnvil();
    const database = await createIsolatedDatabase();
    let server = await startChainServer(first, { database });
    let fresh: AnvilNode | null = null;
    try {
      const agent = await server.agent({ USDC: '10' });
      const paid = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to: randomAddress(), asset: 'USDC', amount: '1' } });
      expect((await server.settle([paid.body.operation_id]))[0]!.status).to.equal('executed');
      await server.close();
      await first.stop();

      // A new node (its state lost) against the same database: the token is deployed again, the relayer's nonce restarts.
      fresh = await startAnvil();
      server = await startChainServer(fresh, { database });
      expect(await fresh.client.getCode({ address: server.token })).to.not.equal(undefined);
      const again = await server.agent({ USDC: '10' });
      const to = randomAddress();
      const res = await server.request('POST', '/v1/agent/payments', { agent: again, idempotencyKey: randomUUID(), body: { to, asset: 'USDC', amount: '2' } });
      const [op] = await server.settle([res.body.operation_id]);
      expect(op!.status).to.equal('executed');
      expect(await server.usdcBalance(to)).to.equal(2_000_000n);
    } finally {
      await server.close();
      await database.drop();
      await fresh?.stop();
      await first.stop();
    }
  });
});
