// x402 finality on a real chain (issue 30, item 3): with CHAIN_CONFIRMATIONS=3 a purchase is `executed` only once the
// block that used its authorization has three confirmations, and a seller that settles and then answers 500 leaves
// the operation `executed` (the money left, on chain and in the ledger) with `seller_accepted: false` in the answer.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';
import { startChainSeller, type ChainSeller } from './x402-seller.js';

describe('x402 finality on chain (Anvil, CHAIN_CONFIRMATIONS=3)', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };
  let seller: ChainSeller;
  const payTo = randomAddress();

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true', CHAIN_CONFIRMATIONS: '3' } });
    expect(s.config.chain.confirmations).to.equal(3);
    seller = await startChainSeller(node, s, payTo);
  });

  after(async () => {
    await seller?.close();
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const balance = async (agent: { headers: Record<string, string> }) => {
    const res = await s.request('GET', '/v1/agent/balances', { agent: agent as never });
    return res.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC') as { available: string; held: string };
  };
  const statusOf = async (id: string) => (await s.db('operations').where({ id }).first()).status as string;

  it('executes a purchase only once the block that used its authorization has three confirmations', async () => {
    const agent = await s.agent({ USDC: '10' });
    const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: randomUUID(), body: { url: `${seller.url}/weather`, max_amount: '50000' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ paid: true, seller_accepted: true, settled: true, status: 200 });
    const opId = res.body.operation_id as string;
    const usedIn = (await node.client.getTransactionReceipt({ hash: seller.settledBy.at(-1) as `0x${string}` })).blockNumber;
    expect(await node.client.getBlockNumber()).to.equal(usedIn);

    // One confirmation (the block itself), then two: still submitted, the money held.
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(0);
    expect(await statusOf(opId)).to.equal('submitted');
    await node.mine(1);
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(0);
    expect(await statusOf(opId)).to.equal('submitted');
    expect(await balance(agent)).to.include({ available: '9.99', held: '0.01' });

    // The third block: executed, the hold captured.
    await node.mine(1);
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(1);
    const op = await s.db('operations').where({ id: opId }).first();
    expect(op.status).to.equal('executed');
    expect(op.details).to.include({ settled_on_chain: true, settled_block: Number(usedIn) });
    expect(await balance(agent)).to.include({ available: '9.99', held: '0' });
  });

  it('keeps a purchase executed with the money gone when the seller answers 500 after settling it', async () => {
    const agent = await s.agent({ USDC: '10' });
    const sellerBefore = await s.usdcBalance(payTo);
    const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: randomUUID(), body: { url: `${seller.url}/weather-fails`, max_amount: '50000' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ ok: true, paid: true, seller_accepted: false, settled: false, status: 500 });
    expect(res.body.body).to.deep.include({ error: 'the forecast broke' });
    const opId = res.body.operation_id as string;

    // The money left on chain at once; the ledger holds it until the confirmations.
    expect(await s.usdcBalance(agent.address)).to.equal(9_990_000n);
    expect((await s.usdcBalance(payTo)) - sellerBefore).to.equal(10_000n);
    let op = await s.db('operations').where({ id: opId }).first();
    expect(op.status).to.equal('submitted');
    expect(op.details).to.include({ upstream_status: 500, seller_accepted: false, used_on_chain: true });
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(0);

    await node.mine(2);
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(1);
    op = await s.db('operations').where({ id: opId }).first();
    expect(op.status).to.equal('executed');
    expect(await balance(agent)).to.include({ available: '9.99', held: '0' });
    // The ledger and the chain agree.
    expect((await s.services.inbound!.reconciler.run({ agentId: agent.agentId })).drift).to.deep.equal([]);
  });
});
