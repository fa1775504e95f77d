// Issue 26 item 2 and acceptance 3 on chain: a payment from an agent account short of USDC draws on its Earn
// positions held in on-chain ERC-4626 vaults. The redemption and the transfer are one relayed lane call of the
// account (AgentAccount.batch: redeem, then pay), so the money the payee receives left the vault and the account in
// one transaction; the ledger follows the vault's Withdraw event, counts the payment once, and nothing moves when
// wallet plus Earn fall short.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { getAddress, parseUnits } from 'viem';
import { devVaultAbi, type EarnContracts } from '../../src/chain/vaults.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, randomAddress, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';
import { agentctl } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const PRIME = '6f1d2a10-0000-4000-8000-000000000001';
const USDC = (n: string) => parseUnits(n, 6);

describe('DeFi on chain: a payment drawing on Earn vaults (issue 26)', function () {
  this.timeout(240_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let vault: `0x${string}`;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
    vault = (JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'earn' }).first()).value) as EarnContracts).vaults[PRIME]!;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const shares = (owner: `0x${string}`) => node.client.readContract({ address: vault, abi: devVaultAbi, functionName: 'balanceOf', args: [owner] });
  const worth = async (owner: `0x${string}`) => node.client.readContract({ address: vault, abi: devVaultAbi, functionName: 'previewRedeem', args: [await shares(owner)] });
  const ledgerUsdc = (agent: ChainAgent) => s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
  const pay = (agent: ChainAgent, to: string, amount: string) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body: { to, asset: 'USDC', amount } });
  const usage = async (agent: ChainAgent) => {
    const res = await s.request('GET', '/v1/agent/self/limits', { agent });
    expect(res.status, res.text).to.equal(200);
    return res.body.current_usage as { total_txs: number; total_spent_usd: string };
  };
  /** An account holding `wallet` USDC, and `earn` USDC deposited on chain into the Prime vault. */
  async function agentWith(wallet: string, earn: string): Promise<ChainAgent & { positionId: string }> {
    const agent = await s.agent({ USDC: String(Number(wallet) + Number(earn)) });
    const dep = await s.request('POST', '/v1/agent/earn/deposit', { agent, idempotencyKey: randomUUID(), body: { asset: 'USDC', vault_id: PRIME, amount: earn } });
    expect(dep.status, dep.text).to.equal(200);
    const [done] = await s.settle([dep.body.operation_id]);
    expect(done!.status).to.equal('executed');
    expect(await s.usdcBalance(agent.address)).to.equal(USDC(wallet));
    return Object.assign(agent, { positionId: dep.body.resource.id as string });
  }

  it('pays 80 USDC from 50 in the account and 40 in an on-chain vault in one account call, leaves 10 in the vault and counts 80 once', async () => {
    const agent = await agentWith('50', '40');
    const payee = randomAddress();
    const before = await usage(agent);

    const res = await pay(agent, payee, '80');
    expect(res.status, res.text).to.equal(200);
    const accepted = await s.db('operations').where({ id: res.body.operation_id }).first();
    expect(accepted.details.drawn_from_earn).to.have.length(1);
    expect(accepted.details.drawn_from_earn[0]).to.deep.include({ position_id: agent.positionId, vault_id: PRIME, amount: USDC('30').toString(), onchain: true });
    // Held: what the account holds; the 30 redeemed at settlement are not in the wallet yet, nor taken from it.
    expect(await ledgerUsdc(agent)).to.deep.equal({ available: 0n, held: USDC('50') });

    const [op] = await s.settle([accepted.id]);
    expect(op!.status, JSON.stringify(op)).to.equal('executed');
    // One transaction of the account: the vault's Withdraw and the payee's 80 in the same receipt.
    const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
    expect(getAddress(receipt.to!)).to.equal(agent.address);
    expect(receipt.logs.some((l) => l.address.toLowerCase() === vault.toLowerCase())).to.equal(true);
    expect(await s.usdcBalance(payee)).to.equal(USDC('80'));
    // 10 left in the position (the vault's own rounding may keep a unit), on chain and as the API reports it.
    const left = await worth(agent.address);
    expect(left >= USDC('10') - 1n && left <= USDC('10')).to.equal(true, `left ${left}`);
    const position = await s.request('GET', `/v1/agent/earn/${agent.positionId}`, { agent });
    expect(position.status, position.text).to.equal(200);
    expect((position.body.position ?? position.body).shares).to.not.equal('0');
    // The ledger equals the chain, after the deposit watcher has read every block (the vault's transfer into the
    // account is the payment's to book, not a deposit): whatever the redemption returned beyond 30 stays in the wallet.
    while ((await s.services.inbound!.deposits.tick()) > 0);
    const onchain = await s.usdcBalance(agent.address);
    expect(await ledgerUsdc(agent)).to.deep.equal({ available: onchain, held: 0n });
    const after = await usage(agent);
    expect(after.total_txs - before.total_txs).to.equal(1);
    expect(Number(after.total_spent_usd) - Number(before.total_spent_usd)).to.equal(80);
    // The redemption is journalled under the payment, which is the only operation of the request.
    expect(await s.db('operations').where({ agent_id: agent.agentId, type: 'earn.withdraw' })).to.have.length(0);
    const legs = await s.db('journal_entries').where({ operation_id: accepted.id });
    expect(legs.map((l) => BigInt(l.amount)).reduce((a, b) => a + b, 0n)).to.equal(0n);
  });

  it('is insufficient_funds with 70 in account plus vault, and nothing moves', async () => {
    const agent = await agentWith('50', '20');
    const sharesBefore = await shares(agent.address);
    const res = await pay(agent, randomAddress(), '80');
    expect(res.status, res.text).to.equal(422);
    expect(res.body.error.code).to.equal('insufficient_funds');
    expect(await s.db('operations').where({ agent_id: agent.agentId, type: 'payment' })).to.have.length(0);
    expect(await ledgerUsdc(agent)).to.deep.equal({ available: USDC('50'), held: 0n });
    expect(await shares(agent.address)).to.equal(sharesBefore);
    expect(await s.usdcBalance(agent.address)).to.equal(USDC('50'));
  });

  it('pays from the vault alone when the account holds none of the asset (the payment holds nothing)', async () => {
    const agent = await agentWith('0', '100');
    const payee = randomAddress();
    const res = await pay(agent, payee, '80');
    expect(res.status, res.text).to.equal(200);
    expect(await s.db('holds').where({ operation_id: res.body.operation_id })).to.have.length(0);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status, JSON.stringify(op)).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(USDC('80'));
    const left = await worth(agent.address);
    expect(left >= USDC('20') - 1n && left <= USDC('20')).to.equal(true, `left ${left}`);
    expect((await ledgerUsdc(agent)).available).to.equal(await s.usdcBalance(agent.address));
  });

  it('counts the shares a pending payment will redeem: a second draw on them is refused at acceptance, not on chain', async () => {
    const agent = await agentWith('0', '50');
    const first = await pay(agent, randomAddress(), '30');
    expect(first.status, first.text).to.equal(200);
    const second = await pay(agent, randomAddress(), '30');
    expect(second.status, second.text).to.equal(422);
    expect(second.body.error.code).to.equal('insufficient_funds');
    const third = await pay(agent, randomAddress(), '19');
    expect(third.status, third.text).to.equal(200);
    const ops = await s.settle([first.body.operation_id, third.body.operation_id]);
    expect(ops.map((o) => o.status)).to.deep.equal(['executed', 'executed']);
  });

  it('credits the wallet with what the redemption returned when the vault grew between acceptance and settlement', async () => {
    const agent = await agentWith('0', '100');
    const res = await pay(agent, randomAddress(), '50');
    expect(res.status, res.text).to.equal(200);
    // Yield lands in the vault before the payment settles: the planned shares now redeem for more than 50.
    const accrued = await agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['vault', 'accrue', PRIME, '--amount', '1000']);
    expect(accrued.code, accrued.stderr).to.equal(0);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status, JSON.stringify(op)).to.equal('executed');
    const onchain = await s.usdcBalance(agent.address);
    expect(onchain > 0n).to.equal(true);
    expect(await ledgerUsdc(agent)).to.deep.equal({ available: onchain, held: 0n });
  });

  it('leaves no drift: agentctl chain reconcile finds the ledger equal to the chain, USDC and vault shares', async () => {
    const reconcile = await agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['chain', 'reconcile']);
    expect(reconcile.code, reconcile.stderr).to.equal(0);
    expect(JSON.parse(reconcile.stdout).drift).to.deep.equal([]);
  });
});
