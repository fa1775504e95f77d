// Issue 30, items 4 and 5, on a real Anvil: a deposit credited and then orphaned by a reorganisation deeper than the
// confirmations is reversed (and credited again, once, when the new branch mines it); a reversed deposit the wallet had
// already spent leaves a deficit that refuses its next write, shows in /balances and in reconcile, and is covered by
// the next deposit; ETH that a contract forwards to a wallet (an internal transfer) is credited once.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { encodeFunctionData, getAddress, pad, parseEther, toHex, type Hex } from 'viem';
import { internalTransfersOf, internalTransfersOfCallFrames, type CallFrame, type ParityTrace } from '../../src/chain/evm/traces.js';
import type { Address } from '../../src/chain/port.js';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { DepositWatcher } from '../../src/services/deposit-watcher.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';
import type { TestAgent } from '../helpers/server.js';
import { sendUsdc } from './helpers.js';

/**
 * A forwarder: any call sends its whole msg.value to the address in the first calldata word, and reverts when that
 * call fails. Hand-assembled (no artifact): the 12-byte init code copies the 24-byte runtime
 *   PUSH1 0 x4, CALLVALUE, PUSH1 0, CALLDATALOAD, GAS, CALL, ISZERO, PUSH1 0x13, JUMPI, STOP, JUMPDEST, PUSH1 0, DUP1, REVERT
 */
const FORWARDER_BYTECODE: Hex = '0x6018600c60003960186000f36000600060006000346000355af115601357005b600080fd';

async function drain(watcher: DepositWatcher): Promise<void> {
  for (let i = 0; i < 30; i++) if ((await watcher.tick()) === 0) return;
  throw new Error('the deposit watcher did not settle');
}

