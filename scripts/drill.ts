// `npm run drill` (issue 24, docs/CUSTODY.md): a compromised-server drill. It boots Anvil and the service on it (whose
// start runs the development bootstrap), sets up agent accounts as the server and their owners do (the server holds
// each agent's lane key and the relayer key; each owner keeps its own signer), then takes what a compromised server
// has: a dump of every table, MASTER_KEY, the relayer key opened from the dump, every lane key. With only that it
// attempts every attack of the threat model directly against the chain. Every attack is a real transaction (a fixed
// gas limit, so no estimate stops it before the chain); it must revert and leave the account's balances where they
// were; the drain attempt may move at most the exposure shown before it. Prints one line per attack and, per agent,
// the exposure (its remaining allowance, read from the chain); exits 0 only if every attack failed.
// `--database-url postgres://...` runs the service on that (migrated) database instead of the embedded PGlite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { encodeFunctionData, formatUnits, getAddress, parseAbi } from 'viem';
import { createApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createSealer } from '../src/lib/crypto.js';
import { CUSTODY_SETTING, type CustodyContracts } from '../src/chain/custody.js';
import { DEX_SETTING, type DexContracts } from '../src/chain/dex.js';
import { LENDING_SETTING, type LendingContracts } from '../src/chain/lending.js';
import { EARN_SETTING, type EarnContracts } from '../src/chain/vaults.js';
import { startAnvil } from '../test/helpers/anvil.js';
import { ownerTypedData as serviceOwnerTypedData } from '../src/chain/accounts.js';
import { toOnchainPolicy } from '../src/services/custody/onchain-policy.js';
import { mintToken } from '../src/chain/token.js';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { agentAccountAbi } from '../src/chain/custody.js';
import { borrowRouterAbi, morphoAbi } from '../src/chain/lending.js';
import { swapRouterAbi } from '../src/chain/dex.js';
import { devVaultAbi, earnRouterAbi } from '../src/chain/vaults.js';
import { usdCoinAbi } from '../src/chain/token.js';
import type { Address, Hex } from '../src/chain/port.js';
import {
  allowanceOf,
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
  worldOf,
  type Agent,
  type Call,
  type World,
} from '../test/custody/world.js';

/** What a compromised API or worker process holds: the relayer key and every agent's lane key (and their accounts). */
interface Loot {
  relayer: World['relayer'];
  lanes: Map<Address, PrivateKeyAccount>;
}

const MASTER_KEY = 'drill-master-key-0123456789abcdef0123456789';

/** Boots Anvil and the service on it (`--database-url` Postgres, else the embedded PGlite): its start runs the bootstrap. */
async function boot(databaseUrl: string | undefined) {
  const node = await startAnvil();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'drill-'));
  const env: Record<string, string> = {
    NODE_ENV: 'development',
    DATA_DIR: dataDir,
    RUN_WORKER: 'false',
    LOG_LEVEL: 'silent',
    MASTER_KEY,
    VALIDATE_RESPONSES: 'false',
    CHAIN_RPC_URL: node.rpcUrl,
    CHAIN_POLL_MS: '20',
    CHAIN_CONFIRMATIONS: '1',
  };
  if (databaseUrl) Object.assign(env, { DATABASE_URL: databaseUrl, AUTO_MIGRATE: 'false' });
  const built = await createApp(loadConfig(env, () => {}));
  const stop = async () => {
    await built.close();
    await node.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { node, built, stop };
}

type Built = Awaited<ReturnType<typeof boot>>['built'];

/**
 * What a compromised server has: a dump of every table, MASTER_KEY, and the keys they open (the relayer key; the
 * lane key of every account wallet), plus the contracts its bootstrap recorded.
 */
