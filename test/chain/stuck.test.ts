// Stuck transactions (issue 11 design): a transaction not mined within CHAIN_REBROADCAST_MS is re-signed at the
// same nonce with higher fees; one not mined within CHAIN_SUBMIT_TIMEOUT_MS is replaced by a zero-value
// cancellation, and when that is mined the operation fails, its hold released and its failure event written.
// Anvil's automine is off, so nothing is mined until the test says so.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { parseEther } from 'viem';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer } from '../helpers/chain.js';

describe('chain settlement: stuck transactions', function () {
  this.timeout(90_000);
  let node: AnvilNode;
  before(async () => {
    node = await startAnvil();
  });
  after(async () => node?.stop());
  afterEach(async () => node.rpc('evm_setAutomine', [true]));

  async function pay(s: Awaited<ReturnType<typeof startChainServer>>, asset: string, amount: string) {
    const agent = await s.agent(asset === 'USDC' ? { USDC: '50' } : { ETH: '1' });
    const to = randomAddress();
    await node.rpc('evm_setAutomine', [false]);
    const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset, amount } });
    expect(res.status).to.equal(200);
    return { agent, to, id: res.body.operation_id as string };
  }
  const tick = (s: Awaited<ReturnType<typeof startChainServer>>) => runSettlementTick({ db: s.db, ledger: s.services.ledger });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  describe('fee bump', () => {
    let s: Awaited<ReturnType<typeof startChainServer>>;
    before(async () => {
      s = await startChainServer(node, { env: { CHAIN_REBROADCAST_MS: '300', CHAIN_SUBMIT_TIMEOUT_MS: '600000' } });
    });
    after(async () => {
      await s?.close();
      await s?.dropDatabase();
    });

    it('re-signs a stale transaction at the same nonce with higher fees, and exactly one of them is mined', async () => {
      const { to, id } = await pay(s, 'USDC', '4.5');
      await tick(s);
      const [first] = await s.db('chain_transactions').where({ operation_id: id });
      expect(first.status).to.equal('broadcast');
      await sleep(400);
      await tick(s);
      const attempts = await s.db('chain_transactions').where({ operation_id: id }).orderBy('attempt');
      expect(attempts.map((a) => [a.nonce, a.attempt, a.status])).to.deep.equal([
        [first.nonce, 0, 'broadcast'],
        [first.nonce, 1, 'broadcast'],
      ]);
      expect(BigInt(attempts[1].max_fee_per_gas) > BigInt(attempts[0].max_fee_per_gas)).to.equal(true);
      expect(attempts[1].authorization_nonce).to.equal(attempts[0].authorization_nonce);
      await node.mine(1);
      const [op] = await s.settle([id]);
      expect(op!.status).to.equal('executed');
      expect(op!.tx_hash).to.equal(attempts[1].tx_hash);
      expect(await s.usdcBalance(to)).to.equal(4_500_000n);
      const after = await s.db('chain_transactions').where({ operation_id: id }).orderBy('attempt');
      expect(after.map((a) => a.status)).to.deep.equal(['replaced', 'mined']);
    });
  });

  describe('submission timeout', () => {
    let s: Awaited<ReturnType<typeof startChainServer>>;
    before(async () => {
      s = await startChainServer(node, { env: { CHAIN_REBROADCAST_MS: '600000', CHAIN_SUBMIT_TIMEOUT_MS: '1000' } });
    });
    after(async () => {
      await s?.close();
      await s?.dropDatabase();
    });

    it('replaces a transaction stuck past the timeout by a cancellation and fails the operation once that is mined', async () => {
      const { agent, to, id } = await pay(s, 'ETH', '0.2');
      await tick(s);
      expect((await s.db('operations').where({ id }).first()).status).to.equal('submitted');
      await sleep(1100);
      await tick(s); // queues the cancellation
      await tick(s); // broadcasts it
      const txs = await s.db('chain_transactions').where({ operation_id: id }).orderBy('attempt');
      expect(txs.map((t) => t.kind)).to.deep.equal(['lane', 'cancel']);
      expect(txs[1].nonce).to.equal(txs[0].nonce);
      expect(txs[0].to_address.toLowerCase()).to.equal(agent.address.toLowerCase()); // the lane call goes to the account
      expect(txs[1].to_address.toLowerCase()).to.equal(txs[0].from_address.toLowerCase()); // the sender's own (the relayer's)
      await node.mine(1);
      const [op] = await s.settle([id]);
      expect(op).to.include({ status: 'execution_failed', error_code: 'submission_timeout' });
      expect(await node.client.getBalance({ address: to })).to.equal(0n);
      const receipt = await node.client.getTransactionReceipt({ hash: txs[1].tx_hash });
      const eth = (await s.request('GET', '/v1/agent/balances', { agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'ETH');
      expect(eth.held).to.equal('0');
      // The relayer paid the cancellation's gas (it sent the lane call), the account nothing, and the ledger says exactly that.
      expect(receipt.from.toLowerCase()).to.equal(txs[0].from_address.toLowerCase());
      const onchain = await node.client.getBalance({ address: agent.address });
      expect(onchain).to.equal(parseEther('1'));
      expect(parseEther(eth.available)).to.equal(onchain);
      const events = (await s.db('events').where({ operation_id: id })).map((e) => e.type);
      expect(events).to.include('payment.execution_failed');
    });
  });

  describe('confirmations', () => {
    let s: Awaited<ReturnType<typeof startChainServer>>;
    before(async () => {
      s = await startChainServer(node, { env: { CHAIN_CONFIRMATIONS: '3' } });
    });
    after(async () => {
      await s?.close();
      await s?.dropDatabase();
    });

    it('stays submitted once mined until CHAIN_CONFIRMATIONS blocks hold the transaction, then executes', async () => {
      const agent = await s.agent({ USDC: '10' });
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to: randomAddress(), asset: 'USDC', amount: '1' } });
      const id = res.body.operation_id as string;
      // Each pass is past the re-check delay (CHAIN_POLL_MS=50), so every one looks at the receipt.
      for (let i = 0; i < 5; i++) {
        await tick(s);
        await sleep(60);
      }
      const op = await s.db('operations').where({ id }).first();
      expect(op.status).to.equal('submitted');
      expect((await node.client.getTransactionReceipt({ hash: op.tx_hash })).status).to.equal('success');
      await node.mine(1); // two confirmations
      for (let i = 0; i < 3; i++) {
        await sleep(60);
        await tick(s);
      }
      expect((await s.db('operations').where({ id }).first()).status).to.equal('submitted');
      await node.mine(1); // three
      const [done] = await s.settle([id]);
      expect(done!.status).to.equal('executed');
    });
  });
});
