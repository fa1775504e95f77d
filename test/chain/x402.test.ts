// x402 on a real chain: a real @x402/express seller whose @x402/core facilitator (the @x402/evm exact scheme with a
// viem signer) settles on the same Anvil. The purchase's EIP-3009 authorization is signed for the chain's token;
// the seller's on-chain USDC rises by the price and the operation becomes executed once the chain shows the
// authorization used. A signed authorization nobody uses fails at valid_before with its hold released.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';
import { startChainSeller, type ChainSeller } from './x402-seller.js';

describe('x402 on chain (Anvil)', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };
  let seller: ChainSeller;
  let sellerUrl: string;
  let settledBy: string[];
  const payTo = randomAddress();

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' } });
    seller = await startChainSeller(node, s, payTo);
    ({ url: sellerUrl, settledBy } = seller);
  });

  after(async () => {
    await seller?.close();
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const balance = async (agent: { headers: Record<string, string> }, asset: string) => {
    const res = await s.request('GET', '/v1/agent/balances', { agent: agent as never });
    return res.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === asset) as { available: string; held: string };
  };

  it('pays a real seller on chain: its USDC rises by the price and the purchase is executed once the authorization is used', async () => {
    const agent = await s.agent({ USDC: '10' });
    const quote = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: `${sellerUrl}/weather` } });
    expect(quote.status).to.equal(200);
    expect(quote.body).to.include({ supported: true, x402_required: true });
    expect(quote.body.price).to.include({ amount: '0.01', asset_symbol: 'USDC', network: 'eip155:31337' });

    const before = await s.usdcBalance(payTo);
    const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: randomUUID(), body: { url: `${sellerUrl}/weather`, max_amount: '50000' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ paid: true, settled: true, status: 200 });
    expect(res.body.body).to.deep.equal({ forecast: 'sunny' });
    expect(settledBy).to.have.length(1);
    expect((await s.usdcBalance(payTo)) - before).to.equal(10_000n);

    // The seller answered; the chain has not been consulted yet: the money is still held.
    const opId = res.body.operation_id as string;
    let op = await s.db('operations').where({ id: opId }).first();
    expect(op.status).to.equal('submitted');
    expect(op.tx_hash).to.equal(settledBy[0]!.toLowerCase());
    expect(op.details).to.include({ chain_id: 31337, token: s.token, network: 'eip155:31337' });
    expect(await balance(agent, 'USDC')).to.include({ available: '9.99', held: '0.01' });
    // Reconcile counts the used authorization of the open operation: no drift meanwhile.
    expect((await s.services.inbound!.reconciler.run({ agentId: agent.agentId })).drift).to.deep.equal([]);

    expect(await s.services.x402.trackOnChain(s.db)).to.equal(1);
    op = await s.db('operations').where({ id: opId }).first();
    expect(op.status).to.equal('executed');
    expect(op.details).to.include({ settled_on_chain: true });
    expect(await balance(agent, 'USDC')).to.include({ available: '9.99', held: '0' });
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(0);
    // The ledger and the chain agree.
    expect((await s.services.inbound!.reconciler.run({ agentId: agent.agentId })).drift).to.deep.equal([]);
  });

  it('fails a signed authorization nobody used once valid_before passes on chain, and releases its hold', async () => {
    const agent = await s.agent({ USDC: '5' });
    const res = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: randomUUID(), body: { pay_to: randomAddress(), amount: '1500000', max_timeout_seconds: 60 } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ x402_version: 2, network: 'eip155:31337', payment_header_name: 'PAYMENT-SIGNATURE' });
    const payload = JSON.parse(Buffer.from(res.body.payment_header, 'base64').toString('utf8'));
    expect(payload.accepted).to.include({ network: 'eip155:31337', asset: s.token });
    expect(await balance(agent, 'USDC')).to.include({ available: '3.5', held: '1.5' });

    // Before valid_before: still open.
    await node.mine(1);
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(0);
    expect((await s.db('operations').where({ id: res.body.operation_id }).first()).status).to.equal('accepted');

    // A block past valid_before, the authorization unused.
    await node.rpc('evm_increaseTime', [120]);
    await node.mine(1);
    expect(await s.services.x402.trackOnChain(s.db)).to.equal(1);
    const op = await s.db('operations').where({ id: res.body.operation_id }).first();
    expect(op).to.include({ status: 'execution_failed', error_code: 'authorization_expired' });
    expect(await balance(agent, 'USDC')).to.include({ available: '5', held: '0' });
    // x402 has no public failure event (spec 6.3).
    expect(await s.db('events').where({ agent_id: agent.agentId })).to.have.length(0);
  });
});
