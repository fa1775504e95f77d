// Reconciliation on a real Anvil: after deposits and an on-chain payment, `agentctl chain reconcile` reports no
// drift; a transfer made straight by the account's owner key (bypassing the API) shows up as that wallet's drift, in the
// command's JSON and in the worker's periodic warning.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWalletClient, encodeFunctionData, http, parseEther } from 'viem';
import { foundry } from 'viem/chains';
import { usdCoinAbi } from '../../src/chain/token.js';
import { agentAccountAbi } from '../../contracts/artifacts/AgentAccount.js';
import { devOwnerKeyPath, readOwnerKeyFile } from '../../src/lib/owner-keys.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, randomAddress, startChainServer, type ChainServer } from '../helpers/chain.js';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';
import { logLines, sendEth, sendUsdc, startLoggedWorker, waitFor, type LoggedWorker } from './helpers.js';

interface Report {
  chain_id: number;
  wallets_checked: number;
  assets: string[];
  drift_count: number;
  drift: Array<{ agent_id: string; wallet_id: string; asset: string; onchain: string; ledger: string; expected_onchain: string; difference: string; difference_units: string }>;
}

describe('chain reconcile (Anvil)', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let worker: LoggedWorker | null = null;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
  });
  after(async () => {
    await worker?.kill();
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  /** `agentctl chain reconcile` as a process: its exit code and the one JSON object it prints. */
  async function agentctl(args: string[]): Promise<{ code: number | null; out: Report; stderr: string }> {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv(chainEnv(node, s.databaseUrl)) };
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/agentctl.ts', ...args], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    const lines = stdout.trim().split('\n');
    expect(lines, stderr).to.have.length(1);
    return { code, out: JSON.parse(lines[0]!) as Report, stderr };
  }

  it('reports zero drift after deposits and a payment, then the drift of a transfer made straight from the key', async () => {
    const a = await s.agent({ USDC: '100', ETH: '1' });
    const b = await s.agent({ USDC: '5' });
    await sendUsdc(node, s.token, 3, a.address, '20');
    await waitFor(
      async () => (await s.services.ledger.ledger.balance(s.db, a.walletId, 'USDC')).available === 120_000_000n || (await s.services.inbound!.deposits.tick(), false),
      20_000,
      'the outside deposit',
    );
    const paid = await s.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: randomUUID(), body: { to: randomAddress(), asset: 'USDC', amount: '12.5' } });
    expect(paid.status).to.equal(200);
    const [op] = await s.settle([paid.body.operation_id]);
    expect(op!.status).to.equal('executed');
    // A payment to another wallet of the service: the payer's hold leaves to the chain, the chain credits the payee.
    const toB = await s.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: randomUUID(), body: { to: b.address, asset: 'USDC', amount: '2' } });
    expect(toB.status).to.equal(200);
    const [opB] = await s.settle([toB.body.operation_id]);
    expect(opB!.status).to.equal('executed');
    await waitFor(
      async () => (await s.services.ledger.ledger.balance(s.db, b.walletId, 'USDC')).available === 7_000_000n || (await s.services.inbound!.deposits.tick(), false),
      20_000,
      'the payee credited',
    );
    await s.services.inbound!.deposits.tick();
    expect((await s.services.ledger.ledger.balance(s.db, b.walletId, 'USDC')).available).to.equal(7_000_000n);
    expect(await s.db('chain_deposits').whereRaw('lower(tx_hash) = lower(?)', [opB!.tx_hash])).to.have.length(1);

    const clean = await agentctl(['chain', 'reconcile']);
    expect(clean.code, clean.stderr).to.equal(0);
    expect(clean.out).to.include({ chain_id: 31337, wallets_checked: 2, drift_count: 0 });
    expect(clean.out.assets).to.include.members(['ETH', 'USDC']);
    expect(clean.out.drift).to.deep.equal([]);

    // The agent's wallet is an account (issue 24): the only key that moves its funds outside the API is the owner's
    // signer (the server's lane key cannot). The owner moves 7 USDC on chain without the API, paying the gas from its
    // own address: the ledger still says 105.5.
    const agentRow = await s.db('agents').where({ id: a.agentId }).first();
    const owner = readOwnerKeyFile(devOwnerKeyPath(s.config.dataDir, agentRow.owner_id));
    await sendEth(node, 4, owner.address, parseEther('1'));
    const direct = createWalletClient({ account: owner, chain: foundry, transport: http(node.rpcUrl) });
    const transfer = encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [randomAddress(), 7_000_000n] });
    const hash = await direct.writeContract({ address: a.address, abi: agentAccountAbi, functionName: 'ownerExecute', args: [s.token, 0n, transfer] });
    const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(receipt.status).to.equal('success');

    const drifted = await agentctl(['chain', 'reconcile', '--agent', a.agentId]);
    expect(drifted.code, drifted.stderr).to.equal(0);
    expect(drifted.out.wallets_checked).to.equal(1);
    // Changed from the key-held wallet (issue 24): the account's ETH paid no gas (the owner's address did), so the
    // drift is the USDC alone (it was USDC and the wallet's gas before).
    expect(drifted.out.drift_count).to.equal(1);
    const usdc = drifted.out.drift.find((d) => d.asset === 'USDC')!;
    expect(usdc).to.include({ agent_id: a.agentId, wallet_id: a.walletId, onchain: '98.5', ledger: '105.5', expected_onchain: '105.5', difference: '-7', difference_units: '-7000000' });
    // The other wallet is untouched.
    expect((await agentctl(['chain', 'reconcile', '--agent', b.agentId])).out.drift_count).to.equal(0);
    // An unknown agent is a usage error.
    const unknown = spawn(process.execPath, ['--import', 'tsx', 'scripts/agentctl.ts', 'chain', 'reconcile', '--agent', randomUUID()], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv(chainEnv(node, s.databaseUrl)) },
      stdio: 'ignore',
    });
    expect(await new Promise((resolve) => unknown.on('exit', resolve))).to.equal(2);

    // The worker's periodic run warns with the differences.
    worker = await startLoggedWorker(chainEnv(node, s.databaseUrl, { CHAIN_RECONCILE_INTERVAL_MS: '300' }));
    const warning = await waitFor(async () => logLines(worker!, 'chain balances drift from the ledger')[0], 30_000, 'the drift warning');
    expect(warning.level).to.equal(40);
    const listed = (warning.drift as Report['drift']).map((d) => `${d.wallet_id}:${d.asset}:${d.difference_units}`);
    expect(listed).to.have.members([`${a.walletId}:USDC:-7000000`]);
  });
});
