// Issue 30 item 2 (acceptance 2): ETH on chain. An agent account holding only ETH posts 1 ETH as collateral on the
// development chain's Morpho market (WETH collateral) and borrows USDC, and converts ETH to USDC through the
// USDC/WETH pool: the account wraps its ETH into WETH (AgentAccount.wrapEth, a WETH9 deposit) in the same relayed
// lane call as the supplyCollateral or the swap (AgentAccount.batch). The wallet's ETH goes down by exactly what was
// wrapped (the relayer pays the gas), on chain and in the ledger. The other directions: USDC -> ETH swaps into WETH
// and unwraps exactly the swap's output in the same lane call (wrapEth(weth, 0, true)); ETH <-> WETH is the wrap or
// unwrap alone. The ledger credits what the WETH contract's Deposit/Withdrawal event says, once: the deposit
// watcher, which sees the ETH the WETH contract sends the account, does not credit it again.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { getAddress, parseEventLogs, parseUnits, type Address } from 'viem';
import { devWethAbi } from '../../contracts/artifacts/DevWeth.js';
import type { DexContracts } from '../../src/chain/dex.js';
import { morphoAbi, type LendingContracts } from '../../src/chain/lending.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';
import { agentctl } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const erc20BalanceAbi = [{ type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ name: 'a', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] }] as const;