describe('chain deposits: deep reorganisations and internal ETH transfers (Anvil)', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let watcher: DepositWatcher;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { env: { CHAIN_CONFIRMATIONS: '3' } });
    watcher = s.services.inbound!.deposits;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const balanceRow = async (agent: TestAgent, asset: string): Promise<Record<string, string>> => {
    const res = await s.request('GET', '/v1/agent/balances', { agent });
    expect(res.status).to.equal(200);
    return res.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === asset);
  };
  const depositsOf = (hash: Hex) => s.db('chain_deposits').whereRaw('lower(tx_hash) = lower(?)', [hash]).orderBy('credited_at');
  const tip = () => node.client.getBlockNumber({ cacheTime: 0 });
  /** Drops every block after the snapshot and grows a longer branch without them (a reorganisation deeper than 3). */
  const reorganise = async (snapshot: string, orphanedTip: bigint) => {
    await node.rpc('evm_revert', [snapshot]);
    await node.mine(Number(orphanedTip - (await tip())) + 4);
    expect((await tip()) > orphanedTip).to.equal(true);
  };
  const pay = (agent: TestAgent, to: Address, amount: string) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset: 'USDC', amount } });

  it('credits once the ETH a contract forwards to a wallet (an internal transfer)', async () => {
    const agent = await s.agent();
    const sender = node.devWallet(4);
    const deployHash = await sender.sendTransaction({ data: FORWARDER_BYTECODE });
    const forwarder = (await node.client.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 50 })).contractAddress!;
    expect(await node.client.getCode({ address: forwarder })).to.have.length.greaterThan(2);

    const before = await node.client.getBalance({ address: agent.address });
    const hash = await sender.sendTransaction({ to: forwarder, value: parseEther('0.5'), data: pad(agent.address, { size: 32 }) });
    const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(receipt.status).to.equal('success');
    // The ETH reached the wallet inside the call: the transaction itself was sent to the forwarder.
    expect((await node.client.getBalance({ address: agent.address })) - before).to.equal(parseEther('0.5'));
    // Both trace methods the watcher can use (trace_block, Geth's debug_traceBlockByHash) see it alike.
    const block = { number: receipt.blockNumber, hash: receipt.blockHash };
    const viaTrace = internalTransfersOf(await node.rpc<ParityTrace[]>('trace_block', [toHex(block.number)]));
    const viaDebug = internalTransfersOfCallFrames(await node.rpc<{ txHash: string; result: CallFrame }[]>('debug_traceBlockByHash', [block.hash, { tracer: 'callTracer' }]), block);
    expect(viaTrace.map((t) => [t.from, t.to, t.value, t.txHash, t.index])).to.deep.equal([[getAddress(forwarder), agent.address, parseEther('0.5'), hash, 0]]);
    expect(viaDebug).to.deep.equal(viaTrace);
    await node.mine(2);
    await drain(watcher);
    expect((await balanceRow(agent, 'ETH')).available).to.equal('0.5');
    // More blocks and passes change nothing.
    await node.mine(3);
    await drain(watcher);
    await drain(watcher);
    expect((await balanceRow(agent, 'ETH')).available).to.equal('0.5');
    const rows = await depositsOf(hash);
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ wallet_id: agent.walletId, asset_symbol: 'ETH', log_index: -2, amount: parseEther('0.5').toString(), from_address: forwarder.toLowerCase() });
    const activity = await s.request('GET', '/v1/agent/activity?type=deposit', { agent });
    expect(activity.body.items.map((i: { description: string }) => i.description)).to.have.length(1);
    expect(activity.body.items[0].description).to.include('sent by a contract');
  });

  it('credits once the ETH one of our accounts pays another (an internal transfer of the payer account)', async () => {
    const payer = await s.agent({ ETH: '1' });
    const payee = await s.agent();
    const paid = await s.request('POST', '/v1/agent/payments', { agent: payer, idempotencyKey: randomUUID(), body: { to: payee.address, asset: 'ETH', amount: '0.1' } });
    expect(paid.status).to.equal(200);
    const clock = setInterval(() => void node.mine(1).catch(() => {}), 200);
    const [op] = await s.settle([paid.body.operation_id]).finally(() => clearInterval(clock));
    expect(op!.status).to.equal('executed');
    await node.mine(3);
    await drain(watcher);
    await drain(watcher);
    expect((await balanceRow(payee, 'ETH')).available).to.equal('0.1');
    const rows = await depositsOf(op!.tx_hash as Hex);
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ wallet_id: payee.walletId, log_index: -2, amount: parseEther('0.1').toString() });
  });

  it('reverses a credited deposit whose block a reorganisation beyond the confirmations orphaned; the re-mined one is credited once', async () => {
    const agent = await s.agent();
    const outsider = node.devWallet(2);
    await mintToken(node.devWallet(0), node.client, s.token, outsider.account.address, 25_000_000n);
    await drain(watcher);
    const snapshot = await node.rpc<string>('evm_snapshot');

    // Signed once, so the same transaction can be mined again on the new branch.
    const request = await outsider.prepareTransactionRequest({ to: s.token, data: encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [agent.address, 25_000_000n] }) });
    const raw = await outsider.signTransaction(request);
    const hash = await node.client.sendRawTransaction({ serializedTransaction: raw });
    await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    await node.mine(3);
    await drain(watcher);
    expect((await balanceRow(agent, 'USDC')).available).to.equal('25');

    // A reorganisation deeper than the 3 confirmations drops the credited deposit.
    await reorganise(snapshot, await tip());
    await drain(watcher);
    const usdc = await balanceRow(agent, 'USDC');
    expect(usdc.available).to.equal('0');
    expect(usdc).to.not.have.property('deficit');
    const [row] = await depositsOf(hash);
    expect(row.reversed_at).to.be.an.instanceOf(Date);
    const entries = await s.db('journal_entries').where({ wallet_id: agent.walletId, entry_type: 'deposit_reversal' });
    expect(entries.map((e: { amount: string }) => e.amount)).to.deep.equal(['-25000000']);
    expect(await s.db('wallet_deficits').where({ wallet_id: agent.walletId })).to.have.length(0);
    const activity = await s.request('GET', '/v1/agent/activity?type=deposit', { agent });
    expect(activity.body.items[0]).to.include({ direction: 'out', amount: '25' });
    expect(activity.body.items[0].description).to.include('reversed');

    // The same transaction mined on the new branch is credited again, once.
    expect(await node.client.sendRawTransaction({ serializedTransaction: raw })).to.equal(hash);
    await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    await node.mine(3);
    await drain(watcher);
    await drain(watcher);
    expect((await balanceRow(agent, 'USDC')).available).to.equal('25');
    const rows = await depositsOf(hash);
    expect(rows.map((r: { reversed_at: Date | null }) => r.reversed_at === null)).to.deep.equal([false, true]);
  });

  it('leaves a deficit when the reversed deposit was spent: shown in balances and reconcile, the next write refused until a deposit covers it', async () => {
    const agent = await s.agent();
    await drain(watcher);
    const snapshot = await node.rpc<string>('evm_snapshot');
    await sendUsdc(node, s.token, 3, agent.address, '10');
    await node.mine(2);
    await drain(watcher);
    expect((await balanceRow(agent, 'USDC')).available).to.equal('10');
    // 6 of it are spent on chain.
    const paid = await pay(agent, randomAddress(), '6');
    expect(paid.status).to.equal(200);
    // Blocks keep coming while it settles (3 confirmations).
    const clock = setInterval(() => void node.mine(1).catch(() => {}), 200);
    const [op] = await s.settle([paid.body.operation_id]).finally(() => clearInterval(clock));
    expect(op!.status).to.equal('executed');
    expect((await balanceRow(agent, 'USDC')).available).to.equal('4');

    await reorganise(snapshot, await tip());
    await drain(watcher);
    const usdc = await balanceRow(agent, 'USDC');
    expect(usdc).to.include({ available: '0', deficit: '6' });
    const entries = await s
      .db('journal_entries')
      .where({ entry_type: 'deposit_reversal' })
      .whereIn('account', [`wallet:${agent.walletId}:available`, `external:deficit:${agent.walletId}`]);
    expect(entries.map((e: { account: string; amount: string }) => [e.account, e.amount]).sort()).to.deep.equal([
      [`external:deficit:${agent.walletId}`, '-6000000'],
      [`wallet:${agent.walletId}:available`, '-4000000'],
    ]);

    // The next write is refused, naming the deficit.
    const refused = await pay(agent, randomAddress(), '0.01');
    expect(refused.status).to.equal(422);
    expect(refused.body.error.code).to.equal('insufficient_funds');
    expect(refused.body.error.details).to.deep.include({ reason: 'deficit', deficits: [{ asset: 'USDC', amount: '6' }] });

    // Reconcile (what `agentctl chain reconcile` prints) lists it.
    const report = await s.services.inbound!.reconciler.run({ agentId: agent.agentId });
    expect(report.deficits).to.have.length(1);
    expect(report.deficits[0]).to.include({ agent_id: agent.agentId, wallet_id: agent.walletId, asset: 'USDC', amount: '6' });
    expect(getAddress(report.deficits[0]!.address)).to.equal(agent.address);

    // A later deposit covers it first; writes resume.
    await sendUsdc(node, s.token, 3, agent.address, '7');
    await node.mine(2);
    await drain(watcher);
    const covered = await balanceRow(agent, 'USDC');
    expect(covered.available).to.equal('1');
    expect(covered).to.not.have.property('deficit');
    expect(await s.db('wallet_deficits').where({ wallet_id: agent.walletId })).to.have.length(0);
    expect((await s.services.inbound!.reconciler.run({ agentId: agent.agentId })).deficits).to.deep.equal([]);
    const resumed = await pay(agent, randomAddress(), '0.5');
    expect(resumed.status).to.equal(200);
    expect(resumed.body.status).to.equal('accepted');
  });
});
