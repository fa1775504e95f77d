// A development chain with agent accounts (issue 24), for the contract tests and `npm run drill`: Anvil with the
// dev bootstrap's contracts (token, Uniswap v2 pairs and router, ERC-4626 vaults, Morpho Blue and its market, the
// account factory and the faucet-updated USD feeds), and helpers that act as each party: the owner (signs EIP-712
// owner actions; its key stays here), the lane key (signs lane calls) and the relayer (submits and pays the gas).
import { randomBytes } from 'node:crypto';
import { createWalletClient, decodeErrorResult, encodeFunctionData, http, type Abi, type PublicClient, type WalletClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import {
  agentAccountAbi,
  agentAccountFactoryAbi,
  deployDevCustody,
  devPriceFeedAbi,
  laneCallTypedData,
  morphoMarket,
  NO_TX_CAP,
  NO_USD_CAP,
  ownerCallArgs,
  ownerTypedData,
  PERIOD_CODE,
  type CustodyContracts,
  type OnchainLimits,
  type OnchainPolicy,
  type OwnerAction,
  type OwnerActionFields,
} from '../../src/chain/custody.js';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import { deployDevDex, swapRouterAbi, type DexContracts } from '../../src/chain/dex.js';
import { deployDevLending, morphoAbi, type LendingContracts } from '../../src/chain/lending.js';
import { deployDevVaults, DEV_VAULTS, type EarnContracts } from '../../src/chain/vaults.js';
import { deployToken, mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';

export const USD = (dollars: number | bigint) => BigInt(dollars) * 100_000_000n;
export const USDC = (units: number | bigint) => BigInt(units) * 1_000_000n;
const FAR = 2n ** 40n;

type Wallet = WalletClient<ReturnType<typeof http>, typeof foundry, PrivateKeyAccount>;

export interface World {
  node: AnvilNode;
  client: PublicClient;
  chainId: number;
  faucet: Wallet;
  /** The relayer: pays the gas of everything the server submits (a key the server holds). */
  relayer: Wallet;
  usdc: Address;
  dex: DexContracts;
  earn: EarnContracts;
  /** An ERC-4626 vault over USDC. */
  vault: Address;
  lending: LendingContracts;
  custody: CustodyContracts;
  stop(): Promise<void>;
}

export interface Agent {
  account: Address;
  /** The owner's signer (kept by the owner; never given to the server). */
  owner: PrivateKeyAccount;
  /** The lane key (the server holds it). */
  lane: PrivateKeyAccount;
  /** A recurring recipient the owner approved. */
  payee: Address;
}

const wallet = (rpcUrl: string, key: Hex): Wallet => createWalletClient({ account: privateKeyToAccount(key), chain: foundry, transport: http(rpcUrl) });

/** Boots Anvil and deploys what the development bootstrap deploys (without the database). */
export async function buildWorld(): Promise<World> {
  const node = await startAnvil();
  const client = node.client;
  const faucet = wallet(node.rpcUrl, ANVIL_DEV_KEYS[0]!);
  const relayerKey = ANVIL_DEV_KEYS[1]!;
  const relayer = privateKeyToAccount(relayerKey).address;
  const usdc = await deployToken(faucet, client);
  const dex = await deployDevDex(faucet, client, usdc, relayer);
  const earn = await deployDevVaults(faucet, client, dex.tokens, relayer);
  const lending = await deployDevLending(faucet, client, dex.tokens, relayer);
  const custody = await deployDevCustody(faucet, client);
  return worldOf(node, { usdc, dex, earn, lending, custody }, relayerKey);
}

/** The world on `node` with contracts already deployed (by the server's bootstrap), acting as relayer with `relayerKey`. */
export function worldOf(node: AnvilNode, c: { usdc: Address; dex: DexContracts; earn: EarnContracts; lending: LendingContracts; custody: CustodyContracts }, relayerKey: Hex): World {
  const vault = c.earn.vaults[DEV_VAULTS.find((v) => v.asset === 'USDC')!.vaultId]!;
  return { node, client: node.client, chainId: 31337, faucet: wallet(node.rpcUrl, ANVIL_DEV_KEYS[0]!), relayer: wallet(node.rpcUrl, relayerKey), ...c, vault, stop: () => node.stop() };
}

/** The test policy: 10 USD per transaction, 30 USD per day, 1000 USD lifetime, USDC/WETH/EURC/ETH, the dev venues. */
export function testPolicy(w: World, payees: Address[], limits: Partial<OnchainLimits> = {}): OnchainPolicy {
  return {
    limits: {
      perTxUsd: USD(10),
      perPeriodUsd: USD(30),
      lifetimeUsd: USD(1000),
      maxTxsPerPeriod: NO_TX_CAP,
      cooldownBlocks: 0,
      period: PERIOD_CODE.day,
      maxSlippageBps: 200,
      maxLtvBps: 5000,
      failOnZeroPrice: true,
      anyRecipient: false,
      minChequeDelay: 3600,
      approvalThresholdUsd: NO_USD_CAP,
      maxSwapsPerPeriod: NO_TX_CAP,
      approveNewPayees: false,
      ...limits,
    },
    assets: [
      { token: w.usdc, feed: w.custody.feeds.USDC!, maxPriceAge: 0 },
      { token: w.dex.tokens.WETH!, feed: w.custody.feeds.WETH!, maxPriceAge: 0 },
      { token: w.dex.tokens.EURC!, feed: w.custody.feeds.EURC!, maxPriceAge: 0 },
      { token: '0x0000000000000000000000000000000000000000', feed: w.custody.feeds.ETH!, maxPriceAge: 0 },
    ],
    protocols: [w.dex.router, w.vault, w.lending.morpho],
    markets: [w.lending.market.id],
    payees,
    paidBefore: [],
  };
}

/**
 * A new agent: owner and lane keys generated, the account created by the factory (submitted by the relayer), the
 * owner's policy set by its signature (relayed), and `fundUsdc` USDC minted into the account.
 */
export async function createAgent(w: World, opts: { fundUsdc?: bigint; limits?: Partial<OnchainLimits> } = {}): Promise<Agent> {
  const owner = privateKeyToAccount(generatePrivateKey());
  const lane = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  const salt = `0x${randomBytes(32).toString('hex')}` as Hex;
  const account = await w.client.readContract({ address: w.custody.factory, abi: agentAccountFactoryAbi, functionName: 'predictAddress', args: [owner.address, lane.address, salt] });
  await mined(w, w.relayer.writeContract({ address: w.custody.factory, abi: agentAccountFactoryAbi, functionName: 'createAccount', args: [owner.address, lane.address, salt] }));
  const agent = { account, owner, lane, payee };
  await mined(w, ownerCall(w, agent, 'SetPolicy', testPolicy(w, [payee], opts.limits)));
  if (opts.fundUsdc) await mintToken(w.faucet, w.client, w.usdc, account, opts.fundUsdc);
  return agent;
}

export const randomNonce = (): Hex => `0x${randomBytes(32).toString('hex')}`;

export interface Call {
  address: Address;
  abi: Abi;
  functionName: string;
  args: readonly unknown[];
}

/** A lane function call, signed by `signer` (the lane key unless an attack says otherwise), for the relayer to submit. */
export async function laneCall(w: World, agent: Agent, functionName: string, args: readonly unknown[], signer: PrivateKeyAccount = agent.lane): Promise<Call> {
  const data = encodeFunctionData({ abi: agentAccountAbi, functionName, args } as never);
  const nonce = randomNonce();
  const signature = await signer.signTypedData(laneCallTypedData({ chainId: w.chainId, account: agent.account, data, nonce, deadline: FAR }));
  return { address: agent.account, abi: agentAccountAbi, functionName: 'relayLane', args: [data, nonce, FAR, signature] };
}

/** An owner action signed by `signer` (the owner unless an attack says otherwise), at the owner's next nonce unless given. */
export async function ownerCall<A extends OwnerAction>(w: World, agent: Agent, action: A, fields: OwnerActionFields[A], opts: { signer?: PrivateKeyAccount; nonce?: bigint } = {}): Promise<Call> {
  const nonce = opts.nonce ?? (await w.client.readContract({ address: agent.account, abi: agentAccountAbi, functionName: 'nonces', args: [agent.owner.address] }));
  const signature = await (opts.signer ?? agent.owner).signTypedData(ownerTypedData(action, fields, { chainId: w.chainId, account: agent.account, nonce, deadline: FAR }) as never);
  return { address: agent.account, abi: agentAccountAbi, ...ownerCallArgs(action, fields, { nonce, deadline: FAR, signature }) };
}

/** Submits `call` from `from` (the relayer by default), waits for it to succeed and returns its receipt. */
export async function mined(w: World, call: Call | Promise<Call> | Promise<Hex>, from: Wallet = w.relayer) {
  const c = await call;
  // A fixed gas limit, as reverted() sends: an estimate made on one state and spent on the next (another process's
  // transaction mined in between, as under a loaded suite) can fall short and revert out of gas.
  const hash = typeof c === 'string' ? c : await from.writeContract({ ...c, gas: 5_000_000n, chain: foundry, account: from.account } as never);
  const receipt = await w.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  if (receipt.status !== 'success') {
    // The reason, from the same call replayed on the state it ran on (the block before its own).
    const tx = await w.client.getTransaction({ hash });
    const call = typeof c === 'string' ? null : c.functionName;
    const reason = await w.client.call({ account: tx.from, to: tx.to!, data: tx.input, value: tx.value, blockNumber: receipt.blockNumber - 1n }).then(
      () => 'no revert on replay',
      (err: unknown) => revertName(err),
    );
    throw new Error(`transaction ${hash}${call ? ` (${call})` : ''} reverted (gas used ${receipt.gasUsed} of ${tx.gas}): ${reason}`);
  }
  return receipt;
}

/**
 * Submits `call` as a real transaction with a fixed gas limit (no estimate that would stop it before the chain),
 * expects it mined and reverted, and returns the custom error the chain gives (from an eth_call of the same call).
 */
export async function reverted(w: World, call: Call | Promise<Call>, from: Wallet = w.relayer): Promise<string> {
  const c = await call;
  const data = encodeFunctionData({ abi: c.abi, functionName: c.functionName, args: c.args } as never);
  let reason: string;
  try {
    await w.client.call({ account: from.account.address, to: c.address, data });
    reason = 'did not revert';
  } catch (err) {
    reason = revertName(err);
  }
  const hash = await from.sendTransaction({ to: c.address, data, gas: 3_000_000n, chain: foundry, account: from.account });
  const receipt = await w.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  if (receipt.status !== 'reverted') throw new Error(`expected ${c.functionName} to revert on chain; it succeeded (${hash})`);
  return reason;
}

const ERROR_ABIS = [agentAccountAbi, usdCoinAbi, morphoAbi, swapRouterAbi, devPriceFeedAbi] as readonly Abi[];

/** The custom error's name (and arguments) in a failed eth_call. */
export function revertName(err: unknown): string {
  let e: unknown = err;
  while (e && typeof e === 'object') {
    const data = (e as { data?: unknown }).data;
    if (typeof data === 'string' && data.startsWith('0x') && data.length >= 10) {
      for (const abi of ERROR_ABIS) {
        try {
          const decoded = decodeErrorResult({ abi, data: data as Hex });
          return decoded.errorName === 'Error' ? `Error: ${String(decoded.args?.[0])}` : decoded.errorName;
        } catch {
          // not this ABI's
        }
      }
      return `error ${data.slice(0, 10)}`;
    }
    e = (e as { cause?: unknown }).cause;
  }
  const message = err instanceof Error ? err.message : String(err);
  const m = /reverted with reason string '([^']*)'|reverted: (.*)/.exec(message);
  return m ? (m[1] ?? m[2]!) : message.split('\n')[0]!;
}

export const erc20BalanceOf = (w: World, token: Address, who: Address) => w.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'balanceOf', args: [who] });

/** The account's remaining allowance, as AgentAccount.allowance() reports it. */
export const allowanceOf = (w: World, agent: Agent) => w.client.readContract({ address: agent.account, abi: agentAccountAbi, functionName: 'allowance' });

/** The chain's latest block timestamp. */
export async function chainNow(w: World): Promise<bigint> {
  return (await w.client.getBlock()).timestamp;
}

/** Moves the chain's clock forward and mines a block. */
export async function advance(w: World, seconds: number): Promise<void> {
  await w.node.rpc('evm_increaseTime', [seconds]);
  await w.node.mine(1);
}

export const devMarket = (w: World) => morphoMarket(w.lending.market.params);
