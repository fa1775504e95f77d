// Conversions on chain (issue 16 acceptance 1): a quote reads the Uniswap v2 pair's reserves (pairs deployed from
// @uniswap/v2-core's artifacts by the development bootstrap), execution swaps through the router with the minimum
// output enforced on chain, and the ledger ends equal to the chain; a swap by another account between quote and
// execute is refused with slippage_exceeded before anything moves.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { formatUnits, getAddress, maxUint256, parseUnits } from 'viem';
import { swapRouterAbi, uniswapV2PairAbi, type DexContracts } from '../../src/chain/dex.js';
import { morphoAbi, type LendingContracts } from '../../src/chain/lending.js';
import { mintToken } from '../../src/chain/token.js';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { chainEnv, startChainServer, type ChainAgent, type ChainServer } from '../helpers/chain.js';
import { agentctl } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const erc20Abi = [
  { type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ name: 'a', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
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

describe('DeFi on chain: conversions through Uniswap v2 pairs', function () {
  this.timeout(120_000);
  let node: AnvilNode;
  let s: ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> };
  let dex: DexContracts;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node);
    const row = await s.db('chain_settings').where({ chain_id: 31337, key: 'dex' }).first();
    dex = JSON.parse(row.value) as DexContracts;
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  const quote = (agent: ChainAgent, body: Record<string, unknown>) => s.request('POST', '/v1/agent/conversions/quote', { agent, body, idempotencyKey: randomUUID() });
  const execute = (agent: ChainAgent, quoteId: string) => s.request('POST', '/v1/agent/conversions', { agent, body: { quote_id: quoteId }, idempotencyKey: randomUUID() });
  const onchainBalance = (token: `0x${string}`, address: `0x${string}`) => node.client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [address] });
  const ledgerBalance = async (agent: ChainAgent, symbol: string) => (await s.services.ledger.ledger.balance(s.db, agent.walletId, symbol)).available;
  const pairOf = (a: string, b: string) => dex.pairs[[a, b].sort().join('/')]!;

  /** The pair's own reserves, ordered (in, out), and the router's on-chain getAmountOut (Uniswap v2's 997/1000) for them. */
  async function onchainAmountOut(pair: `0x${string}`, tokenIn: `0x${string}`, amountIn: bigint) {
    const [token0, [r0, r1]] = await Promise.all([
      node.client.readContract({ address: pair, abi: uniswapV2PairAbi, functionName: 'token0' }),
      node.client.readContract({ address: pair, abi: uniswapV2PairAbi, functionName: 'getReserves' }),
    ]);
    const [rin, rout] = getAddress(token0) === getAddress(tokenIn) ? [r0, r1] : [r1, r0];
    return node.client.readContract({ address: dex.router, abi: swapRouterAbi, functionName: 'getAmountOut', args: [amountIn, rin, rout] });
  }

  it('deploys the pairs from @uniswap/v2-core, records the dev tokens as the WETH and EURC contracts, and lists the contracts under /protocols', async () => {
    for (const symbol of ['WETH', 'EURC']) {
      const asset = await s.db('assets').where({ symbol }).first();
      expect(getAddress(asset.contract_address)).to.equal(dex.tokens[symbol]);
    }
    const [r0, r1] = await node.client.readContract({ address: pairOf('USDC', 'WETH'), abi: uniswapV2PairAbi, functionName: 'getReserves' });
    const agent = await s.agent();
    const protocols = await s.request('GET', '/v1/agent/protocols?limit=100', { agent });
    expect(protocols.status).to.equal(200);
    const v2 = protocols.body.items.find((p: { id: string }) => p.id === 'uniswap-v2');
    expect(v2.contracts).to.deep.include.members([
      { role: 'factory', address: dex.factory },
      { role: 'router', address: dex.router },
      { role: 'pool', name: 'USDC/WETH', address: pairOf('USDC', 'WETH') },
      { role: 'pool', name: 'EURC/USDC', address: pairOf('USDC', 'EURC') },
    ]);
    const earn = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'earn' }).first()).value) as { vaults: Record<string, string> };
    const morpho = protocols.body.items.find((p: { id: string }) => p.id === 'morpho');
    expect(morpho.contracts).to.deep.include({ role: 'vault', name: 'Morpho USDC Prime', address: earn.vaults['6f1d2a10-0000-4000-8000-000000000001'] });
    expect(protocols.body.items.find((p: { id: string }) => p.id === 'moonwell')).to.not.have.property('contracts');
    // Borrow, first step: Morpho Blue's WETH/USDC market, deployed from sources compiled with solc 0.8.19.
    const lending = JSON.parse((await s.db('chain_settings').where({ chain_id: 31337, key: 'lending' }).first()).value) as LendingContracts;
    expect(morpho.contracts).to.deep.include({ role: 'market', name: 'WETH/USDC', address: lending.morpho });
    const params = await node.client.readContract({ address: lending.morpho, abi: morphoAbi, functionName: 'idToMarketParams', args: [lending.market.id] });
    expect(params).to.deep.equal([s.token, dex.tokens.WETH, lending.oracle, lending.irm, 860_000_000_000_000_000n]);
    const market = await node.client.readContract({ address: lending.morpho, abi: morphoAbi, functionName: 'market', args: [lending.market.id] });
    expect(market[0]).to.equal(parseUnits('1000000', 6)); // totalSupplyAssets
    // Only the relayer acts on a wallet's permit (a permit does not name the route).
    const outsider = node.devWallet(4);
    const permit = { deadline: BigInt(Math.floor(Date.now() / 1000) + 600), v: 27, r: `0x${'11'.repeat(32)}` as const, s: `0x${'22'.repeat(32)}` as const };
    const stolen = node.client
      .simulateContract({
        account: outsider.account,
        address: dex.router,
        abi: swapRouterAbi,
        functionName: 'swapExactInWithPermit',
        args: [agent.address, [pairOf('USDC', 'WETH')], [s.token, dex.tokens.WETH!], 1n, 0n, permit],
      })
      .then(
        () => 'accepted',
        (err: Error) => err.message,
      );
    expect(await stolen).to.match(/NotRelayer/);
    const sorted = (xs: bigint[]) => [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(sorted([r0, r1])).to.deep.equal(sorted([parseUnits('1000', 18), parseUnits('3000000', 6)]));
  });

  it("quotes USDC -> WETH at the pair's getAmountOut, and after execution the wallet's on-chain WETH equals the ledger's", async () => {
    const agent = await s.agent({ USDC: '1000' });
    const amountIn = parseUnits('500', 6);
    const expected = await onchainAmountOut(pairOf('USDC', 'WETH'), s.token, amountIn);
    const q = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '500', slippage_percent: 1 });
    expect(q.status).to.equal(200);
    expect(q.body.quote.expected_out).to.equal(formatUnits(expected, 18));
    expect(q.body.quote.route.legs).to.have.length(1);
    expect(q.body.quote.route.legs[0]).to.include({ protocol: 'uniswap-v2', pool_address: pairOf('USDC', 'WETH'), fee_bps: 30, from_asset: 'USDC', to_asset: 'WETH' });

    const exec = await execute(agent, q.body.quote.quote_id);
    expect(exec.status).to.equal(200);
    const [op] = await s.settle([exec.body.operation_id]);
    expect(op!.status).to.equal('executed');
    const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
    expect(receipt.status).to.equal('success');
    // Issue 24: the swap is the agent account's lane call (the account calls the router).
    expect(getAddress(receipt.to!)).to.equal(agent.address);

    const weth = await onchainBalance(dex.tokens.WETH!, agent.address);
    expect(weth).to.equal(expected);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(weth);
    expect(await onchainBalance(s.token, agent.address)).to.equal(parseUnits('500', 6));
    expect(await ledgerBalance(agent, 'USDC')).to.equal(parseUnits('500', 6));
    // The relayer paid the gas: the wallet holds no ETH and the ledger charged none.
    expect(await node.client.getBalance({ address: agent.address })).to.equal(0n);
    expect((await s.services.ledger.ledger.balance(s.db, agent.walletId, 'ETH')).available).to.equal(0n);
  });

  it("gives slippage_exceeded and moves nothing when another account's large swap lands between quote and execute", async () => {
    const agent = await s.agent({ USDC: '1000' });
    const q = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '500', slippage_percent: 0.5 });
    expect(q.status).to.equal(200);

    // Another account buys WETH with 300,000 USDC through the same router: the price of WETH rises ~20 %.
    const whale = node.devWallet(2);
    await mintToken(node.devWallet(0), node.client, s.token, whale.account.address, parseUnits('300000', 6));
    await node.client.waitForTransactionReceipt({ hash: await whale.writeContract({ address: s.token, abi: erc20Abi, functionName: 'approve', args: [dex.router, maxUint256] }) });
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
    const swap = await whale.writeContract({
      address: dex.router,
      abi: swapRouterAbi,
      functionName: 'swapExactIn',
      args: [[pairOf('USDC', 'WETH')], [s.token, dex.tokens.WETH!], parseUnits('300000', 6), 0n, whale.account.address, deadline],
    });
    expect((await node.client.waitForTransactionReceipt({ hash: swap })).status).to.equal('success');

    const operationsBefore = await s.db('operations').where({ agent_id: agent.agentId }).count<{ count: string }[]>('* as count');
    const res = await execute(agent, q.body.quote.quote_id);
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal('slippage_exceeded');
    const operationsAfter = await s.db('operations').where({ agent_id: agent.agentId }).count<{ count: string }[]>('* as count');
    expect(operationsAfter[0]!.count).to.equal(operationsBefore[0]!.count);
    expect(await s.db('chain_transactions').where({ kind: 'swap', transfer_to: agent.address.toLowerCase() }).first()).to.equal(undefined);
    expect(await onchainBalance(s.token, agent.address)).to.equal(parseUnits('1000', 6));
    expect(await onchainBalance(dex.tokens.WETH!, agent.address)).to.equal(0n);
    const usdc = await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
    expect([usdc.available, usdc.held]).to.deep.equal([parseUnits('1000', 6), 0n]);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(0n);
  });

  it('enforces min_amount_out on chain: a swap front-run in the same block reverts, fails the operation and releases the hold', async () => {
    const agent = await s.agent({ USDC: '1000' });
    const q = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '500', slippage_percent: 0.5 });
    const exec = await execute(agent, q.body.quote.quote_id);
    expect(exec.status).to.equal(200);
    const whale = node.devWallet(2);
    await mintToken(node.devWallet(0), node.client, s.token, whale.account.address, parseUnits('300000', 6));
    await node.client.waitForTransactionReceipt({ hash: await whale.writeContract({ address: s.token, abi: erc20Abi, functionName: 'approve', args: [dex.router, maxUint256] }) });

    await node.rpc('evm_setAutomine', [false]);
    try {
      // One settlement pass: the swap is simulated (fine at these reserves), signed, recorded and broadcast.
      await runSettlementTick({ db: s.db, ledger: s.services.ledger });
      const row = await s.db('chain_transactions').where({ operation_id: exec.body.operation_id }).first();
      expect(row).to.include({ kind: 'swap', status: 'broadcast' });
      // Another account's large swap with a much higher tip lands first in the same block.
      const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
      const tip = 100_000_000_000n;
      await whale.writeContract({
        address: dex.router,
        abi: swapRouterAbi,
        functionName: 'swapExactIn',
        args: [[pairOf('USDC', 'WETH')], [s.token, dex.tokens.WETH!], parseUnits('300000', 6), 0n, whale.account.address, deadline],
        gas: 300_000n,
        maxPriorityFeePerGas: tip,
        maxFeePerGas: tip * 2n,
      });
      await node.rpc('evm_mine');
    } finally {
      await node.rpc('evm_setAutomine', [true]);
    }
    const [op] = await s.settle([exec.body.operation_id]);
    expect(op!.status).to.equal('execution_failed');
    expect(op!.error_code).to.equal('execution_reverted');
    const receipt = await node.client.getTransactionReceipt({ hash: op!.tx_hash as `0x${string}` });
    expect(receipt.status).to.equal('reverted');
    expect(await onchainBalance(s.token, agent.address)).to.equal(parseUnits('1000', 6));
    expect(await onchainBalance(dex.tokens.WETH!, agent.address)).to.equal(0n);
    const usdc = await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
    expect([usdc.available, usdc.held]).to.deep.equal([parseUnits('1000', 6), 0n]);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(0n);

    // The reverted swap did not consume its permit: the wallet's next conversion signs at the chain's nonce and settles.
    const again = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '100' });
    const [next] = await s.settle([(await execute(agent, again.body.quote.quote_id)).body.operation_id]);
    expect(next!.status).to.equal('executed');
    expect(await ledgerBalance(agent, 'WETH')).to.equal(await onchainBalance(dex.tokens.WETH!, agent.address));
    expect(await ledgerBalance(agent, 'WETH')).to.equal(parseUnits(again.body.quote.expected_out, 18));
  });

  it('routes WETH -> EURC through USDC (two pairs) in one transaction, ledger equal to the chain', async () => {
    const agent = await s.agent({ USDC: '2000' });
    const first = await quote(agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1500' });
    const [bought] = await s.settle([(await execute(agent, first.body.quote.quote_id)).body.operation_id]);
    expect(bought!.status).to.equal('executed');
    const weth = await onchainBalance(dex.tokens.WETH!, agent.address);

    const hop1 = await onchainAmountOut(pairOf('USDC', 'WETH'), dex.tokens.WETH!, weth);
    const q = await quote(agent, { from_asset: 'WETH', to_asset: 'EURC', amount: formatUnits(weth, 18) });
    expect(q.status).to.equal(200);
    const legs = q.body.quote.route.legs;
    expect(legs.map((l: { pool_address: string }) => l.pool_address)).to.deep.equal([pairOf('USDC', 'WETH'), pairOf('USDC', 'EURC')]);
    expect(legs[0].expected_out).to.equal(formatUnits(hop1, 6));
    const hop2 = await onchainAmountOut(pairOf('USDC', 'EURC'), s.token, hop1);
    expect(q.body.quote.expected_out).to.equal(formatUnits(hop2, 6));

    const [op] = await s.settle([(await execute(agent, q.body.quote.quote_id)).body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await onchainBalance(dex.tokens.EURC!, agent.address)).to.equal(hop2);
    expect(await ledgerBalance(agent, 'EURC')).to.equal(hop2);
    expect(await onchainBalance(dex.tokens.WETH!, agent.address)).to.equal(0n);
    expect(await ledgerBalance(agent, 'WETH')).to.equal(0n);
    expect(await ledgerBalance(agent, 'USDC')).to.equal(await onchainBalance(s.token, agent.address));
  });

  it('agentctl chain reconcile reports zero drift after the swaps above (USDC, WETH and EURC per wallet)', async () => {
    const res = await agentctl(testConfigEnv(chainEnv(node, s.databaseUrl)), ['chain', 'reconcile']);
    expect(res.code, res.stderr).to.equal(0);
    const report = JSON.parse(res.stdout);
    expect(report.assets).to.include.members(['USDC', 'WETH', 'EURC']);
    expect(report.wallets_checked).to.be.greaterThan(2);
    expect(report.drift).to.deep.equal([]);
  });
});