describe('DeFi on chain: ETH wrapped on chain (issue 30)', function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let lending: LendingContracts;
  let dex: DexContracts;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
    lending = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'lending' }).first()).value) as LendingContracts;
    dex = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'dex' }).first()).value) as DexContracts;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const ledgerBalance = async (agent: ChainAgent, symbol: string) => (await s.services.ledger.ledger.balance(s.db, agent.walletId, symbol)).available;
  const erc20 = (token: Address, who: Address) => node.client.readContract({ address: token, abi: erc20BalanceAbi, functionName: 'balanceOf', args: [who] });
  const executed = async (res: { status: number; body: { operation_id: string } }) => {
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const [op] = await s.settle([res.body.operation_id]);
    expect(op!.status, JSON.stringify(op)).to.equal('executed');
    return op!;
  };

  it('an account holding only ETH posts 1 ETH as collateral (wrapped on chain) and borrows USDC', async () => {
    const agent = await s.agent({ ETH: '1.5' });
    expect(await s.usdcBalance(agent.address)).to.equal(0n);
    const post = (path: string, body: Record<string, unknown>) => s.request('POST', `/v1/agent/borrow${path}`, { agent, body, idempotencyKey: randomUUID() });
    const op = await executed(await post('/collateral/add', { asset: 'ETH', amount: '1' }));
    // One relayed lane call of the account: wrap then supplyCollateral.
    const receipt = await node.client.getTransactionReceipt({ hash: op.tx_hash as `0x${string}` });
    expect(getAddress(receipt.to!)).to.equal(agent.address);
    const [, , collateral] = await node.client.readContract({ address: lending.morpho, abi: morphoAbi, functionName: 'position', args: [lending.market.id, agent.address] });
    expect(collateral).to.equal(parseUnits('1', 18));
    // The wallet's ETH went down by exactly what was wrapped (the relayer paid the gas); no WETH left in the wallet.
    expect(await node.client.getBalance({ address: agent.address })).to.equal(parseUnits('0.5', 18));
    expect(await ledgerBalance(agent, 'ETH')).to.equal(parseUnits('0.5', 18));
    expect(await erc20(lending.market.params.collateralToken, agent.address)).to.equal(0n);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(0n);

    await executed(await post('', { asset: 'USDC', amount: '1000' }));
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('1000', 6));
    expect(await ledgerBalance(agent, 'USDC')).to.equal(parseUnits('1000', 6));
    const summary = (await s.request('GET', '/v1/agent/borrow', { agent })).body.borrow;
    expect(summary.collateral[0]).to.include({ asset_symbol: 'WETH', amount: '1' });
    expect(summary.debts[0]).to.include({ asset_symbol: 'USDC' });
  });

  it('converts ETH to USDC through the USDC/WETH pool: wrapped and swapped in one lane call, ledger equal to the chain', async () => {
    const agent = await s.agent({ ETH: '1' });
    const q = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: randomUUID(), body: { from_asset: 'ETH', to_asset: 'USDC', amount: '0.5', slippage_percent: 1 } });
    expect(q.status, JSON.stringify(q.body)).to.equal(200);
    const pair = dex.pairs[['USDC', 'WETH'].sort().join('/')]!;
    expect(q.body.quote.route.legs[0]).to.include({ protocol: 'uniswap-v2', pool_address: pair, from_asset: 'WETH', to_asset: 'USDC' });
    const expected = parseUnits(q.body.quote.expected_out, 6);
    const op = await executed(await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: randomUUID(), body: { quote_id: q.body.quote.quote_id } }));
    const receipt = await node.client.getTransactionReceipt({ hash: op.tx_hash as `0x${string}` });
    expect(getAddress(receipt.to!)).to.equal(agent.address);
    const usdc = await s.usdcBalance(agent.address);
    expect(usdc).to.equal(expected);
    expect(await ledgerBalance(agent, 'USDC')).to.equal(usdc);
    expect(await node.client.getBalance({ address: agent.address })).to.equal(parseUnits('0.5', 18));
    expect(await ledgerBalance(agent, 'ETH')).to.equal(parseUnits('0.5', 18));
    expect(await erc20(dex.tokens.WETH!, agent.address)).to.equal(0n);
  });

  /** The deposit watcher brought to the head (with its confirmations): whatever it credits shows in the ledger. */
  const watchToHead = async () => {
    if (s.config.chain.confirmations > 1) await node.mine(s.config.chain.confirmations - 1);
    while ((await s.services.inbound!.deposits.tick()) > 0);
  };
  const apiBalance = async (agent: ChainAgent, symbol: string) => {
    const items = (await s.request('GET', '/v1/agent/balances', { agent })).body.items as { asset_symbol: string; available: string }[];
    return parseUnits(items.find((b) => b.asset_symbol === symbol)?.available ?? '0', 18);
  };
  const convert = async (agent: ChainAgent, from: string, to: string, amount: string) => {
    const q = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: randomUUID(), body: { from_asset: from, to_asset: to, amount, slippage_percent: 1 } });
    expect(q.status, JSON.stringify(q.body)).to.equal(200);
    const op = await executed(await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: randomUUID(), body: { quote_id: q.body.quote.quote_id } }));
    const receipt = await node.client.getTransactionReceipt({ hash: op.tx_hash as `0x${string}` });
    // One relayed lane call of the account, self-booked (the watcher skips it).
    expect(getAddress(receipt.to!)).to.equal(agent.address);
    await watchToHead();
    expect(await s.db('chain_deposits').where({ tx_hash: op.tx_hash })).to.have.length(0);
    return { quote: q.body.quote as { expected_out: string; min_amount_out: string; route: { legs: Record<string, unknown>[] } }, op, receipt };
  };

  it('converts USDC to ETH: swapped into WETH and exactly the output unwrapped in one lane call; the ETH credited once', async () => {
    const agent = await s.agent({ USDC: '100' });
    const weth = dex.tokens.WETH!;
    const { quote, op, receipt } = await convert(agent, 'USDC', 'ETH', '30');
    expect(quote.route.legs[0]).to.include({ protocol: 'uniswap-v2', pool_address: dex.pairs[['USDC', 'WETH'].sort().join('/')]!, from_asset: 'USDC', to_asset: 'WETH' });
    const unwrapped = parseEventLogs({ abi: devWethAbi, eventName: 'Withdrawal', logs: receipt.logs.filter((l) => getAddress(l.address) === getAddress(weth)) });
    expect(unwrapped).to.have.length(1);
    const eth = await node.client.getBalance({ address: agent.address });
    // The account holds native ETH: what the swap paid (its quote, nobody else traded), all of it unwrapped.
    expect(eth).to.equal(parseUnits(quote.expected_out, 18));
    expect(eth).to.equal(unwrapped[0]!.args.wad);
    expect(eth >= parseUnits(quote.min_amount_out, 18)).to.equal(true);
    expect(await erc20(weth, agent.address)).to.equal(0n);
    // The ledger credits exactly that, once (the watcher ran to the head above), in ETH, not WETH.
    expect(await ledgerBalance(agent, 'ETH')).to.equal(eth);
    expect(await apiBalance(agent, 'ETH')).to.equal(eth);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(0n);
    expect(await s.usdcBalance(agent.address)).to.equal(parseUnits('70', 6));
    expect(await ledgerBalance(agent, 'USDC')).to.equal(parseUnits('70', 6));
    expect((op.details as { settled_amount_out?: string }).settled_amount_out).to.equal(eth.toString());
  });

  it('converts ETH to WETH and WETH back to ETH on chain, 1:1 through the WETH contract, the balances on chain and in /balances', async () => {
    const agent = await s.agent({ ETH: '1' });
    const weth = dex.tokens.WETH!;
    const wrap = await convert(agent, 'ETH', 'WETH', '0.4');
    expect(wrap.quote).to.include({ expected_out: '0.4', min_amount_out: '0.4' });
    expect(wrap.quote.route.legs[0]).to.include({ protocol: 'weth', pool_address: getAddress(weth), from_asset: 'ETH', to_asset: 'WETH', fee_bps: 0 });
    expect(await s.db('chain_transactions').where({ tx_hash: wrap.op.tx_hash }).first('kind')).to.deep.equal({ kind: 'wrap' });
    expect(await node.client.getBalance({ address: agent.address })).to.equal(parseUnits('0.6', 18));
    expect(await erc20(weth, agent.address)).to.equal(parseUnits('0.4', 18));
    expect(await ledgerBalance(agent, 'ETH')).to.equal(parseUnits('0.6', 18));
    expect(await ledgerBalance(agent, 'WETH')).to.equal(parseUnits('0.4', 18));
    expect(await apiBalance(agent, 'ETH')).to.equal(parseUnits('0.6', 18));
    expect(await apiBalance(agent, 'WETH')).to.equal(parseUnits('0.4', 18));

    await convert(agent, 'WETH', 'ETH', '0.15');
    expect(await node.client.getBalance({ address: agent.address })).to.equal(parseUnits('0.75', 18));
    expect(await erc20(weth, agent.address)).to.equal(parseUnits('0.25', 18));
    expect(await ledgerBalance(agent, 'ETH')).to.equal(parseUnits('0.75', 18));
    expect(await ledgerBalance(agent, 'WETH')).to.equal(parseUnits('0.25', 18));
    expect(await apiBalance(agent, 'ETH')).to.equal(parseUnits('0.75', 18));
    expect(await apiBalance(agent, 'WETH')).to.equal(parseUnits('0.25', 18));
  });

  it('ETH <-> WETH needs no allowed protocol (the account allows the WETH contract with ETH and WETH): a policy without protocols wraps, and swaps nothing', async () => {
    const agent = await s.agent({ ETH: '1' }, { policy: { operation_types: 'all', allowed_protocols: [] } });
    const quote = (to: string) =>
      s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: randomUUID(), body: { from_asset: 'ETH', to_asset: to, amount: '0.1', slippage_percent: 1 } });
    const refused = await quote('USDC');
    expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
    expect(refused.body.error.code).to.equal('protocol_not_allowed');
    await convert(agent, 'ETH', 'WETH', '0.1');
    expect(await erc20(dex.tokens.WETH!, agent.address)).to.equal(parseUnits('0.1', 18));
    expect(await ledgerBalance(agent, 'WETH')).to.equal(parseUnits('0.1', 18));
  });

  it('agentctl chain reconcile reports zero drift after the above (ETH and WETH per account)', async () => {
    const res = await agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['chain', 'reconcile']);
    expect(res.code, res.stderr).to.equal(0);
    const report = JSON.parse(res.stdout);
    expect(report.assets).to.include.members(['ETH', 'USDC', 'WETH']);
    expect(report.drift).to.deep.equal([]);
  });
});
