// Inbound deposits on a real Anvil and Postgres: an outside account's USDC and ETH transfers to a wallet's
// /deposit-address are credited after CHAIN_CONFIRMATIONS, exactly once, by two worker processes with one of
// them killed and restarted between; and a deposit whose block is orphaned before its confirmations is not credited.
import { expect } from 'chai';
import { encodeFunctionData, getAddress, parseEther } from 'viem';
import type { Address, Hex } from '../../src/chain/port.js';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { DepositWatcher } from '../../src/services/deposit-watcher.js';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { logLines, startChainFixture, startWorkerProcess, waitFor, type ChainFixture, type WorkerProcess } from './helpers.js';

/** Ticks until the watcher has nothing left to apply. */
async function drain(watcher: DepositWatcher): Promise<void> {
  for (let i = 0; i < 20; i++) if ((await watcher.tick()) === 0) return;
  throw new Error('the deposit watcher did not settle');
}

describe('chain deposits (Anvil)', function () {
  this.timeout(120_000);
  let chain: ChainFixture;
  let s: TestServer;
  const workers: WorkerProcess[] = [];

  before(async () => {
    // The server answers HTTP only; the worker processes (or the test, through the watcher) follow the chain.
    const probe = await startTestServer();
    try {
      chain = await startChainFixture(probe.db, { confirmations: 3 });
    } finally {
      await probe.close();
    }
    s = await startTestServer({ env: chain.env() });
  });

  after(async () => {
    for (const w of workers) await w.kill();
    if (chain) await chain.close(s.db);
    await s?.close();
  });

  const balance = async (agent: TestAgent, asset: string): Promise<string | undefined> => {
    const res = await s.request('GET', '/v1/agent/balances', { agent });
    expect(res.status).to.equal(200);
    return res.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === asset)?.available;
  };
  const depositAddress = async (agent: TestAgent): Promise<Address> => {
    const res = await s.request('GET', '/v1/agent/deposit-address?asset=USDC', { agent });
    expect(res.status).to.equal(200);
    return getAddress(res.body.deposit_address.address);
  };
  const cursor = async () => (await s.db('chain_cursors').where({ chain_id: 31337, name: 'deposits' }).first()) as { block_number: number; block_hash: string } | undefined;
  const depositsOf = (hash: Hex) => s.db('chain_deposits').whereRaw('lower(tx_hash) = lower(?)', [hash]);

  it('credits 50 USDC and 1 ETH from an outside account once, after 3 confirmations, across two workers and a restart', async () => {
    const agent = await s.createAgent();
    const address = await depositAddress(agent);
    const start = await chain.node.client.getBlockNumber();
    const env = chain.env({ CHAIN_DEPOSIT_START_BLOCK: String(start + 1n) });
    workers.push(await startWorkerProcess(env), await startWorkerProcess(env));

    const usdc = await chain.sendUsdc(3, address, '50');
    const eth = await chain.sendEth(4, address, parseEther('1'));
    // Mined but short of 3 confirmations: the watchers stop before these blocks.
    await waitFor(async () => (await cursor())?.block_number === Number(eth.blockNumber) - 3, 20_000, 'the cursor to reach the confirmed tip');
    expect(await balance(agent, 'USDC')).to.equal('0');
    expect(await depositsOf(usdc.hash)).to.have.length(0);

    // One worker dies mid-way and comes back.
    await workers[0]!.kill();
    await chain.node.mine(1);
    workers[0] = await startWorkerProcess(env);
    await chain.node.mine(2);

    await waitFor(async () => (await balance(agent, 'USDC')) === '50' && (await balance(agent, 'ETH')) === '1', 20_000, 'the deposits to be credited');
    // More blocks and polls change nothing.
    await chain.node.mine(5);
    const tip = await chain.node.client.getBlockNumber();
    await waitFor(async () => (await cursor())?.block_number === Number(tip) - 2, 20_000, 'the cursor to follow the chain');
    expect(await balance(agent, 'USDC')).to.equal('50');
    expect(await balance(agent, 'ETH')).to.equal('1');

    const usdcRows = await depositsOf(usdc.hash);
    expect(usdcRows).to.have.length(1);
    expect(usdcRows[0]).to.include({ wallet_id: agent.walletId, asset_symbol: 'USDC', amount: '50000000', block_number: Number(usdc.blockNumber), token_address: chain.token });
    const ethRows = await depositsOf(eth.hash);
    expect(ethRows).to.have.length(1);
    expect(ethRows[0]).to.include({ asset_symbol: 'ETH', log_index: -1, amount: parseEther('1').toString() });

    const activity = await s.request('GET', '/v1/agent/activity?type=deposit', { agent });
    expect(activity.status).to.equal(200);
    expect(activity.body.items).to.have.length(2);
    const rows = await s.db('activity').where({ agent_id: agent.agentId, type: 'deposit' }).orderBy('asset_symbol');
    expect(rows.map((r: { tx_hash: string }) => r.tx_hash)).to.deep.equal([eth.hash.toLowerCase(), usdc.hash.toLowerCase()]);
    // No public event for deposits (deposit.received is reserved in v1).
    expect(await s.db('events').where({ agent_id: agent.agentId })).to.have.length(0);

    // Exactly one credit logged across every worker process, the killed one included.
    const credited = workers.flatMap((w) => logLines(w, 'deposit credited'));
    expect(credited.filter((l) => l.tx_hash === usdc.hash)).to.have.length(1);
    expect(credited.filter((l) => l.tx_hash === eth.hash)).to.have.length(1);
    for (const w of workers.splice(0)) await w.stop();
  });

  it('never credits a deposit whose block is orphaned before its confirmations; the re-mined one is credited once', async () => {
    const agent = await s.createAgent();
    const address = await depositAddress(agent);
    const watcher = s.services.inbound!.deposits;
    const outsider = chain.node.devWallet(2);
    await mintToken(chain.node.devWallet(0), chain.node.client, chain.token, outsider.account.address, 25_000_000n);
    await drain(watcher);
    const snapshot = await chain.node.rpc<string>('evm_snapshot');

    // Signed once: the same transaction (same hash) is mined again after the reorganisation.
    const request = await outsider.prepareTransactionRequest({ to: chain.token, data: encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [address, 25_000_000n] }) });
    const raw = await outsider.signTransaction(request);
    const hash = await chain.node.client.sendRawTransaction({ serializedTransaction: raw });
    const first = await chain.node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    await chain.node.mine(1);
    // One block on top of the deposit's: short of its 3 confirmations.
    await drain(watcher);
    expect((await cursor())!.block_number).to.equal(Number(first.blockNumber) - 1);

    // The chain drops the deposit's blocks and grows a longer branch without it.
    await chain.node.rpc('evm_revert', [snapshot]);
    await chain.node.mine(6);
    const orphanTip = await chain.node.client.getBlockNumber();
    expect(orphanTip > first.blockNumber + 2n).to.equal(true);
    await drain(watcher);
    expect((await cursor())!.block_number).to.equal(Number(orphanTip) - 2);
    expect(await depositsOf(hash)).to.have.length(0);
    expect(await balance(agent, 'USDC')).to.equal('0');

    // The same transaction is mined again on the new branch.
    expect(await chain.node.client.sendRawTransaction({ serializedTransaction: raw })).to.equal(hash);
    const second = await chain.node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(second.blockHash).to.not.equal(first.blockHash);
    await drain(watcher);
    expect(await depositsOf(hash)).to.have.length(0);
    await chain.node.mine(2);
    await drain(watcher);
    await drain(watcher);
    expect(await balance(agent, 'USDC')).to.equal('25');
    const rows = await depositsOf(hash);
    expect(rows).to.have.length(1);
    expect(rows[0].block_hash).to.equal(second.blockHash);
  });

  it('walks the cursor back when the next block does not descend from the last one applied', async () => {
    const watcher = s.services.inbound!.deposits;
    await chain.node.mine(4);
    await drain(watcher);
    const before = (await cursor())!;
    // Replace the last applied block and the ones after it (a reorganisation deeper than the confirmations).
    await chain.node.rpc('anvil_reorg', [3, []]);
    await chain.node.mine(1);
    const did = await watcher.tick();
    expect(did).to.be.greaterThan(0);
    const rewound = (await cursor())!;
    expect(rewound.block_number).to.equal(before.block_number - 3);
    await drain(watcher);
    const after = (await cursor())!;
    const canonical = await chain.node.client.getBlock({ blockNumber: BigInt(after.block_number) });
    expect(after.block_hash).to.equal(canonical.hash);
    expect(after.block_number).to.be.at.least(before.block_number);
  });
});
