// Earn on chain (issue 16 acceptance 2): the seeded USDC vaults are ERC-4626 contracts (OpenZeppelin's ERC4626) on
// the development chain; deposit, withdraw_all and move act on them through the relayer, positions are the wallet's
// shares valued by convertToAssets, and `agentctl vault accrue` is their yield.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { formatUnits, getAddress, parseUnits } from 'viem';
import { mintToken } from '../../src/chain/token.js';
import { devVaultAbi, type EarnContracts } from '../../src/chain/vaults.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';
import { agentctl } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const erc20ApproveAbi = [
  {
    type: 'function',
    name: 'approve',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 's', type: 'address' },
      { name: 'v', type: 'uint256' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
] as const;
const PRIME = '6f1d2a10-0000-4000-8000-000000000001';
const AAVE = '6f1d2a10-0000-4000-8000-000000000002';

describe('DeFi on chain: earn in ERC-4626 vaults', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let earn: EarnContracts;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
    earn = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'earn' }).first()).value) as EarnContracts;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const post = (agent: ChainAgent, path: string, body: Record<string, unknown>) => s.request('POST', `/v1/agent/earn/${path}`, { agent, body, idempotencyKey: randomUUID() });
  const shares = (vault: `0x${string}`, owner: `0x${string}`) => node.client.readContract({ address: vault, abi: devVaultAbi, functionName: 'balanceOf', args: [owner] });
  const usdcAvailable = async (agent: ChainAgent) => (await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available;

  const vaultAccrue = (args: string[]) => agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['vault', 'accrue', ...args]);

  it('shows each opportunity with its on-chain vault address and the vault’s own totalAssets as TVL', async () => {
    const agent = await s.agent();
    const res = await s.request('GET', '/v1/agent/earn/opportunities', { agent });
    expect(res.status).to.equal(200);
    const prime = res.body.items.find((o: { vault_id: string }) => o.vault_id === PRIME);
    expect(prime.vault_address).to.equal(earn.vaults[PRIME]);
    const tvl = await node.client.readContract({ address: earn.vaults[PRIME]!, abi: devVaultAbi, functionName: 'totalAssets' });
    expect(prime.tvl).to.equal(formatUnits(tvl, 6));
  });

  it('deposits 500 USDC, and withdraw_all after vault accrue returns principal + yield exactly as previewRedeem says', async () => {
    const agent = await s.agent({ USDC: '1000' });
    const vault = earn.vaults[PRIME]!;
    const dep = await post(agent, 'deposit', { asset: 'USDC', vault_id: PRIME, amount: '500' });
    expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
    const [deposited] = await s.settle([dep.body.operation_id]);
    expect(deposited!.status).to.equal('executed');
    const minted = await shares(vault, agent.address);
    expect(minted > 0n).to.equal(true);
    expect(await node.client.readContract({ address: vault, abi: devVaultAbi, functionName: 'convertToAssets', args: [minted] })).to.be.oneOf([parseUnits('500', 6), parseUnits('500', 6) - 1n]);
    expect(await usdcAvailable(agent)).to.equal(parseUnits('500', 6));
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('500', 6));

    const positionId = dep.body.resource.id;
    const before = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    expect(before.status).to.equal(200);
    expect(before.body.position ?? before.body).to.deep.include({ vault_address: vault, shares: formatUnits(minted, 12) });

    // Yield: 25 USDC into a vault holding (at least) this deposit.
    const accrued = await vaultAccrue([PRIME, '--amount', '25']);
    expect(accrued.code, accrued.stderr).to.equal(0);
    const preview = await node.client.readContract({ address: vault, abi: devVaultAbi, functionName: 'previewRedeem', args: [minted] });
    expect(preview > parseUnits('500', 6)).to.equal(true);
    const read = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    expect((read.body.position ?? read.body).value).to.equal(formatUnits(preview, 6));

    const out = await post(agent, 'withdraw', { position_id: positionId, withdraw_all: true });
    expect(out.status, JSON.stringify(out.body)).to.equal(200);
    const [withdrawn] = await s.settle([out.body.operation_id]);
    expect(withdrawn!.status).to.equal('executed');
    expect(await shares(vault, agent.address)).to.equal(0n);
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('500', 6) + preview);
    expect(await usdcAvailable(agent)).to.equal(parseUnits('500', 6) + preview);
    const after = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    expect((after.body.position ?? after.body).shares).to.equal('0');
  });

  it('deposits with use_best_available into the best on-chain vault, then moves the shares to another vault on chain', async () => {
    const agent = await s.agent({ USDC: '300' });
    const [from, to] = [earn.vaults[PRIME]!, earn.vaults[AAVE]!];
    // use_best_available picks the highest-APY USDC vault the policy allows: Morpho USDC Prime, on chain.
    const dep = await post(agent, 'deposit', { asset: 'USDC', use_best_available: true, amount: '300' });
    expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
    const [deposited] = await s.settle([dep.body.operation_id]);
    expect(deposited!.status).to.equal('executed');
    expect(deposited!.to_address).to.equal(from);
    const held = await shares(from, agent.address);
    const assets = await node.client.readContract({ address: from, abi: devVaultAbi, functionName: 'previewRedeem', args: [held] });
    const expectedShares = await node.client.readContract({ address: to, abi: devVaultAbi, functionName: 'previewDeposit', args: [assets] });

    const moved = await post(agent, 'move', { from_position_id: dep.body.resource.id, to_vault_id: AAVE, move_all: true });
    expect(moved.status, JSON.stringify(moved.body)).to.equal(200);
    const [op] = await s.settle([moved.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await shares(from, agent.address)).to.equal(0n);
    expect(await shares(to, agent.address)).to.equal(expectedShares);
    const positions = await s.request('GET', '/v1/agent/earn', { agent });
    const inAave = positions.body.items.find((p: { vault_id: string }) => p.vault_id === AAVE);
    expect(inAave).to.deep.include({ vault_address: getAddress(to), shares: formatUnits(expectedShares, 12) });
    // Nothing left the wallet's control: its USDC is untouched, on chain and in the ledger.
    expect(await s.usdcBalance(agent.address)).to.equal(0n);
    expect(await usdcAvailable(agent)).to.equal(0n);
  });

  it('agentctl chain reconcile covers the shares: zero drift after the above, and a deposit made outside the API shows as share drift', async () => {
    const reconcile = () => agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['chain', 'reconcile']);
    const clean = await reconcile();
    expect(clean.code, clean.stderr).to.equal(0);
    const report = JSON.parse(clean.stdout);
    expect(report.wallets_checked).to.be.greaterThan(2);
    expect(report.drift).to.deep.equal([]);

    // Someone else deposits into the PRIME vault for one of our wallets: its on-chain shares exceed the ledger's.
    const agent = await s.agent();
    const outsider = node.devWallet(3);
    const vault = earn.vaults[PRIME]!;
    await mintToken(node.devWallet(0), node.client, s.token, outsider.account.address, parseUnits('10', 6));
    await node.client.waitForTransactionReceipt({ hash: await outsider.writeContract({ address: s.token, abi: erc20ApproveAbi, functionName: 'approve', args: [vault, parseUnits('10', 6)] }) });
    await node.client.waitForTransactionReceipt({ hash: await outsider.writeContract({ address: vault, abi: devVaultAbi, functionName: 'deposit', args: [parseUnits('10', 6), agent.address] }) });
    await s
      .db('earn_positions')
      .insert({ id: randomUUID(), agent_id: agent.agentId, wallet_id: agent.walletId, vault_id: PRIME, reward_checkpoint_ray: '0', created_at: new Date(), updated_at: new Date() });
    const drifted = await reconcile();
    expect(drifted.code, drifted.stderr).to.equal(0);
    const rows = JSON.parse(drifted.stdout).drift;
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ agent_id: agent.agentId, asset: `shares:${vault}`, ledger: '0', difference_units: (await shares(vault, agent.address)).toString() });
  });
});
