// contracts/AgentAccount.sol on Anvil (issue 24): the limits the owner set hold on chain whatever the lane key and
// the relayer do. Cap edges (exactly the remaining allowance passes, one base unit more reverts), period rollover,
// cooldown, pause, lane rotation, the trusted-destination time lock, cheques, owner-signature replay, and DeFi
// proceeds landing in the account.
import { expect } from 'chai';
import { createWalletClient, encodeFunctionData, http } from 'viem';
import { foundry } from 'viem/chains';
import { periodStart } from '../../src/services/ledger/policy.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { agentAccountAbi, devPriceFeedAbi } from '../../src/chain/custody.js';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import { devVaultAbi } from '../../src/chain/vaults.js';
import type { Address, Hex } from '../../src/chain/port.js';
import {
  advance,
  allowanceOf,
  buildWorld,
  chainNow,
  createAgent,
  devMarket,
  erc20BalanceOf,
  laneCall,
  mined,
  ownerCall,
  randomNonce,
  reverted,
  testPolicy,
  USD,
  USDC,
  type Agent,
  type World,
} from './world.js';

const stranger = () => privateKeyToAccount(generatePrivateKey()).address;

describe('AgentAccount on chain (Anvil)', function () {
  this.timeout(180_000);
  let w: World;

  before(async () => {
    w = await buildWorld();
  });
  after(async () => {
    await w?.stop();
  });

  const pay = (a: Agent, to: Address, amount: bigint) => laneCall(w, a, 'pay', [w.usdc, to, amount]);

  it('pays exactly the per-transaction cap and refuses one base unit more', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    expect(await reverted(w, pay(a, a.payee, USDC(10) + 1n))).to.equal('PerTxCapExceeded');
    await mined(w, pay(a, a.payee, USDC(10)));
    expect(await erc20BalanceOf(w, w.usdc, a.payee)).to.equal(USDC(10));
  });

  it('pays exactly the remaining period allowance, refuses one unit more, and starts again in the next period', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    await mined(w, pay(a, a.payee, USDC(10)));
    await mined(w, pay(a, a.payee, USDC(10)));
    await mined(w, pay(a, a.payee, USDC(7)));
    const before = await allowanceOf(w, a);
    expect(before.periodRemainingUsd).to.equal(USD(3));
    expect(before.exposureUsd).to.equal(USD(3));
    expect(await reverted(w, pay(a, a.payee, USDC(3) + 1n))).to.equal('PeriodCapExceeded');
    await mined(w, pay(a, a.payee, USDC(3)));
    expect((await allowanceOf(w, a)).exposureUsd).to.equal(0n);
    expect(await reverted(w, pay(a, a.payee, 1n))).to.equal('PeriodCapExceeded');
    await advance(w, 86_400);
    expect((await allowanceOf(w, a)).periodRemainingUsd).to.equal(USD(30));
    await mined(w, pay(a, a.payee, USDC(10)));
    expect(await erc20BalanceOf(w, w.usdc, a.payee)).to.equal(USDC(40));
  });

  it('counts the lifetime cap and transactions per period', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100), limits: { lifetimeUsd: USD(15), maxTxsPerPeriod: 2 } });
    await mined(w, pay(a, a.payee, USDC(10)));
    expect(await reverted(w, pay(a, a.payee, USDC(5) + 1n))).to.equal('LifetimeCapExceeded');
    await mined(w, pay(a, a.payee, USDC(1)));
    expect(await reverted(w, pay(a, a.payee, 1n))).to.equal('TooManyTransactions');
  });

  it('waits the cooldown in blocks between lane transactions', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100), limits: { cooldownBlocks: 5 } });
    await mined(w, pay(a, a.payee, USDC(1)));
    expect(await reverted(w, pay(a, a.payee, USDC(1)))).to.equal('CooldownActive');
    await w.node.mine(5);
    await mined(w, pay(a, a.payee, USDC(1)));
  });

  it('pays only payees and trusted destinations, and only the owner sets the policy', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    expect(await reverted(w, pay(a, stranger(), USDC(1)))).to.equal('RecipientNotAllowed');
    // The lane key signing a policy change, or the relayer calling, is not the owner.
    const raised = testPolicy(w, [a.payee], { perTxUsd: USD(1_000_000) });
    expect(await reverted(w, ownerCall(w, a, 'SetPolicy', raised, { signer: a.lane }))).to.equal('InvalidOwnerSignature');
    expect(await reverted(w, laneCall(w, a, 'pay', [w.usdc, a.payee, 1n], privateKeyToAccount(generatePrivateKey())))).to.equal('InvalidLaneSignature');
    expect(await reverted(w, { address: a.account, abi: agentAccountAbi, functionName: 'pay', args: [w.usdc, a.payee, 1n] })).to.equal('NotLane');
  });

  it('enforces the trusted destination time lock: confirming or paying early reverts, after unlock both work', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const dest = stranger();
    const unlockAt = (await chainNow(w)) + 86_400n;
    await mined(w, ownerCall(w, a, 'AddTrustedDestination', { destination: dest, unlockAt }));
    expect(await reverted(w, laneCall(w, a, 'confirmTrustedDestination', [dest]))).to.equal('TimeLockNotReached');
    expect(await reverted(w, pay(a, dest, USDC(1)))).to.equal('TimeLockNotReached');
    await advance(w, 86_400);
    await mined(w, laneCall(w, a, 'confirmTrustedDestination', [dest]));
    await mined(w, pay(a, dest, USDC(2)));
    expect(await erc20BalanceOf(w, w.usdc, dest)).to.equal(USDC(2));
  });

  it('pauses every lane call until the owner resumes; the lane cannot resume', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    await mined(w, ownerCall(w, a, 'Pause', {}));
    expect(await reverted(w, pay(a, a.payee, USDC(1)))).to.equal('EnforcedPause');
    expect((await allowanceOf(w, a)).exposureUsd).to.equal(0n);
    expect(await reverted(w, ownerCall(w, a, 'Resume', {}, { signer: a.lane }))).to.equal('InvalidOwnerSignature');
    await mined(w, ownerCall(w, a, 'Resume', {}));
    await mined(w, pay(a, a.payee, USDC(1)));
  });

  it('rotates the lane key: the old key is refused from then on', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const next = privateKeyToAccount(generatePrivateKey());
    expect(await reverted(w, ownerCall(w, a, 'RotateLane', { newLane: next.address }, { signer: a.lane }))).to.equal('InvalidOwnerSignature');
    await mined(w, ownerCall(w, a, 'RotateLane', { newLane: next.address }));
    expect(await reverted(w, pay(a, a.payee, USDC(1)))).to.equal('InvalidLaneSignature');
    await mined(w, laneCall(w, a, 'pay', [w.usdc, a.payee, USDC(1)], next));
  });

  it('refuses a replayed owner signature', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const call = await ownerCall(w, a, 'Pause', {});
    await mined(w, call);
    await mined(w, ownerCall(w, a, 'Resume', {}));
    expect(await reverted(w, call)).to.equal('InvalidAccountNonce');
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'paused' })).to.equal(false);
  });

  it('refuses a replayed lane signature', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const call = await pay(a, a.payee, USDC(1));
    await mined(w, call);
    expect(await reverted(w, call)).to.equal('LaneNonceUsed');
  });

  it('cheques: counted at issue, claimable only after unlock and before expiry, cancellable by the owner until unlock', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const to = stranger();
    const now = await chainNow(w);
    const id1 = randomNonce();
    const id2 = randomNonce();
    expect(await reverted(w, laneCall(w, a, 'issueCheque', [id1, w.usdc, to, USDC(5), now + 60n, now + 86_400n]))).to.equal('BadCheque'); // before minChequeDelay
    expect(await reverted(w, laneCall(w, a, 'issueCheque', [id1, w.usdc, to, USDC(10) + 1n, now + 7200n, now + 86_400n]))).to.equal('PerTxCapExceeded');
    await mined(w, laneCall(w, a, 'issueCheque', [id1, w.usdc, to, USDC(5), now + 7200n, now + 86_400n]));
    await mined(w, laneCall(w, a, 'issueCheque', [id2, w.usdc, to, USDC(6), now + 7200n, now + 86_400n]));
    expect((await allowanceOf(w, a)).periodRemainingUsd).to.equal(USD(19));
    const claim = (id: Hex) => ({ address: a.account, abi: agentAccountAbi, functionName: 'claimCheque', args: [id] });
    expect(await reverted(w, claim(id1))).to.equal('ChequeLocked');
    expect(await reverted(w, ownerCall(w, a, 'CancelCheque', { id: id1 }, { signer: a.lane }))).to.equal('InvalidOwnerSignature');
    await mined(w, ownerCall(w, a, 'CancelCheque', { id: id1 }));
    await advance(w, 7200);
    expect(await reverted(w, claim(id1))).to.equal('ChequeNotPending');
    expect(await reverted(w, ownerCall(w, a, 'CancelCheque', { id: id2 }))).to.equal('ChequeUnlocked');
    await mined(w, claim(id2));
    expect(await erc20BalanceOf(w, w.usdc, to)).to.equal(USDC(6));
    expect(await erc20BalanceOf(w, w.usdc, a.account)).to.equal(USDC(94));
    expect(await reverted(w, claim(id2))).to.equal('ChequeNotPending');
  });

  it('x402: the account vouches (ERC-1271) only for an authorization the lane registered within the caps', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100), limits: { anyRecipient: true } });
    const seller = stranger();
    const now = await chainNow(w);
    const auth = (value: bigint, nonce: Hex) => [w.usdc, seller, value, 0n, now + 3600n, nonce] as const;
    const transfer = (value: bigint, nonce: Hex) => ({ address: w.usdc, abi: usdCoinAbi, functionName: 'transferWithAuthorization', args: [a.account, seller, value, 0n, now + 3600n, nonce, '0x'] });
    const n1 = randomNonce();
    expect(await reverted(w, transfer(USDC(2), n1))).to.equal('InvalidAuthorizationSignature');
    expect(await reverted(w, laneCall(w, a, 'authorizeX402', auth(USDC(10) + 1n, n1)))).to.equal('PerTxCapExceeded');
    await mined(w, laneCall(w, a, 'authorizeX402', auth(USDC(2), n1)));
    // A different value, recipient or nonce is not what the account vouched for.
    expect(await reverted(w, transfer(USDC(3), n1))).to.equal('InvalidAuthorizationSignature');
    await mined(w, transfer(USDC(2), n1));
    expect(await erc20BalanceOf(w, w.usdc, seller)).to.equal(USDC(2));
    expect(await reverted(w, transfer(USDC(2), n1))).to.equal('AuthorizationUsedOrCanceled');
  });

  it('swap output, vault shares and redemptions, and borrowed funds land in the account', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100), limits: { perTxUsd: USD(100), perPeriodUsd: USD(1000) } });
    const weth = w.dex.tokens.WETH!;
    const usdcToWeth = (amount: bigint, min = 0n) => laneCall(w, a, 'swap', [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, weth], amount, min]);
    await mined(w, usdcToWeth(USDC(30)));
    const wethHeld = await erc20BalanceOf(w, weth, a.account);
    expect(wethHeld > 9_800_000_000_000_000n).to.equal(true); // 30 USDC at 3000 less fee and impact, > 98 %

    await mined(w, laneCall(w, a, 'deposit', [w.vault, USDC(20), 0n]));
    const shares = await w.client.readContract({ address: w.vault, abi: devVaultAbi, functionName: 'balanceOf', args: [a.account] });
    expect(shares > 0n).to.equal(true);
    // A move (earn) redeems and deposits in one call, into an allowed vault only; the new shares land in the account.
    const other = Object.values(w.earn.vaults).find((v) => v !== w.vault)!;
    expect(await reverted(w, laneCall(w, a, 'move', [w.vault, other, shares, 0n]))).to.equal('ProtocolNotAllowed');
    await mined(w, laneCall(w, a, 'move', [w.vault, w.vault, shares, shares]));
    expect(await w.client.readContract({ address: w.vault, abi: devVaultAbi, functionName: 'balanceOf', args: [a.account] })).to.equal(shares);
    await mined(w, laneCall(w, a, 'redeem', [w.vault, shares, 0n]));
    expect(await erc20BalanceOf(w, w.usdc, a.account)).to.equal(USDC(70));

    const market = devMarket(w);
    await mined(w, laneCall(w, a, 'supplyCollateral', [w.lending.morpho, market, wethHeld]));
    // ~29.5 USD of collateral at a 50 % LTV cap: 20 USDC is over it, 10 USDC is within.
    expect(await reverted(w, laneCall(w, a, 'borrow', [w.lending.morpho, market, USDC(20)]))).to.equal('LtvExceeded');
    await mined(w, laneCall(w, a, 'borrow', [w.lending.morpho, market, USDC(10)]));
    expect(await erc20BalanceOf(w, w.usdc, a.account)).to.equal(USDC(80));
    // Half the collateral back would leave a ~68 % LTV: healthy for Morpho (86 % LLTV), over the owner's 50 %.
    expect(await reverted(w, laneCall(w, a, 'withdrawCollateral', [w.lending.morpho, market, wethHeld / 2n]))).to.equal('LtvExceeded');
    expect(await reverted(w, laneCall(w, a, 'withdrawCollateral', [w.lending.morpho, market, wethHeld]))).to.equal('Error: insufficient collateral');
    await mined(w, laneCall(w, a, 'repay', [w.lending.morpho, market, USDC(10), 0n, USDC(10)]));
  });

  it('refuses a swap whose output is below the oracle value less the slippage cap, and a stale or zero price', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(100) });
    const weth = w.dex.tokens.WETH!;
    // The feed says WETH is worth 1000 USD less than the pool: the pool's output is below the oracle floor.
    await mined(w, w.faucet.writeContract({ address: w.custody.feeds.WETH!, abi: devPriceFeedAbi, functionName: 'setPrice', args: [250_000_000_000n] }));
    expect(await reverted(w, laneCall(w, a, 'swap', [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, weth], USDC(5), 0n]))).to.equal('InsufficientOutputAmount');
    await mined(w, w.faucet.writeContract({ address: w.custody.feeds.WETH!, abi: devPriceFeedAbi, functionName: 'setPrice', args: [0n] }));
    expect(await reverted(w, laneCall(w, a, 'pay', ['0x0000000000000000000000000000000000000000', a.payee, 1n]))).to.equal('ZeroPrice');
    await mined(w, w.faucet.writeContract({ address: w.custody.feeds.WETH!, abi: devPriceFeedAbi, functionName: 'setPrice', args: [300_000_000_000n] }));
    // Only the faucet updates the feeds: the relayer cannot.
    expect(await reverted(w, { address: w.custody.feeds.WETH!, abi: devPriceFeedAbi, functionName: 'setPrice', args: [1n] })).to.equal('NotUpdater');
    const stale = await createAgent(w, { fundUsdc: USDC(10) });
    const p = testPolicy(w, [stale.payee]);
    p.assets[0] = { ...p.assets[0]!, maxPriceAge: 60 };
    await mined(w, ownerCall(w, stale, 'SetPolicy', p));
    await advance(w, 120);
    expect(await reverted(w, pay(stale, stale.payee, 1n))).to.equal('StalePrice');
  });

  it('computes calendar periods exactly as the database policy does (day, week from Monday, month; UTC)', async () => {
    const a = await createAgent(w);
    const samples = [
      '1970-01-05T00:00:00Z',
      '2024-02-29T23:59:59Z',
      '2024-03-01T00:00:00Z',
      '2026-11-26T17:00:00Z',
      '2026-11-30T00:00:00Z',
      '2026-12-31T23:59:59Z',
      '2100-03-01T12:00:00Z',
      '2027-01-04T00:00:01Z',
    ];
    for (const iso of samples) {
      const at = new Date(iso);
      for (const [code, period] of [
        [1, 'day'],
        [2, 'week'],
        [3, 'month'],
      ] as const) {
        const onchain = await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'periodStart', args: [code, BigInt(at.getTime() / 1000)] });
        expect(Number(onchain) * 1000, `${period} of ${iso}`).to.equal(periodStart(period, at).getTime());
      }
    }
  });

  it('pays the native coin, hands ownership over (old signatures die), lets the owner rescue funds, and hashes the policy for drift checks', async () => {
    const a = await createAgent(w, { fundUsdc: USDC(20) });
    await mined(w, w.faucet.sendTransaction({ to: a.account, value: 10n ** 16n }));
    // 0.001 ETH at 3000 USD = 3 USD.
    await mined(w, laneCall(w, a, 'pay', ['0x0000000000000000000000000000000000000000', a.payee, 10n ** 15n]));
    expect(await w.client.getBalance({ address: a.payee })).to.equal(10n ** 15n);
    expect((await allowanceOf(w, a)).periodRemainingUsd).to.equal(USD(27));

    const p = testPolicy(w, [a.payee]);
    const hash = await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'policyHashOf', args: [p.limits, p.assets, p.protocols, p.markets, p.payees] });
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'policyHash' })).to.equal(hash);
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'isPayee', args: [a.payee] })).to.equal(true);

    const next = privateKeyToAccount(generatePrivateKey());
    const stale = await ownerCall(w, a, 'Pause', {}, { nonce: 5n });
    await mined(w, ownerCall(w, a, 'TransferOwnership', { newOwner: next.address }));
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'owner' })).to.equal(next.address);
    expect(await reverted(w, ownerCall(w, a, 'Pause', {}))).to.equal('InvalidOwnerSignature');
    expect(await reverted(w, stale)).to.equal('InvalidOwnerSignature');
    const handed = { ...a, owner: next };
    await mined(w, ownerCall(w, handed, 'RemoveTrustedDestination', { destination: a.payee }));

    // The owner's own transaction moves what it likes; nobody else's does.
    const rescue = encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [next.address, USDC(20)] });
    expect(await reverted(w, { address: a.account, abi: agentAccountAbi, functionName: 'ownerExecute', args: [w.usdc, 0n, rescue] })).to.equal('NotOwner');
    await mined(w, w.faucet.sendTransaction({ to: next.address, value: 10n ** 18n }));
    const ownerWallet = createWalletClient({ account: next, chain: foundry, transport: http(w.node.rpcUrl) });
    await mined(w, { address: a.account, abi: agentAccountAbi, functionName: 'ownerExecute', args: [w.usdc, 0n, rescue] }, ownerWallet);
    expect(await erc20BalanceOf(w, w.usdc, next.address)).to.equal(USDC(20));
  });

  it('the factory address is known before deployment and a created account cannot be initialized again', async () => {
    const a = await createAgent(w);
    expect(await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'owner' })).to.equal(a.owner.address);
    expect(await reverted(w, { address: a.account, abi: agentAccountAbi, functionName: 'initialize', args: [w.relayer.account.address, w.relayer.account.address] })).to.equal('AlreadyInitialized');
    expect(await reverted(w, { address: w.custody.implementation, abi: agentAccountAbi, functionName: 'initialize', args: [w.relayer.account.address, w.relayer.account.address] })).to.equal(
      'AlreadyInitialized',
    );
    await mintToken(w.faucet, w.client, w.usdc, a.account, 1n);
  });
});
