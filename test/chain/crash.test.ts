// Acceptance 5 of issue 11: the worker is SIGKILLed between broadcast and receipt 10 times. Anvil's automine is
// off, so a broadcast transaction waits in the pool until the test mines it after the kill. Recipients receive
// exactly what was paid (the same signed bytes are rebroadcast, never a new signature) and every operation ends.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { parseEther, parseUnits } from 'viem';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, startWorkerProcess, type WorkerProcess } from '../helpers/chain.js';
import { waitUntil } from '../webhooks/helpers/context.js';

describe('chain settlement: crash safety', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: Awaited<ReturnType<typeof startChainServer>>;
  let worker: WorkerProcess | null = null;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
  });
  after(async () => {
    await worker?.stop('SIGKILL');
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('pays exactly once across 10 SIGKILLs between broadcast and receipt, every operation terminal', async () => {
    const agent = await s.agent({ USDC: '100', ETH: '1' });
    const to = randomAddress();
    await node.rpc('evm_setAutomine', [false]);
    const ids: string[] = [];
    const paid = { USDC: 0n, ETH: 0n };
    for (let round = 0; round < 10; round++) {
      const asset = round % 2 === 0 ? 'USDC' : 'ETH';
      const amount = asset === 'USDC' ? `${round + 1}.5` : `0.0${round}1`;
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset, amount } });
      expect(res.status).to.equal(200);
      ids.push(res.body.operation_id);
      paid[asset] += asset === 'USDC' ? parseUnits(amount, 6) : parseEther(amount);

      worker = startWorkerProcess(node, s.databaseUrl);
      // Broadcast: the transaction is in the node's pool, not mined (automine is off).
      const hash = await waitUntil(
        'the broadcast',
        async () => {
          const row = await s.db('chain_transactions').where({ operation_id: res.body.operation_id }).first();
          if (!row) return null;
          const tx = await node.client.getTransaction({ hash: row.tx_hash }).catch(() => null);
          return tx ? (row.tx_hash as `0x${string}`) : null;
        },
        30_000,
      );
      await worker.stop('SIGKILL');
      worker = null;
      await node.mine(1);
      const receipt = await node.client.getTransactionReceipt({ hash });
      expect(receipt.status).to.equal('success');
    }
    await node.rpc('evm_setAutomine', [true]);
    worker = startWorkerProcess(node, s.databaseUrl);
    const ops = await s.settle(ids, { timeoutMs: 60_000, drive: false });
    expect(ops.map((o) => o.status)).to.deep.equal(ids.map(() => 'executed'));

    expect(await s.usdcBalance(to)).to.equal(paid.USDC);
    expect(await node.client.getBalance({ address: to })).to.equal(paid.ETH);
    const txs = await s.db('chain_transactions').whereIn('operation_id', ids);
    expect(txs.filter((t) => t.status === 'mined')).to.have.length(10);
    const byOp = new Map(ops.map((o) => [o.id, o.tx_hash]));
    for (const t of txs.filter((t) => t.status === 'mined')) expect(byOp.get(t.operation_id)).to.equal(t.tx_hash);
    const balances = (await s.request('GET', '/v1/agent/balances', { agent })).body.items as { asset_symbol: string; available: string; held: string }[];
    expect(parseUnits(balances.find((b) => b.asset_symbol === 'USDC')!.available, 6)).to.equal(await s.usdcBalance(agent.address));
    expect(parseEther(balances.find((b) => b.asset_symbol === 'ETH')!.available)).to.equal(await node.client.getBalance({ address: agent.address }));
  });
});
