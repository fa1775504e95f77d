// Acceptance 4 of issue 11: 50 concurrent payments from 5 wallets, settled by two worker processes at once: all
// mined, every sender's nonces contiguous from its first (no collision, no gap), and the chain equals the ledger.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { getAddress, parseEther, parseUnits } from 'viem';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, startWorkerProcess, type ChainAgent, type WorkerProcess } from '../helpers/chain.js';

describe('chain settlement: concurrency', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: Awaited<ReturnType<typeof startChainServer>>;
  const workers: WorkerProcess[] = [];

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
  });
  after(async () => {
    for (const w of workers) await w.stop('SIGKILL');
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('mines 50 concurrent payments from 5 wallets with contiguous nonces per sender, chain equal to ledger', async () => {
    const agents: ChainAgent[] = [];
    for (let i = 0; i < 5; i++) agents.push(await s.agent({ USDC: '100', ETH: '1' }));
    const recipients = Array.from({ length: 5 }, () => randomAddress());
    const payments = agents.flatMap((agent, a) =>
      Array.from({ length: 10 }, (_, i) => ({ agent, to: recipients[(a + i) % 5]!, asset: i % 2 === 0 ? 'USDC' : 'ETH', amount: i % 2 === 0 ? `${i + 1}.25` : `0.0${i}` })),
    );
    const responses = await Promise.all(
      payments.map((p) => s.request('POST', '/v1/agent/payments', { agent: p.agent, idempotencyKey: randomUUID(), body: { to: p.to, asset: p.asset, amount: p.amount } })),
    );
    expect(responses.map((r) => r.status)).to.deep.equal(payments.map(() => 200));
    const ids = responses.map((r) => r.body.operation_id as string);

    workers.push(startWorkerProcess(node, s.databaseUrl), startWorkerProcess(node, s.databaseUrl));
    const ops = await s.settle(ids, { timeoutMs: 90_000, drive: false });
    expect(ops.map((o) => o.status)).to.deep.equal(ids.map(() => 'executed'));

    // One mined transaction per operation, and per sender nonces 0..n-1 with no repeat and no hole.
    const mined = await s.db('chain_transactions').whereIn('operation_id', ids).where({ status: 'mined' });
    expect(mined).to.have.length(50);
    const bySender = new Map<string, number[]>();
    for (const tx of mined) bySender.set(tx.from_address, [...(bySender.get(tx.from_address) ?? []), Number(tx.nonce)]);
    expect(bySender.size).to.equal(1); // the relayer: each payment of an account wallet is its lane call (issue 24)
    for (const [sender, nonces] of bySender) {
      const sorted = [...nonces].sort((a, b) => a - b);
      const first = sorted[0]!;
      expect(sorted, sender).to.deep.equal(sorted.map((_, i) => first + i));
      expect(await node.client.getTransactionCount({ address: getAddress(sender) })).to.equal(first + sorted.length);
    }

    // Recipients got exactly what was paid.
    for (const to of recipients) {
      const paid = payments.filter((p) => p.to === to);
      expect(await s.usdcBalance(to)).to.equal(paid.filter((p) => p.asset === 'USDC').reduce((sum, p) => sum + parseUnits(p.amount, 6), 0n));
      expect(await node.client.getBalance({ address: to })).to.equal(paid.filter((p) => p.asset === 'ETH').reduce((sum, p) => sum + parseEther(p.amount), 0n));
    }
    // Chain equals ledger for every wallet (nothing held any more).
    for (const agent of agents) {
      const balances = (await s.request('GET', '/v1/agent/balances', { agent })).body.items as { asset_symbol: string; available: string; held: string }[];
      const usdc = balances.find((b) => b.asset_symbol === 'USDC')!;
      const eth = balances.find((b) => b.asset_symbol === 'ETH')!;
      expect([usdc.held, eth.held]).to.deep.equal(['0', '0']);
      expect(parseUnits(usdc.available, 6)).to.equal(await s.usdcBalance(agent.address));
      expect(parseEther(eth.available)).to.equal(await node.client.getBalance({ address: agent.address }));
    }
  });
});
