// Outbound settlement on a real chain (issue 11 acceptance 3 and 6): payments and crypto withdrawals move USDC by a
// relayed EIP-3009 transfer and ETH by a plain transaction; a revert fails the operation, releases the hold and
// delivers payment.execution_failed to a subscribed webhook.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { formatUnits, getAddress, parseEther } from 'viem';
import { createLogger } from '../../src/lib/logger.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createDeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';
import type { TestAgent } from '../helpers/server.js';
import { createTestPki, startReceiver, type Receiver } from '../webhooks/helpers/receiver.js';

describe('chain settlement: outbound', function () {
  this.timeout(90_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { env: { UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' } });
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const pay = (agent: TestAgent, body: Record<string, unknown>) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body });
  const balance = async (agent: TestAgent, asset: string) => {
    const res = await s.request('GET', '/v1/agent/balances', { agent });
    return res.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === asset);
  };

  describe('createPayment (USDC)', () => {
    it('moves exactly 12.5 USDC to an outside address through the relayer while the wallet holds no ETH', async () => {
      const agent = await s.agent({ USDC: '100' });
      const to = randomAddress();
      const res = await pay(agent, { to, asset: 'USDC', amount: '12.5' });
      expect(res.status).to.equal(200);
      expect(res.body.status).to.equal('accepted');
      const accepted = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}?include=onchain`, { agent });
      expect(accepted.body.operation.onchain).to.include({ chain_id: 31337, tx_hash: null, block_number: null, gas_used: null });

      const [op] = await s.settle([res.body.operation_id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(to)).to.equal(12_500_000n);
      expect(await node.client.getBalance({ address: agent.address })).to.equal(0n);
      const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
      expect(receipt.status).to.equal('success');

      const read = await s.request('GET', `/v1/agent/payments/${res.body.operation_id}?include=onchain`, { agent });
      expect(read.status).to.equal(200);
      const onchain = read.body.operation.onchain;
      // Issue 24: the transaction goes to the agent's account (its lane), which moves the token.
      expect(onchain).to.include({
        chain_id: 31337,
        tx_hash: op!.tx_hash,
        block_number: Number(receipt.blockNumber),
        block_hash: receipt.blockHash,
        to: agent.address,
        token_address: s.token,
        to_address: to,
        wallet_address: agent.address,
        agent_wrapper_address: agent.address,
        agent_sender_address: getAddress(receipt.from),
        gas_used: receipt.gasUsed.toString(),
        effective_gas_price: receipt.effectiveGasPrice.toString(),
      });
      // Sent by the relayer, not the wallet.
      expect(onchain.from).to.equal(getAddress(receipt.from));
      expect(onchain.from).to.not.equal(agent.address);
      expect(onchain.log_index).to.be.a('number');

      const usdc = await balance(agent, 'USDC');
      expect(usdc).to.include({ available: '87.5', held: '0' });
      expect(formatUnits(await s.usdcBalance(agent.address), 6)).to.equal('87.5');
    });
  });

  describe('createPayment (ETH)', () => {
    it('moves exactly 0.25 ETH from the wallet, holds a gas reserve meanwhile, and charges no gas (the relayer pays it)', async () => {
      const agent = await s.agent({ ETH: '1' });
      const to = randomAddress();
      const res = await pay(agent, { to, asset: 'ETH', amount: '0.25' });
      expect(res.status).to.equal(200);
      const heldNow = await balance(agent, 'ETH');
      expect(parseEther(heldNow.held)).to.equal(parseEther('0.25') + BigInt(s.config.chain.ethGasReserveWei));

      const [op] = await s.settle([res.body.operation_id]);
      expect(op!.status).to.equal('executed');
      expect(await node.client.getBalance({ address: to })).to.equal(parseEther('0.25'));
      const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
      expect(receipt.status).to.equal('success');
      // Issue 24: the wallet is the agent's account; the relayer sends its lane call and pays the gas.
      expect(receipt.from.toLowerCase()).to.not.equal(agent.address.toLowerCase());
      expect(receipt.to!.toLowerCase()).to.equal(agent.address.toLowerCase());
      const after = await balance(agent, 'ETH');
      expect(after.held).to.equal('0');
      // The ledger equals the chain: exactly the amount left the wallet (the gas was the relayer's).
      expect(parseEther(after.available)).to.equal(await node.client.getBalance({ address: agent.address }));
      expect(parseEther(after.available)).to.equal(parseEther('0.75'));
    });

    it('fails without sending when the wallet does not hold the ETH on chain, and releases the hold', async () => {
      const agent = await s.agent();
      await s.services.ledger.account.fund(s.db, agent.agentId, { asset: 'ETH', amount: '1' });
      const res = await pay(agent, { to: randomAddress(), asset: 'ETH', amount: '0.5' });
      const [op] = await s.settle([res.body.operation_id]);
      expect(op).to.include({ status: 'execution_failed', error_code: 'insufficient_onchain_balance', tx_hash: null });
      expect(await balance(agent, 'ETH')).to.include({ available: '1', held: '0' });
    });
  });

  describe('createCryptoWithdrawal', () => {
    it('moves the USDC to the trusted destination on chain', async () => {
      const agent = await s.agent({ USDC: '20' });
      const to = randomAddress();
      const { destination_id } = await s.services.ledger.destinations.add(s.db, agent.agentId, { kind: 'crypto', chain: 'base', address: to, label: 'Cold', timelockSeconds: 0 });
      expect((await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: randomUUID() })).status).to.equal(200);
      const res = await s.request('POST', '/v1/agent/withdrawals/to-crypto', { agent, idempotencyKey: randomUUID(), body: { destination_id, asset: 'USDC', amount: '7.25' } });
      expect(res.status).to.equal(200);
      const [op] = await s.settle([res.body.operation_id]);
      expect(op!.status).to.equal('executed');
      expect(await s.usdcBalance(to)).to.equal(7_250_000n);
      expect((await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` })).status).to.equal('success');
      expect(await balance(agent, 'USDC')).to.include({ available: '12.75', held: '0' });
      const events = (await s.db('events').where({ operation_id: op!.id })).map((e) => e.type);
      expect(events).to.include('withdrawal.settled');
    });
  });

  describe('a transfer that reverts on chain', () => {
    let receiver: Receiver;
    let pki: Awaited<ReturnType<typeof createTestPki>>;
    before(async () => {
      pki = await createTestPki();
      receiver = await startReceiver(pki);
    });
    after(async () => receiver?.close());

    it('ends execution_failed with the hold released and delivers payment.execution_failed to the webhook', async () => {
      // Funded in the ledger only: the chain refuses the transfer (ERC20InsufficientBalance) once it is mined.
      const agent = await s.agent();
      await s.services.ledger.account.fund(s.db, agent.agentId, { asset: 'USDC', amount: '30' });
      const hook = await s.request('POST', '/v1/agent/webhooks', { agent, idempotencyKey: randomUUID(), body: { url: receiver.url('/failed'), event_types: ['payment.execution_failed'] } });
      expect(hook.status).to.equal(200);
      const to = randomAddress();
      const res = await pay(agent, { to, asset: 'USDC', amount: '12.5' });
      const [op] = await s.settle([res.body.operation_id]);
      expect(op).to.include({ status: 'execution_failed', error_code: 'execution_reverted' });
      const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
      expect(receipt.status).to.equal('reverted');
      expect(await s.usdcBalance(to)).to.equal(0n);
      expect(await balance(agent, 'USDC')).to.include({ available: '30', held: '0' });

      const worker = createDeliveryWorker({
        db: s.db,
        clock: s.clock,
        log: createLogger('silent'),
        sealer: createSealer(s.config.masterKey),
        leaseMs: 30_000,
        attemptTimeoutMs: 5000,
        allowLoopback: true,
        ca: pki.ca,
      });
      try {
        for (let i = 0; i < 20 && receiver.requests.length === 0; i++) await worker.runOnce();
      } finally {
        worker.close();
      }
      const [delivered] = await receiver.waitForRequests(1);
      const body = JSON.parse(delivered!.rawBody.toString());
      expect(body.type).to.equal('payment.execution_failed');
      expect(body.data.operation).to.include({ id: op!.id, status: 'execution_failed' });
    });
  });
});
