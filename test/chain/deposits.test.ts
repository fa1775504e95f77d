// Inbound deposits on a real Anvil and Postgres: an outside account's USDC and ETH transfers to a wallet's
// /deposit-address are credited after CHAIN_CONFIRMATIONS, exactly once, by two worker processes with one of
// them killed and restarted between; and a deposit whose block is orphaned before its confirmations is not credited.
import { expect } from 'chai';
import { encodeFunctionData, getAddress, parseEther } from 'viem';
import type { Address, Hex } from '../../src/chain/port.js';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createDepositWatcher, type DepositWatcher } from '../../src/services/deposit-watcher.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainServer } from '../helpers/chain.js';
import type { TestAgent } from '../helpers/server.js';
import { logLines, sendEth, sendUsdc, startLoggedWorker, waitFor, type LoggedWorker } from './helpers.js';

/** Ticks until the watcher has nothing left to apply. */
async function drain(watcher: DepositWatcher): Promise<void> {
  for (let i = 0; i < 20; i++) if ((await watcher.tick()) === 0) return;
  throw new Error('the deposit watcher did not settle');
}

describe('chain deposits (Anvil)', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  const workers: LoggedWorker[] = [];
  const env = (extra: Record<string, string> = {}) => chainEnv(node, s.databaseUrl, { CHAIN_CONFIRMATIONS: '3', CHAIN_POLL_MS: '100', CHAIN_RECONCILE_INTERVAL_MS: '0', ...extra });

  before(async () => {
    node = await startAnvil();
    // The server answers HTTP (its own database; it deploys the token); worker processes or the test tick the watcher.
    s = await startChainServer(node, { env: { CHAIN_CONFIRMATIONS: '3' } });
  });

  after(async () => {
    for (const w of workers) await w.kill();
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
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
    const workerEnv = env();
    workers.push(await startLoggedWorker(workerEnv), await startLoggedWorker(workerEnv));

    const usdc = await sendUsdc(node, s.token, 3, address, '50');
    const eth = await sendEth(node, 4, address, parseEther('1'));
    // Mined but short of 3 confirmations (the transfer has 2, the ETH 1): the watchers stop before these blocks.
    expect(eth.blockNumber).to.equal(usdc.blockNumber + 1n);
    await waitFor(async () => (await cursor())?.block_number === Number(eth.blockNumber) - 2, 20_000, 'the cursor to reach the confirmed tip');
    await new Promise((r) => setTimeout(r, 500));
    expect((await cursor())!.block_number).to.equal(Number(eth.blockNumber) - 2);
    expect(await balance(agent, 'USDC')).to.equal('0');
    expect(await depositsOf(usdc.hash)).to.have.length(0);

    // One worker dies mid-way and comes back.
    await workers[0]!.kill();
    await node.mine(1);
    workers[0] = await startLoggedWorker(workerEnv);
    await node.mine(2);

    await waitFor(async () => (await balance(agent, 'USDC')) === '50' && (await balance(agent, 'ETH')) === '1', 20_000, 'the deposits to be credited');
    // More blocks and polls change nothing.
    await node.mine(5);
    const tip = await node.client.getBlockNumber({ cacheTime: 0 });
    await waitFor(async () => (await cursor())?.block_number === Number(tip) - 2, 20_000, 'the cursor to follow the chain');
    expect(await balance(agent, 'USDC')).to.equal('50');
    expect(await balance(agent, 'ETH')).to.equal('1');

    const usdcRows = await depositsOf(usdc.hash);
    expect(usdcRows).to.have.length(1);
    expect(usdcRows[0]).to.include({ wallet_id: agent.walletId, asset_symbol: 'USDC', amount: '50000000', block_number: Number(usdc.blockNumber), token_address: s.token });
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
    const outsider = node.devWallet(2);
    await mintToken(node.devWallet(0), node.client, s.token, outsider.account.address, 25_000_000n);
    await drain(watcher);
    const snapshot = await node.rpc<string>('evm_snapshot');

    // Signed once: the same transaction (same hash) is mined again after the reorganisation.
    const request = await outsider.prepareTransactionRequest({ to: s.token, data: encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [address, 25_000_000n] }) });
    const raw = await outsider.signTransaction(request);
    const hash = await node.client.sendRawTransaction({ serializedTransaction: raw });
    const first = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    await node.mine(1);
    // One block on top of the deposit's: short of its 3 confirmations.
    await drain(watcher);
    expect((await cursor())!.block_number).to.equal(Number(first.blockNumber) - 1);

    // The chain drops the deposit's blocks and grows a longer branch without it.
    await node.rpc('evm_revert', [snapshot]);
    await node.mine(6);
    // cacheTime 0: viem caches eth_blockNumber (the receipt wait above just read it), and a cached height from
    // before the revert would describe the orphaned branch.
    const orphanTip = await node.client.getBlockNumber({ cacheTime: 0 });
    expect(orphanTip > first.blockNumber + 2n).to.equal(true);
    await drain(watcher);
    expect((await cursor())!.block_number).to.equal(Number(orphanTip) - 2);
    expect(await depositsOf(hash)).to.have.length(0);
    expect(await balance(agent, 'USDC')).to.equal('0');

    // The same transaction is mined again on the new branch.
    expect(await node.client.sendRawTransaction({ serializedTransaction: raw })).to.equal(hash);
    const second = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(second.blockHash).to.not.equal(first.blockHash);
    await drain(watcher);
    expect(await depositsOf(hash)).to.have.length(0);
    await node.mine(2);
    await drain(watcher);
    await drain(watcher);
    expect(await balance(agent, 'USDC')).to.equal('25');
    const rows = await depositsOf(hash);
    expect(rows).to.have.length(1);
    expect(rows[0].block_hash).to.equal(second.blockHash);
  });

  it('walks the cursor back when the next block does not descend from the last one applied', async () => {
    const watcher = s.services.inbound!.deposits;
    await node.mine(4);
    await drain(watcher);
    const before = (await cursor())!;
    // Replace the last applied block and the ones after it (a reorganisation deeper than the confirmations).
    await node.rpc('anvil_reorg', [3, []]);
    await node.mine(1);
    const did = await watcher.tick();
    expect(did).to.be.greaterThan(0);
    // Back to the fork point: the newest applied block the chain still has.
    const rewound = (await cursor())!;
    expect(rewound.block_number).to.equal(before.block_number - 1);
    expect(rewound.block_hash).to.equal((await node.client.getBlock({ blockNumber: BigInt(rewound.block_number) })).hash);
    await drain(watcher);
    const after = (await cursor())!;
    const canonical = await node.client.getBlock({ blockNumber: BigInt(after.block_number) });
    expect(after.block_hash).to.equal(canonical.hash);
    expect(after.block_number).to.be.at.least(before.block_number);
  });

  it('starts a new cursor at CHAIN_DEPOSIT_START_BLOCK (validated), before which nothing is scanned', async () => {
    expect(loadConfig({ CHAIN_DEPOSIT_START_BLOCK: '12' }, () => {}).chain.depositStartBlock).to.equal(12);
    expect(loadConfig({}, () => {}).chain.depositStartBlock).to.equal(null);
    expect(() => loadConfig({ CHAIN_DEPOSIT_START_BLOCK: '-1' }, () => {})).to.throw(ConfigError, 'CHAIN_DEPOSIT_START_BLOCK');

    const agent = await s.createAgent();
    const early = await sendUsdc(node, s.token, 3, await depositAddress(agent), '3');
    await node.mine(3);
    const start = early.blockNumber + 1n;
    await s.db('chain_cursors').where({ chain_id: 31337, name: 'deposits' }).delete();
    const { ledger } = s.services;
    const watcher = createDepositWatcher({
      db: s.db,
      chain: s.built.chain!,
      ledger: ledger.ledger,
      operations: ledger.operations,
      clock: s.clock,
      log: s.built.log,
      confirmations: 3,
      startBlock: Number(start),
      isDeployed: async () => true,
    });
    await watcher.ensureCursor();
    const created = (await cursor())!;
    expect(created.block_number).to.equal(Number(start) - 1);
    expect(created.block_hash).to.equal((await node.client.getBlock({ blockNumber: start - 1n })).hash);
    await drain(watcher);
    expect(await depositsOf(early.hash)).to.have.length(0);
    expect(await balance(agent, 'USDC')).to.equal('0');
  });
});