async function steal(node: Awaited<ReturnType<typeof boot>>['node'], built: Built) {
  const { rows } = (await built.db.raw(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)) as { rows: { table_name: string }[] };
  const dump: Record<string, Record<string, unknown>[]> = {};
  for (const { table_name } of rows) dump[table_name] = (await built.db(table_name).select()) as Record<string, unknown>[];
  const sealer = createSealer(MASTER_KEY);
  const setting = (key: string) => dump.chain_settings!.find((r) => r.key === key)?.value as string | undefined;
  const relayerKey = sealer.open(setting('relayer_key')!) as Hex;
  const laneKeys = (dump.wallets ?? [])
    .filter((r) => r.custody === 'account')
    .map((r) => ({ account: getAddress(String(r.address)) as Address, key: privateKeyToAccount(sealer.open(String(r.sealed_private_key)) as Hex) }));
  const contracts = {
    usdc: getAddress(setting('usdc_token')!) as Address,
    dex: JSON.parse(setting(DEX_SETTING)!) as DexContracts,
    earn: JSON.parse(setting(EARN_SETTING)!) as EarnContracts,
    lending: JSON.parse(setting(LENDING_SETTING)!) as LendingContracts,
    custody: JSON.parse(setting(CUSTODY_SETTING)!) as CustodyContracts,
  };
  const dumpRows = Object.values(dump).reduce((n, t) => n + t.length, 0);
  return { contracts, relayerKey, laneKeys, summary: `${Object.keys(dump).length} tables (${dumpRows} rows), MASTER_KEY, the relayer key ${privateKeyToAccount(relayerKey).address}` };
}

/**
 * An agent made through the service as an owner does it: the owner registers its signer (a key it keeps; the service
 * never sees it), the agent's wallet becomes an account, and the owner signs the policy the service proposes.
 */
async function serviceAgent(built: Built): Promise<Omit<Agent, 'lane'>> {
  const owner = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  const { owner_id } = await built.services.agents.createOwner(built.db, { email: `drill-${randomNonce().slice(2, 10)}@example.com`, signerAddress: owner.address });
  const created = await built.services.agents.createAgent(built.db, { ownerId: owner_id, name: 'drill agent' });
  const doc = { operation_types: 'all', per_tx_usd: '10', per_period_usd: '30', period: 'day', allowed_assets: ['USDC'], allowed_recipients: [payee], allowed_protocols: [] };
  const custody = built.services.custody!;
  const contracts = JSON.parse((await built.db('chain_settings').where({ key: CUSTODY_SETTING }).first()).value) as CustodyContracts;
  const onchain = await toOnchainPolicy(built.db, { chain: built.chain!, contracts, protocols: async () => new Map() }, created.agent_id, built.services.ledger.policy.parse(doc));
  const change = { kind: 'set_policy', policy: onchain } as const;
  const proposal = await custody.propose(built.db, created.agent_id, change);
  const signature = await owner.signTypedData(serviceOwnerTypedData(31337, proposal.account, change, BigInt(proposal.nonce), BigInt(proposal.deadline)) as never);
  await built.services.ledger.policy.set(built.db, created.agent_id, doc, { signature, nonce: proposal.nonce, deadline: proposal.deadline });
  const wallet = (await built.db('wallets').where({ id: created.wallet_id }).first()) as { address: string; custody: string };
  if (wallet.custody !== 'account') throw new Error("the service did not make the agent's wallet an account");
  return { account: getAddress(wallet.address) as Address, owner, payee };
}

interface Outcome {
  name: string;
  refused: boolean;
  detail: string;
}

const usd = (e8: bigint) => (e8 >= 2n ** 255n ? 'unlimited' : `${formatUnits(e8, 8)} USD`);

