// Acceptance 9 of issue 11: the node is stopped for 10 s while 20 payments are made. All are accepted (holds
// placed), reads and /readyz keep answering (the chain reported unreachable), and once the node is back every
// payment is executed, none sent twice.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { parseUnits } from 'viem';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer } from '../helpers/chain.js';

describe('chain settlement: node unreachable', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: Awaited<ReturnType<typeof startChainServer>>;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { worker: true });
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it('accepts 20 payments while the node is down for 10 s and executes each exactly once when it returns', async () => {
    const agent = await s.agent({ USDC: '500' });
    const to = randomAddress();
    const ready = await s.request('GET', '/readyz');
    expect(ready.body.chain).to.include({ mode: 'evm', chain_id: 31337, state: 'ok' });

    await node.pause();
    const stoppedAt = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset: 'USDC', amount: `${i + 1}` } });
      expect(res.status).to.equal(200);
      expect(res.body.status).to.equal('accepted');
      ids.push(res.body.operation_id);
    }
    const balances = await s.request('GET', '/v1/agent/balances', { agent });
    expect(balances.status).to.equal(200);
    expect(balances.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC')).to.include({ available: '290', held: '210' });
    const down = await s.request('GET', '/readyz');
    expect(down.status).to.equal(200);
    expect(down.body.chain).to.include({ state: 'unreachable' });
    expect((await s.db('operations').whereIn('id', ids).where({ status: 'accepted' })).length).to.equal(20);

    await new Promise((r) => setTimeout(r, Math.max(0, 10_000 - (Date.now() - stoppedAt))));
    await node.resume();
    const ops = await s.settle(ids, { timeoutMs: 60_000 });
    expect(ops.map((o) => o.status)).to.deep.equal(ids.map(() => 'executed'));
    expect(await s.usdcBalance(to)).to.equal(parseUnits('210', 6));
    const mined = await s.db('chain_transactions').whereIn('operation_id', ids).where({ status: 'mined' });
    expect(mined).to.have.length(20);
    expect(new Set(mined.map((t) => t.authorization_nonce)).size).to.equal(20);
    expect((await s.request('GET', '/v1/agent/balances', { agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC')).to.include({ available: '290', held: '0' });
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('290', 6));
  });
});
