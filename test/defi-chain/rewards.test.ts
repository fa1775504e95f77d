// Earn rewards on chain (issue 16): "rewards claim pays from a rewards distributor contract". The ledger accrues a
// position's rewards per share from the clock; a claim has the relayer credit the wallet's claimable at
// contracts/RewardsDistributor.sol with exactly that accrual and pay it in one transaction, and the worker credits
// the ledger with what the distributor's Claimed event paid.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { encodeAbiParameters, keccak256, numberToHex, parseUnits, type Address } from 'viem';
import { rewardsDistributorAbi, type EarnContracts } from '../../src/chain/vaults.js';
import type { Clock } from '../../src/lib/clock.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';
import { agentctl } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const PRIME = '6f1d2a10-0000-4000-8000-000000000001';
const YEAR_MS = 365 * 24 * 3600 * 1000;

describe('DeFi on chain: earn rewards paid by the rewards distributor', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let earn: EarnContracts;
  // Real time plus an offset the test moves forward: settlement keeps running while rewards accrue for a year.
  let offsetMs = 0;
  const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { clock });
    earn = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'earn' }).first()).value) as EarnContracts;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const post = (agent: ChainAgent, path: string, body: Record<string, unknown>) => s.request('POST', `/v1/agent/earn/${path}`, { agent, body, idempotencyKey: randomUUID() });
  const setTokenBalance = async (token: Address, owner: Address, value: bigint) => {
    const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [owner, 0n]));
    const request = node.client.request as unknown as (args: { method: string; params: unknown[] }) => Promise<unknown>;
    await request({ method: 'anvil_setStorageAt', params: [token, slot, numberToHex(value, { size: 32 })] });
    expect(await s.usdcBalance(owner)).to.equal(value);
  };
  const usdcAvailable = async (agent: ChainAgent) => (await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).available;

  it('the bootstrap deploys and funds the distributor, bound to the relayer and paying USDC', async () => {
    expect(earn.rewards, JSON.stringify(earn)).to.not.equal(undefined);
    const d = earn.rewards!;
    expect(d.asset).to.equal('USDC');
    expect((await node.client.readContract({ address: d.distributor, abi: rewardsDistributorAbi, functionName: 'token' })).toLowerCase()).to.equal(s.token.toLowerCase());
    expect((await node.client.readContract({ address: d.distributor, abi: rewardsDistributorAbi, functionName: 'relayer' })).toLowerCase()).to.equal(earn.relayer.toLowerCase());
    expect((await s.usdcBalance(d.distributor)) > 0n).to.equal(true);
    // /protocols names it beside Morpho's vaults (Morpho USDC Prime pays USDC rewards); Aave's on-chain vault pays none.
    const protocols = await s.request('GET', '/v1/agent/protocols?limit=100', { agent: await s.agent() });
    expect(protocols.status).to.equal(200);
    const contractsOf = (id: string) => protocols.body.items.find((p: { id: string }) => p.id === id).contracts as { role: string; address: string }[];
    expect(contractsOf('morpho')).to.deep.include({ role: 'rewards_distributor', address: d.distributor });
    expect(contractsOf('aave-v3').some((c) => c.role === 'rewards_distributor')).to.equal(false);
  });

  it('deposit, a year of rewards, claim: the distributor pays exactly the ledger’s accrual to the wallet on chain', async () => {
    const agent = await s.agent({ USDC: '1000' });
    const distributor = earn.rewards!.distributor;
    const dep = await post(agent, 'deposit', { asset: 'USDC', vault_id: PRIME, amount: '1000' });
    expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
    const [deposited] = await s.settle([dep.body.operation_id]);
    expect(deposited!.status).to.equal('executed');
    expect(await s.usdcBalance(agent.address)).to.equal(0n);

    offsetMs += YEAR_MS;
    const positionId = dep.body.resource.id;
    const read = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    const pending = (read.body.position ?? read.body).pending_rewards as { asset_symbol: string; amount: string }[];
    expect(pending).to.have.length(1);
    expect(pending[0]!.asset_symbol).to.equal('USDC');
    const accrued = parseUnits(pending[0]!.amount, 6);
    // Morpho USDC Prime pays 0.5% a year in rewards: about 5 USDC on 1000 (a year and a few seconds).
    expect(accrued >= parseUnits('5', 6) && accrued < parseUnits('5.01', 6), String(accrued)).to.equal(true);

    const heldBefore = await s.usdcBalance(distributor);
    const claim = await post(agent, 'rewards/claim', { protocols: ['morpho'] });
    expect(claim.status, JSON.stringify(claim.body)).to.equal(200);
    const opId = claim.body.operation_id as string;
    // Nothing is credited before the chain pays.
    expect(await usdcAvailable(agent)).to.equal(0n);
    const [op] = await s.settle([opId]);
    expect(op!.status, JSON.stringify(op)).to.equal('executed');

    const claimed = BigInt(op!.amount!);
    // The claim took the accrual up to the claim's own time: at least what the read showed, a few seconds more at most.
    expect(claimed >= accrued && claimed - accrued < 100n, `${claimed} vs ${accrued}`).to.equal(true);
    expect(await s.usdcBalance(agent.address)).to.equal(claimed);
    expect(heldBefore - (await s.usdcBalance(distributor))).to.equal(claimed);
    expect(await usdcAvailable(agent)).to.equal(claimed);
    expect(await node.client.readContract({ address: distributor, abi: rewardsDistributorAbi, functionName: 'claimable', args: [agent.address] })).to.equal(0n);

    const tx = await s.db('chain_transactions').where({ operation_id: opId, status: 'mined' }).first();
    expect(tx).to.include({ kind: 'rewards', receipt_status: 1 });
    expect(tx.to_address.toLowerCase()).to.equal(distributor.toLowerCase());
    const event = await s.db('events').where({ type: 'rewards.claimed', operation_id: opId }).first();
    expect(event, 'rewards.claimed event').to.not.equal(undefined);

    // The accrual left the position: nothing is pending right after the claim.
    const after = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
    const left = ((after.body.position ?? after.body).pending_rewards as { amount: string }[])[0]!;
    expect(parseUnits(left.amount, 6) < 100n, left.amount).to.equal(true);
  });

  it('a claim the chain does not pay fails and gives the accrual back to the position; the next claim pays it', async () => {
    const agent = await s.agent({ USDC: '400' });
    const distributor = earn.rewards!.distributor;
    const dep = await post(agent, 'deposit', { asset: 'USDC', vault_id: PRIME, amount: '400' });
    expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
    expect((await s.settle([dep.body.operation_id]))[0]!.status).to.equal('executed');
    offsetMs += YEAR_MS;
    const positionId = dep.body.resource.id as string;
    const pendingOf = async () => {
      const res = await s.request('GET', `/v1/agent/earn/${positionId}`, { agent });
      return parseUnits(((res.body.position ?? res.body).pending_rewards as { amount: string }[])[0]!.amount, 6);
    };
    const accrued = await pendingOf();
    expect(accrued > parseUnits('1.9', 6), String(accrued)).to.equal(true);

    // Empty the distributor (OpenZeppelin ERC20: balances at slot 0): the claim cannot be paid.
    const held = await s.usdcBalance(distributor);
    await setTokenBalance(s.token, distributor, 0n);
    const refused = await post(agent, 'rewards/claim', { protocols: ['morpho'] });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(200);
    const [failed] = await s.settle([refused.body.operation_id]);
    expect(failed!.status).to.equal('execution_failed');
    expect(await s.usdcBalance(agent.address)).to.equal(0n);
    expect(await usdcAvailable(agent)).to.equal(0n);
    expect((await pendingOf()) >= BigInt(failed!.amount!)).to.equal(true);

    await setTokenBalance(s.token, distributor, held);
    const claim = await post(agent, 'rewards/claim', { protocols: ['morpho'] });
    const [paid] = await s.settle([claim.body.operation_id]);
    expect(paid!.status).to.equal('executed');
    expect(BigInt(paid!.amount!) >= BigInt(failed!.amount!)).to.equal(true);
    expect(await s.usdcBalance(agent.address)).to.equal(BigInt(paid!.amount!));
    expect(await usdcAvailable(agent)).to.equal(BigInt(paid!.amount!));
  });

  it('agentctl chain reconcile shows zero drift after the claim', async () => {
    const res = await agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['chain', 'reconcile']);
    expect(res.code, res.stderr).to.equal(0);
    const report = JSON.parse(res.stdout);
    expect(report.wallets_checked).to.be.greaterThan(0);
    expect(report.drift).to.deep.equal([]);
  });
});