/** The account's holdings the attacks must not move: tokens, vault shares, ETH, Morpho collateral. */
async function holdings(w: World, account: Address): Promise<string> {
  const [usdc, weth, shares, eth, position] = await Promise.all([
    erc20BalanceOf(w, w.usdc, account),
    erc20BalanceOf(w, w.dex.tokens.WETH!, account),
    w.client.readContract({ address: w.vault, abi: devVaultAbi, functionName: 'balanceOf', args: [account] }),
    w.client.getBalance({ address: account }),
    w.client.readContract({ address: w.lending.morpho, abi: morphoAbi, functionName: 'position', args: [w.lending.market.id, account] }),
  ]);
  return [usdc, weth, shares, eth, position[1], position[2]].join('/');
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'database-url': { type: 'string' } } });
  const started = Date.now();
  const { node, built, stop } = await boot(values['database-url']);
  const booted = Date.now();
  try {
    const viaService = await serviceAgent(built);
    const { contracts, relayerKey, laneKeys, summary } = await steal(node, built);
    const w = worldOf(node, contracts, relayerKey);
    await mintToken(w.faucet, w.client, w.usdc, viaService.account, USDC(100));
    const serviceLane = laneKeys.find((l) => l.account === viaService.account);
    if (!serviceLane) throw new Error('the dump holds no lane key for the service agent');
    const svc: Agent = { ...viaService, lane: serviceLane.key };
    // ---- set-up, as the server and the owners do it
    const drained = await createAgent(w, { fundUsdc: USDC(100) });
    const target = await createAgent(w, { fundUsdc: USDC(200), limits: { perTxUsd: 10_00000000n, perPeriodUsd: 60_00000000n } });
    const paused = await createAgent(w, { fundUsdc: USDC(50) });
    // Issues 27 and 26: an agent whose owner requires its approval above 20 USD and allows one swap a day.
    const gated = await createAgent(w, { fundUsdc: USDC(200), limits: { perTxUsd: USD(100), perPeriodUsd: USD(500), approvalThresholdUsd: USD(20), maxSwapsPerPeriod: 1 } });
    // Issue 27's approve_new_payees: any recipient within the caps (the owner's choice), but a first transfer to an
    // address the account never paid only with the owner's ApproveSpend.
    const newPayees = await createAgent(w, { fundUsdc: USDC(100), limits: { perTxUsd: USD(50), perPeriodUsd: USD(100), anyRecipient: true, approveNewPayees: true } });
    const agents = [svc, drained, target, paused];
    // The lane keys as the server holds them: from the dump for the service's account wallets; the drill's own
    // agents were set up beside the service (factory + owner signatures), their lane keys handed to the attacker.
    const loot: Loot = { relayer: w.relayer, lanes: new Map([...agents.map((a) => [a.account, a.lane] as const), ...laneKeys.map((l) => [l.account, l.key] as const)]) };
    loot.lanes.set(gated.account, gated.lane);
    loot.lanes.set(newPayees.account, newPayees.lane);
    process.stdout.write(`stolen: ${summary}, ${loot.lanes.size} lane keys (${laneKeys.length} from the dump)\n`);
    const market = devMarket(w);
    // The target agent has a vault position and a Morpho position (made through its lane, within its caps).
    await mined(w, laneCall(w, target, 'deposit', [w.vault, USDC(10), 0n]));
    await mined(w, laneCall(w, target, 'swap', [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, w.dex.tokens.WETH!], USDC(9), 0n]));
    const collateral = await erc20BalanceOf(w, w.dex.tokens.WETH!, target.account);
    await mined(w, laneCall(w, target, 'supplyCollateral', [w.lending.morpho, market, collateral]));
    // The owner once paused and resumed the third agent (signatures an attacker may have seen in our logs) and
    // added a trusted destination to the target agent, unlocking in a day.
    const oldPause = await ownerCall(w, paused, 'Pause', {});
    await mined(w, oldPause);
    const oldResume = await ownerCall(w, paused, 'Resume', {});
    await mined(w, oldResume);
    const fresh = privateKeyToAccount(generatePrivateKey()).address;
    await mined(w, ownerCall(w, target, 'AddTrustedDestination', { destination: fresh, unlockAt: (await chainNow(w)) + 86_400n }));
    // A cheque the lane issued (within the caps) to an address the attacker controls.
    const attacker = privateKeyToAccount(generatePrivateKey());
    const chequeId = randomNonce();
    const now = await chainNow(w);
    await mined(w, laneCall(w, target, 'issueCheque', [chequeId, w.usdc, attacker.address, USDC(5), now + 7200n, now + 86_400n]));
    // The gated agent's owner approved one 30 USD payment (its signed ApproveSpend, relayed), which the lane made;
    // the lane made the day's one swap.
    const approval = await ownerCall(w, gated, 'ApproveSpend', { operationId: randomNonce(), token: w.usdc, to: gated.payee, amount: USDC(30) });
    await mined(w, approval);
    await mined(w, laneCall(w, gated, 'pay', [w.usdc, gated.payee, USDC(30)]));
    const gatedSwap = () => laneCall(w, gated, 'swap', [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, w.dex.tokens.WETH!], USDC(5), 0n], loot.lanes.get(gated.account));
    await mined(w, gatedSwap());
    // The new-payee agent's owner approved its first 5 USD payment to its payee (made by the lane), and approved a
    // first 5 USD payment to a supplier the lane has not made yet.
    const newPayeeApproval = await ownerCall(w, newPayees, 'ApproveSpend', { operationId: randomNonce(), token: w.usdc, to: newPayees.payee, amount: USDC(5) });
    await mined(w, newPayeeApproval);
    await mined(w, laneCall(w, newPayees, 'pay', [w.usdc, newPayees.payee, USDC(5)]));
    const supplier = privateKeyToAccount(generatePrivateKey()).address;
    await mined(w, ownerCall(w, newPayees, 'ApproveSpend', { operationId: randomNonce(), token: w.usdc, to: supplier, amount: USDC(5) }));
    // The owner of the third agent noticed the breach and paused it.
    await mined(w, ownerCall(w, paused, 'Pause', {}));

    // ---- the attacks, with only the loot
    const lane = (a: Agent) => loot.lanes.get(a.account)!;
    const asLane = (a: Agent, fn: string, args: readonly unknown[]) => laneCall(w, a, fn, args, lane(a));
    const asRelayer = (address: Address, abi: Call['abi'], functionName: string, args: readonly unknown[]): Call => ({ address, abi, functionName, args });
    const outcomes: Outcome[] = [];
    const attempt = async (name: string, agent: Agent, call: () => Promise<Call> | Call) => {
      const before = await holdings(w, agent.account);
      let reason: string;
      try {
        reason = await reverted(w, call());
      } catch (err) {
        outcomes.push({ name, refused: false, detail: `SUCCEEDED: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` });
        return;
      }
      const after = await holdings(w, agent.account);
      outcomes.push(
        before === after
          ? { name, refused: true, detail: `reverted (${reason}); the account's balances are unchanged` }
          : { name, refused: false, detail: `reverted (${reason}) but the account's balances moved: ${before} -> ${after}` },
      );
    };
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const evilLane = privateKeyToAccount(generatePrivateKey());
    const full = testPolicy(w, [target.payee, attacker.address], { perTxUsd: 2n ** 256n - 1n, perPeriodUsd: 2n ** 256n - 1n, lifetimeUsd: 2n ** 256n - 1n, anyRecipient: true });

    await attempt('over the per-transaction cap (10 USD + 1 unit to a payee)', target, () => asLane(target, 'pay', [w.usdc, target.payee, USDC(10) + 1n]));
    {
      // Many transfers at the per-transaction cap: whatever gets through must stay within the exposure shown before.
      const exposure = (await allowanceOf(w, drained)).exposureUsd;
      const start = await erc20BalanceOf(w, w.usdc, drained.account);
      let reason = '';
      for (let i = 0; i < 10 && !reason; i++) {
        const call = await asLane(drained, 'pay', [w.usdc, drained.payee, USDC(10)]);
        try {
          await mined(w, call);
        } catch {
          reason = await reverted(w, asLane(drained, 'pay', [w.usdc, drained.payee, USDC(10)]));
        }
      }
      const movedE8 = (start - (await erc20BalanceOf(w, w.usdc, drained.account))) * 100n;
      const held = movedE8 <= exposure && reason !== '';
      outcomes.push({ name: 'many transfers past the period cap', refused: held, detail: `moved ${usd(movedE8)} of the ${usd(exposure)} exposure to its payee, then reverted (${reason || 'never'})` });
    }
    await attempt('pay an unapproved payee', target, () => asLane(target, 'pay', [w.usdc, stranger, USDC(1)]));
    await attempt('add a trusted destination (lane-signed)', target, () => ownerCall(w, target, 'AddTrustedDestination', { destination: stranger, unlockAt: 1n }, { signer: lane(target) }));
    await attempt('use a destination the owner just added', target, () => asLane(target, 'pay', [w.usdc, fresh, USDC(1)]));
    await attempt('confirm that destination before its time lock', target, () => asLane(target, 'confirmTrustedDestination', [fresh]));
    await attempt('shorten the time lock (re-add with unlockAt now, lane-signed)', target, () =>
      ownerCall(w, target, 'AddTrustedDestination', { destination: fresh, unlockAt: 1n }, { signer: lane(target) }),
    );
    await attempt('raise the limits (SetPolicy signed by the lane key)', target, () => ownerCall(w, target, 'SetPolicy', full, { signer: lane(target) }));
    await attempt('raise the limits (SetPolicy sent by the relayer, no signature)', target, () => ownerCall(w, target, 'SetPolicy', full, { signer: loot.relayer.account }));
    await attempt('take ownership (TransferOwnership signed by the lane key)', target, () => ownerCall(w, target, 'TransferOwnership', { newOwner: attacker.address }, { signer: lane(target) }));
    await attempt('take ownership (initialize the account again)', target, () => asRelayer(target.account, agentAccountAbi, 'initialize', [attacker.address, attacker.address]));
    await attempt('upgrade the code (UUPS upgradeToAndCall)', target, () => ({
      address: target.account,
      abi: parseAbi(['function upgradeToAndCall(address newImplementation, bytes data)']),
      functionName: 'upgradeToAndCall',
      args: [attacker.address, '0x'],
    }));
    await attempt('run arbitrary code as the owner (ownerExecute from the relayer)', target, () =>
      asRelayer(target.account, agentAccountAbi, 'ownerExecute', [w.usdc, 0n, encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [attacker.address, USDC(50)] })]),
    );
    await attempt('rotate the lane key to the attacker (lane-signed)', target, () => ownerCall(w, target, 'RotateLane', { newLane: evilLane.address }, { signer: lane(target) }));
    await attempt('swap to an outside address (router permit path from the relayer)', target, () =>
      asRelayer(w.dex.router, swapRouterAbi, 'swapExactInWithPermit', [
        target.account,
        [w.dex.pairs['USDC/WETH']!],
        [w.usdc, w.dex.tokens.WETH!],
        USDC(5),
        0n,
        { deadline: 2n ** 40n, v: 27, r: `0x${'11'.repeat(32)}` as Hex, s: `0x${'22'.repeat(32)}` as Hex },
      ]),
    );
    await attempt('swap through a "pair" the attacker controls (lane)', target, () => asLane(target, 'swap', [w.dex.router, [attacker.address], [w.usdc, w.dex.tokens.WETH!], USDC(5), 0n]));
    // Issue 30: the wrap (value must stay in the account) and the batch (each call checked as if alone).
    await mined(w, w.faucet.sendTransaction({ to: target.account, value: 10n ** 16n }));
    await attempt("wrap the account's ETH into an allowed protocol that is not WETH (the router, lane)", target, () => asLane(target, 'wrapEth', [w.dex.router, 10n ** 16n, false]));
    await attempt('pay an unapproved payee inside a batch (lane)', target, () =>
      asLane(target, 'batch', [[encodeFunctionData({ abi: agentAccountAbi, functionName: 'pay', args: [w.usdc, stranger, USDC(1)] })]]),
    );
    // Unwrapping "the swap's output" (wrapEth amount 0) names no amount: it must go through the WETH the swap paid in.
    await attempt("unwrap a swap's output through an allowed protocol that is not WETH (batch: swap into WETH, then the router, lane)", target, () =>
      asLane(target, 'batch', [
        [
          encodeFunctionData({ abi: agentAccountAbi, functionName: 'swap', args: [w.dex.router, [w.dex.pairs['USDC/WETH']!], [w.usdc, w.dex.tokens.WETH!], USDC(1), 0n] }),
          encodeFunctionData({ abi: agentAccountAbi, functionName: 'wrapEth', args: [w.dex.router, 0n, true] }),
        ],
      ]),
    );
    await attempt('vault withdrawal to an outside address (vault.withdraw from the relayer)', target, () => asRelayer(w.vault, devVaultAbi, 'withdraw', [USDC(5), attacker.address, target.account]));
    await attempt('vault redemption via the earn router with a forged permit', target, () =>
      asRelayer(w.earn.router, earnRouterAbi, 'redeemWithPermit', [
        target.account,
        w.vault,
        1n,
        0n,
        { deadline: 2n ** 40n, v: 27, r: `0x${'11'.repeat(32)}` as Hex, s: `0x${'22'.repeat(32)}` as Hex },
      ]),
    );
    await attempt('borrow to an outside address (Morpho, from the relayer)', target, () => asRelayer(w.lending.morpho, morphoAbi, 'borrow', [market, USDC(1), 0n, target.account, attacker.address]));
    await attempt('withdraw collateral to an outside address (Morpho, from the relayer)', target, () =>
      asRelayer(w.lending.morpho, morphoAbi, 'withdrawCollateral', [market, 1n, target.account, attacker.address]),
    );
    await attempt('borrow via the borrow router with a forged authorization', target, () =>
      asRelayer(w.lending.router!, borrowRouterAbi, 'borrowWithSig', [
        target.account,
        market,
        USDC(1),
        { authorizer: target.account, authorized: w.lending.router!, isAuthorized: true, nonce: 0n, deadline: 2n ** 40n },
        { v: 27, r: `0x${'11'.repeat(32)}` as Hex, s: `0x${'22'.repeat(32)}` as Hex },
      ]),
    );
    await attempt('use a Morpho market with an oracle of the attacker (lane)', target, () => asLane(target, 'borrow', [w.lending.morpho, { ...market, oracle: attacker.address }, USDC(1)]));
    await attempt('move an asset the owner did not allow (vault shares, lane)', target, () => asLane(target, 'pay', [w.vault, target.payee, 1n]));
    await attempt('use a protocol the owner did not allow (another vault, lane)', target, () =>
      asLane(target, 'deposit', [w.earn.vaults[Object.keys(w.earn.vaults).find((k) => w.earn.vaults[k] !== w.vault)!]!, USDC(1), 0n]),
    );
    await attempt('a one-off payment outside the caps (cheque of 50 USD)', target, () =>
      asLane(target, 'issueCheque', [randomNonce(), w.usdc, attacker.address, USDC(50), now + 7200n, now + 86_400n]),
    );
    await attempt('claim a cheque before its unlock', target, () => asRelayer(target.account, agentAccountAbi, 'claimCheque', [chequeId]));
    await attempt('an x402 authorization past the cap (lane)', target, () => asLane(target, 'authorizeX402', [w.usdc, target.payee, USDC(10) + 1n, 0n, now + 3600n, randomNonce()]));
    await attempt('an x402 transfer the account never authorized (relayer)', target, () =>
      asRelayer(w.usdc, usdCoinAbi, 'transferWithAuthorization', [target.account, attacker.address, USDC(5), 0n, now + 3600n, randomNonce(), '0x']),
    );
    await attempt('the relayer key alone calls pay', target, () => asRelayer(target.account, agentAccountAbi, 'pay', [w.usdc, target.payee, USDC(1)]));
    await attempt('the relayer key alone signs a lane call', target, () => laneCall(w, target, 'pay', [w.usdc, target.payee, USDC(1)], loot.relayer.account));
    await attempt('the relayer key alone pulls tokens (transferFrom)', target, () => asRelayer(w.usdc, usdCoinAbi, 'transferFrom', [target.account, attacker.address, USDC(1)]));
    const used = await asLane(target, 'pay', [w.usdc, target.payee, USDC(1)]);
    await mined(w, used);
    await attempt('replay a lane signature already used', target, () => used);
    await attempt("replay the owner's old Resume to cancel its pause", paused, () => oldResume);
    await attempt('cancel the pause (Resume signed by the lane key)', paused, () => ownerCall(w, paused, 'Resume', {}, { signer: lane(paused) }));
    await attempt('pay from the paused agent', paused, () => asLane(paused, 'pay', [w.usdc, paused.payee, USDC(1)]));
    await attempt('vouch an x402 signature on the paused agent', paused, () => asLane(paused, 'authorizeX402', [w.usdc, paused.payee, USDC(1), 0n, now + 3600n, randomNonce()]));

    // Issue 27: above the approval threshold only the owner's ApproveSpend of that exact transfer lets the lane pay, once.
    await attempt("a lane call above the approval threshold without the owner's approval (21 USD, threshold 20)", gated, () => asLane(gated, 'pay', [w.usdc, gated.payee, USDC(21)]));
    await attempt("a one-off payment above the approval threshold without the owner's approval (cheque of 21 USD)", gated, () =>
      asLane(gated, 'issueCheque', [randomNonce(), w.usdc, gated.payee, USDC(21), now + 7200n, now + 86_400n]),
    );
    await attempt('replay an approval already consumed (the approved 30 USD payment again)', gated, () => asLane(gated, 'pay', [w.usdc, gated.payee, USDC(30)]));
    await attempt("replay the owner's signed ApproveSpend", gated, () => approval);
    await attempt('approve a transfer (ApproveSpend signed by the lane key)', gated, () =>
      ownerCall(w, gated, 'ApproveSpend', { operationId: randomNonce(), token: w.usdc, to: gated.payee, amount: USDC(50) }, { signer: lane(gated) }),
    );
    // Issue 26: the account counts swaps per period.
    await attempt('swaps past max_swaps_per_period (a second swap in the period, cap 1)', gated, gatedSwap);

    // Issue 27: approve_new_payees on chain. The database says nothing here: the attacker holds it.
    await attempt("pay a new payee without the owner's approval (any recipient allowed, 1 USD, no threshold)", newPayees, () => asLane(newPayees, 'pay', [w.usdc, attacker.address, USDC(1)]));
    await attempt("a one-off payment to a new payee without the owner's approval (cheque of 1 USD)", newPayees, () =>
      asLane(newPayees, 'issueCheque', [randomNonce(), w.usdc, attacker.address, USDC(1), now + 7200n, now + 86_400n]),
    );
    await attempt("an x402 authorization to a new payee without the owner's approval", newPayees, () =>
      asLane(newPayees, 'authorizeX402', [w.usdc, attacker.address, USDC(1), 0n, now + 3600n, randomNonce()]),
    );
    await attempt("use another payee's new-payee approval (the supplier's 5 USD, paid to the attacker)", newPayees, () => asLane(newPayees, 'pay', [w.usdc, attacker.address, USDC(5)]));
    await attempt("replay the owner's signed new-payee ApproveSpend", newPayees, () => newPayeeApproval);
    await attempt('mark the attacker as paid before (SetPolicy with paidBefore, signed by the lane key)', newPayees, () =>
      ownerCall(w, newPayees, 'SetPolicy', { ...testPolicy(w, [newPayees.payee], { anyRecipient: true, approveNewPayees: true }), paidBefore: [attacker.address] }, { signer: lane(newPayees) }),
    );
    await attempt('turn approve_new_payees off (SetPolicy signed by the lane key)', newPayees, () =>
      ownerCall(w, newPayees, 'SetPolicy', testPolicy(w, [newPayees.payee], { anyRecipient: true }), { signer: lane(newPayees) }),
    );

    // The agent the service made: its lane key came out of the dump.
    await attempt('service agent: over the per-transaction cap with the lane key from the dump', svc, () => asLane(svc, 'pay', [w.usdc, svc.payee, USDC(10) + 1n]));
    await attempt('service agent: pay an unapproved payee', svc, () => asLane(svc, 'pay', [w.usdc, attacker.address, USDC(1)]));
    await attempt('service agent: raise the limits (SetPolicy signed by the lane key from the dump)', svc, () => ownerCall(w, svc, 'SetPolicy', full, { signer: lane(svc) }));
    await attempt('service agent: the relayer key from the dump calls pay', svc, () => asRelayer(svc.account, agentAccountAbi, 'pay', [w.usdc, svc.payee, USDC(1)]));

    for (const [i, o] of outcomes.entries()) process.stdout.write(`attack ${String(i + 1).padStart(2)}  ${o.refused ? 'FAILED as it must' : 'NOT STOPPED'}  ${o.name}: ${o.detail}\n`);
    for (const [i, a] of agents.entries()) {
      const al = await allowanceOf(w, a);
      const isPaused = await w.client.readContract({ address: a.account, abi: agentAccountAbi, functionName: 'paused' });
      process.stdout.write(
        `agent ${i + 1} ${a.account}  exposure ${usd(al.exposureUsd)} (period remaining ${usd(al.periodRemainingUsd)}, lifetime remaining ${usd(al.lifetimeRemainingUsd)}, per tx ${usd(al.perTxUsd)}${isPaused ? ', paused' : ''}) to its approved payees\n`,
      );
    }
    {
      // Printed apart from the four agents above (their lines are the drill's exposure report since issue 24).
      const al = await allowanceOf(w, gated);
      process.stdout.write(
        `approval-gated agent ${gated.account}  exposure ${usd(al.exposureUsd)} (period remaining ${usd(al.periodRemainingUsd)}), each transfer above 20 USD only with the owner's ApproveSpend, 1 swap a day\n`,
      );
      const np = await allowanceOf(w, newPayees);
      process.stdout.write(
        `new-payee-gated agent ${newPayees.account}  exposure ${usd(np.exposureUsd)} (period remaining ${usd(np.periodRemainingUsd)}), to addresses it paid before or with the owner's ApproveSpend of the first transfer\n`,
      );
    }
    const stopped = outcomes.filter((o) => !o.refused).length;
    process.stdout.write(
      `${outcomes.length} attacks, ${outcomes.length - stopped} failed, ${stopped} not stopped (service and bootstrap ${((booted - started) / 1000).toFixed(1)} s, drill ${((Date.now() - booted) / 1000).toFixed(1)} s)\n`,
    );
    return stopped === 0 ? 0 : 1;
  } finally {
    await stop();
  }
}

process.exitCode = await main().catch((err: unknown) => {
  process.stderr.write(`drill could not run: ${err instanceof Error ? ((err as { shortMessage?: string }).shortMessage ?? err.message.split('\n')[0]) : String(err)}\n`);
  return 2;
});
