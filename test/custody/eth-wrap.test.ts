// Issue 30 item 2, the account's part: the lane wraps the account's ETH into an allowed WETH (WETH9's deposit) and
// unwraps it back (withdraw, the ETH returning through receive()), in one lane function that moves nothing out of
// the account and so counts toward no cap; unwrapping 0 after a swap into WETH unwraps exactly that swap's output. Refused for a WETH the owner did not allow, for a "WETH" that keeps the
// ETH without minting it (a router's payable fallback would), for anyone but the lane, and while paused.
import { expect } from 'chai';
import { encodeFunctionData, parseEther, parseEventLogs } from 'viem';
import { swapRouterAbi } from '../../src/chain/dex.js';
import { agentAccountAbi } from '../../src/chain/custody.js';
import { allowanceOf, buildWorld, createAgent, erc20BalanceOf, laneCall, mined, ownerCall, reverted, testPolicy, USD, type Agent, type World } from './world.js';

const EIP170 = 24_576;

describe('custody: wrapping ETH on chain (issue 30)', function () {
  this.timeout(180_000);
  let w: World;
  let a: Agent;
  let weth: `0x${string}`;
  before(async () => {
    w = await buildWorld();
    weth = w.dex.tokens.WETH!;
    a = await createAgent(w, { limits: { perTxUsd: USD(10), perPeriodUsd: USD(30) } });
    await mined(w, w.faucet.sendTransaction({ to: a.account, value: parseEther('2') }));
  });
  after(async () => w?.node.stop());

  it('the account runtime code stays under the EIP-170 limit', async () => {
    const code = await w.client.getCode({ address: w.custody.implementation });
    const size = (code!.length - 2) / 2;
    process.stdout.write(`      AgentAccount runtime: ${size} bytes\n`);
    expect(size).to.be.below(EIP170);
  });

  it('refuses a WETH that is not an allowed protocol of the policy', async () => {
    expect(await reverted(w, laneCall(w, a, 'wrapEth', [weth, parseEther('1'), false]))).to.equal('ProtocolNotAllowed');
  });

  it('wraps 1 ETH and unwraps 0.4 within the account, far above the USD caps, counting nothing', async () => {
    const base = testPolicy(w, [a.payee], { perTxUsd: USD(10), perPeriodUsd: USD(30) });
    await mined(w, ownerCall(w, a, 'SetPolicy', { ...base, protocols: [...base.protocols, weth] }));
    const before = await allowanceOf(w, a);
    await mined(w, laneCall(w, a, 'wrapEth', [weth, parseEther('1'), false]));
    expect(await erc20BalanceOf(w, weth, a.account)).to.equal(parseEther('1'));
    expect(await w.client.getBalance({ address: a.account })).to.equal(parseEther('1'));
    await mined(w, laneCall(w, a, 'wrapEth', [weth, parseEther('0.4'), true]));
    expect(await erc20BalanceOf(w, weth, a.account)).to.equal(parseEther('0.6'));
    expect(await w.client.getBalance({ address: a.account })).to.equal(parseEther('1.4'));
    // 3000 USD of ETH moved, against a 10 USD per-transaction cap: nothing was counted.
    const after = await allowanceOf(w, a);
    expect(after.periodRemainingUsd).to.equal(before.periodRemainingUsd);
    expect(after.txsRemaining).to.equal(before.txsRemaining);
  });

  it('refuses an allowed protocol that takes the ETH without minting WETH to the account (the router)', async () => {
    // The router is an allowed protocol; sending it ETH as a "deposit" must not pass (it has no payable deposit,
    // and even one that kept the ETH would fail the balance check).
    const msg = await reverted(w, laneCall(w, a, 'wrapEth', [w.dex.router, parseEther('0.1'), false]));
    expect(msg).to.not.equal('');
    expect(await w.client.getBalance({ address: a.account })).to.equal(parseEther('1.4'));
  });

  it('batch: wrap then swap in one relayed call, each call checked as if alone; all or nothing', async () => {
    const pair = w.dex.pairs[['USDC', 'WETH'].sort().join('/')]!;
    const call = (fn: string, args: readonly unknown[]) => encodeFunctionData({ abi: agentAccountAbi, functionName: fn, args } as never);
    const wrap = call('wrapEth', [weth, parseEther('0.003'), false]);
    // The swap of 0.003 WETH (9 USD) is within the 10 USD per-transaction cap: wrapped and swapped at once.
    await mined(w, laneCall(w, a, 'batch', [[wrap, call('swap', [w.dex.router, [pair], [weth, w.usdc], parseEther('0.003'), 0n])]]));
    expect((await erc20BalanceOf(w, w.usdc, a.account)) > 0n).to.equal(true);
    // A batch whose second call breaks a cap reverts whole: the wrap before it is undone too.
    const eth = await w.client.getBalance({ address: a.account });
    const big = call('swap', [w.dex.router, [pair], [weth, w.usdc], parseEther('0.01'), 0n]);
    expect(await reverted(w, laneCall(w, a, 'batch', [[call('wrapEth', [weth, parseEther('0.01'), false]), big]]))).to.equal('PerTxCapExceeded');
    expect(await w.client.getBalance({ address: a.account })).to.equal(eth);
    // An owner function inside a batch is still not the owner's: it needs the owner's signature.
    const pause = call('pause', [{ nonce: 0n, deadline: 2n ** 40n, signature: '0x' }]);
    expect(await reverted(w, laneCall(w, a, 'batch', [[pause]]))).to.equal('InvalidOwnerSignature');
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(false);
  });

  it('batch: swap into WETH then unwrap exactly its output (wrapEth amount 0); refused without a WETH swap before it', async () => {
    const pair = w.dex.pairs[['USDC', 'WETH'].sort().join('/')]!;
    const call = (fn: string, args: readonly unknown[]) => encodeFunctionData({ abi: agentAccountAbi, functionName: fn, args } as never);
    const [eth, wethBefore, usdc] = [await w.client.getBalance({ address: a.account }), await erc20BalanceOf(w, weth, a.account), await erc20BalanceOf(w, w.usdc, a.account)];
    const swap = call('swap', [w.dex.router, [pair], [w.usdc, weth], 3_000_000n, 0n]);
    const receipt = await mined(w, laneCall(w, a, 'batch', [[swap, call('wrapEth', [weth, 0n, true])]]));
    const [swapped] = parseEventLogs({ abi: swapRouterAbi, eventName: 'Swapped', logs: receipt.logs });
    expect(swapped!.args.amountOut > 0n).to.equal(true);
    // The account's ETH grew by the swap's output, its WETH is back where it was, 3 USDC went out.
    expect(await w.client.getBalance({ address: a.account })).to.equal(eth + swapped!.args.amountOut);
    expect(await erc20BalanceOf(w, weth, a.account)).to.equal(wethBefore);
    expect(await erc20BalanceOf(w, w.usdc, a.account)).to.equal(usdc - 3_000_000n);
    // Amount 0 with no swap before it, or after a swap whose output is not that WETH, or through another protocol: refused.
    expect(await reverted(w, laneCall(w, a, 'wrapEth', [weth, 0n, true]))).to.equal('BadRoute');
    const toUsdc = call('swap', [w.dex.router, [pair], [weth, w.usdc], 10n ** 14n, 0n]);
    expect(await reverted(w, laneCall(w, a, 'batch', [[toUsdc, call('wrapEth', [weth, 0n, true])]]))).to.equal('BadRoute');
    expect(await reverted(w, laneCall(w, a, 'batch', [[swap, call('wrapEth', [w.dex.router, 0n, true])]]))).to.equal('BadRoute');
    expect(await w.client.getBalance({ address: a.account })).to.equal(eth + swapped!.args.amountOut);
  });

  it('only the lane wraps, and not while paused', async () => {
    expect(await reverted(w, laneCall(w, a, 'wrapEth', [weth, 1n, false], a.owner))).to.equal('InvalidLaneSignature');
    await mined(w, ownerCall(w, a, 'Pause', {}));
    expect(await reverted(w, laneCall(w, a, 'wrapEth', [weth, 1n, false]))).to.equal('EnforcedPause');
    await mined(w, ownerCall(w, a, 'Resume', {}));
    await mined(w, laneCall(w, a, 'wrapEth', [weth, 1n, false]));
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(false);
  });
});
