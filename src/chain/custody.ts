// Agent accounts whose limits hold on chain (issue 24, docs/CUSTODY.md): the factory and the USD price feeds the
// development bootstrap deploys, and the EIP-712 messages of contracts/AgentAccount.sol, the owner's actions (which
// the owner's signer signs) and the lane call (which the lane key signs, the relayer submits). Pure data and viem
// calls: no database writes, no keys held here.
import { viem } from '../lib/viem.js';
import type { Account, Chain as ViemChain, PublicClient, Transport, WalletClient } from 'viem';
import { agentAccountAbi } from '../../contracts/artifacts/AgentAccount.js';
import { agentAccountFactoryAbi, agentAccountFactoryBytecode } from '../../contracts/artifacts/AgentAccountFactory.js';
import { devPriceFeedAbi, devPriceFeedBytecode } from '../../contracts/artifacts/DevPriceFeed.js';
import { passkeyOwnerFactoryAbi, passkeyOwnerFactoryBytecode } from '../../contracts/artifacts/PasskeyOwnerFactory.js';
import type { Db } from '../db/knex.js';
import { findSetting } from '../db/repositories/chain.repository.js';
import type { Address, Hex } from './hex.js';
import { deployContract, waitMined } from './token.js';

export { agentAccountAbi, agentAccountFactoryAbi, devPriceFeedAbi, passkeyOwnerFactoryAbi };

/** The chain_settings key holding the deployed custody contracts (JSON). */
export const CUSTODY_SETTING = 'custody';

export interface CustodyContracts {
  /** contracts/AgentAccountFactory.sol: creates each agent's account (an ERC-1167 clone) at a CREATE2 address. */
  factory: Address;
  /** The AgentAccount every clone delegates to. */
  implementation: Address;
  /** USD price feed (AggregatorV3Interface, 8 decimals) by asset symbol; ETH and WETH share one. */
  feeds: Record<string, Address>;
  /** Who may update the development feeds: the faucet (never a key the server holds). */
  feedUpdater: Address;
  /**
   * contracts/PasskeyOwner.sol's factory (issue 27): each owner passkey's ERC-1271 signer at a CREATE2 address of its
   * P-256 key. Absent on a chain recorded before it (the development bootstrap adds it).
   */
  passkeyOwnerFactory?: Address;
}

/** The development feeds' answers (USD, 8 decimals): the ledger's seeded prices and the dev pools' seed prices. */
export const DEV_FEED_PRICES: readonly { symbol: string; description: string; answer: bigint }[] = [
  { symbol: 'USDC', description: 'USDC / USD', answer: 100_000_000n },
  { symbol: 'EURC', description: 'EURC / USD', answer: 108_000_000n },
  { symbol: 'ETH', description: 'ETH / USD', answer: 300_000_000_000n },
  { symbol: 'CBBTC', description: 'CBBTC / USD', answer: 6_000_000_000_000n },
];

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/** Development chain only: the price feeds (updater: `wallet`, the faucet) and the account factory. */
export async function deployDevCustody(wallet: Wallet, client: PublicClient): Promise<CustodyContracts> {
  const opts = { account: wallet.account, chain: wallet.chain };
  const feeds: Record<string, Address> = {};
  for (const f of DEV_FEED_PRICES) feeds[f.symbol] = await deployContract(wallet, client, { abi: devPriceFeedAbi, bytecode: devPriceFeedBytecode, args: [8, f.description, f.answer], ...opts });
  feeds.WETH = feeds.ETH!;
  const factory = await deployContract(wallet, client, { abi: agentAccountFactoryAbi, bytecode: agentAccountFactoryBytecode, ...opts });
  const implementation = await client.readContract({ address: factory, abi: agentAccountFactoryAbi, functionName: 'implementation' });
  return { factory, implementation: viem().getAddress(implementation), feeds, feedUpdater: wallet.account.address, passkeyOwnerFactory: await deployPasskeyOwnerFactory(wallet, client) };
}

/** The passkey signers' factory (contracts/PasskeyOwner.sol), deployed from `wallet`. */
export function deployPasskeyOwnerFactory(wallet: Wallet, client: PublicClient): Promise<Address> {
  return deployContract(wallet, client, { abi: passkeyOwnerFactoryAbi, bytecode: passkeyOwnerFactoryBytecode, account: wallet.account, chain: wallet.chain });
}

/** Development chain only: a new answer for a feed (the faucet signs). */
export async function setDevPrice(wallet: Wallet, client: PublicClient, feed: Address, answerE8: bigint): Promise<void> {
  await waitMined(client, wallet.writeContract({ address: feed, abi: devPriceFeedAbi, functionName: 'setPrice', args: [answerE8], account: wallet.account, chain: wallet.chain }));
}

/** The custody contracts recorded for this chain, or null before the bootstrap (or on a chain configured without them). */
export async function findCustodyContracts(db: Db, chainId: number): Promise<CustodyContracts | null> {
  const raw = await findSetting(db, chainId, CUSTODY_SETTING);
  return raw ? (JSON.parse(raw) as CustodyContracts) : null;
}

// ---------------------------------------------------------------- the policy

/** "No cap" for a USD cap (8 decimals) and for transactions per period. */
export const NO_USD_CAP = 2n ** 256n - 1n;
export const NO_TX_CAP = 2 ** 32 - 1;
/** Limits.period: UTC calendar periods, as src/services/ledger/policy.ts counts them. */
export const PERIOD_CODE = { day: 1, week: 2, month: 3 } as const;

/** AgentAccount.Limits. */
export interface OnchainLimits {
  perTxUsd: bigint;
  perPeriodUsd: bigint;
  lifetimeUsd: bigint;
  maxTxsPerPeriod: number;
  cooldownBlocks: number;
  period: number;
  maxSlippageBps: number;
  maxLtvBps: number;
  failOnZeroPrice: boolean;
  anyRecipient: boolean;
  minChequeDelay: number;
  /** A payment, cheque or x402 authorization above this (USD, 8 decimals) needs the owner's ApproveSpend (NO_USD_CAP: none). */
  approvalThresholdUsd: bigint;
  /** Swaps per period (NO_TX_CAP: no cap). */
  maxSwapsPerPeriod: number;
  /** The first transfer to an address the account never paid (`paidBefore`) needs the owner's ApproveSpend (approve_new_payees). */
  approveNewPayees: boolean;
}

/** AgentAccount.AssetRule: `token` address(0) is the native coin. */
export interface AssetRule {
  token: Address;
  feed: Address;
  maxPriceAge: number;
}

export interface OnchainPolicy {
  limits: OnchainLimits;
  assets: AssetRule[];
  /** Routers, vaults and Morpho contracts the lane may call. */
  protocols: Address[];
  /** Morpho market ids the lane may use. */
  markets: Hex[];
  /** Recurring recipients the lane may pay any time. */
  payees: Address[];
  /**
   * Addresses the account counts as paid before from now on (its `paidBefore`): the database's earlier payees, signed
   * by the owner with the policy but not part of `policyHash` (it only adds to the account's history).
   */
  paidBefore: Address[];
}

/** The EIP-712 domain of an agent account. */
export const accountDomain = (chainId: number, account: Address) => ({ name: 'AgentAccount', version: '1', chainId, verifyingContract: account }) as const;

const LIMITS_TYPE = [
  { name: 'perTxUsd', type: 'uint256' },
  { name: 'perPeriodUsd', type: 'uint256' },
  { name: 'lifetimeUsd', type: 'uint256' },
  { name: 'maxTxsPerPeriod', type: 'uint32' },
  { name: 'cooldownBlocks', type: 'uint32' },
  { name: 'period', type: 'uint8' },
  { name: 'maxSlippageBps', type: 'uint16' },
  { name: 'maxLtvBps', type: 'uint16' },
  { name: 'failOnZeroPrice', type: 'bool' },
  { name: 'anyRecipient', type: 'bool' },
  { name: 'minChequeDelay', type: 'uint32' },
  { name: 'approvalThresholdUsd', type: 'uint256' },
  { name: 'maxSwapsPerPeriod', type: 'uint32' },
  { name: 'approveNewPayees', type: 'bool' },
] as const;
const AUTH = [
  { name: 'nonce', type: 'uint256' },
  { name: 'deadline', type: 'uint256' },
] as const;

/** The EIP-712 types of every owner action, by primary type (each with the types it references). */
export const OWNER_ACTION_TYPES = {
  SetPolicy: {
    SetPolicy: [
      { name: 'limits', type: 'Limits' },
      { name: 'assets', type: 'AssetRule[]' },
      { name: 'protocols', type: 'address[]' },
      { name: 'markets', type: 'bytes32[]' },
      { name: 'payees', type: 'address[]' },
      { name: 'paidBefore', type: 'address[]' },
      ...AUTH,
    ],
    Limits: LIMITS_TYPE,
    AssetRule: [
      { name: 'token', type: 'address' },
      { name: 'feed', type: 'address' },
      { name: 'maxPriceAge', type: 'uint32' },
    ],
  },
  AddTrustedDestination: { AddTrustedDestination: [{ name: 'destination', type: 'address' }, { name: 'unlockAt', type: 'uint64' }, ...AUTH] },
  RemoveTrustedDestination: { RemoveTrustedDestination: [{ name: 'destination', type: 'address' }, ...AUTH] },
  CancelCheque: { CancelCheque: [{ name: 'id', type: 'bytes32' }, ...AUTH] },
  Pause: { Pause: [...AUTH] },
  Resume: { Resume: [...AUTH] },
  RotateLane: { RotateLane: [{ name: 'newLane', type: 'address' }, ...AUTH] },
  ApproveSpend: {
    ApproveSpend: [{ name: 'operationId', type: 'bytes32' }, { name: 'token', type: 'address' }, { name: 'to', type: 'address' }, { name: 'amount', type: 'uint256' }, ...AUTH],
  },
  TransferOwnership: { TransferOwnership: [{ name: 'newOwner', type: 'address' }, ...AUTH] },
} as const;

export type OwnerAction = keyof typeof OWNER_ACTION_TYPES;

/** The message fields of each owner action (besides nonce and deadline). */
export interface OwnerActionFields {
  SetPolicy: OnchainPolicy;
  AddTrustedDestination: { destination: Address; unlockAt: bigint };
  RemoveTrustedDestination: { destination: Address };
  CancelCheque: { id: Hex };
  Pause: Record<string, never>;
  Resume: Record<string, never>;
  RotateLane: { newLane: Address };
  ApproveSpend: { operationId: Hex; token: Address; to: Address; amount: bigint };
  TransferOwnership: { newOwner: Address };
}

/**
 * The typed data an owner's wallet signs for `action` on `account` (viem's signTypedData / eth_signTypedData_v4).
 * `nonce` is the account's keyed nonce (`nonces(owner, key)`, key 0 = sequential), `deadline` unix seconds.
 */
export function ownerTypedData<A extends OwnerAction>(action: A, fields: OwnerActionFields[A], auth: { chainId: number; account: Address; nonce: bigint; deadline: bigint }) {
  return {
    domain: accountDomain(auth.chainId, auth.account),
    types: OWNER_ACTION_TYPES[action],
    primaryType: action,
    message: { ...fields, nonce: auth.nonce, deadline: auth.deadline },
  } as const;
}

/** The arguments of the account function that carries `action`, with the owner's signature (OwnerAuth last). */
export function ownerCallArgs<A extends OwnerAction>(action: A, fields: OwnerActionFields[A], auth: { nonce: bigint; deadline: bigint; signature: Hex }) {
  const ownerAuth = { nonce: auth.nonce, deadline: auth.deadline, signature: auth.signature };
  const f = fields as Record<string, unknown>;
  switch (action) {
    case 'SetPolicy': {
      const p = fields as OnchainPolicy;
      return { functionName: 'setPolicy', args: [p.limits, p.assets, p.protocols, p.markets, p.payees, p.paidBefore, ownerAuth] } as const;
    }
    case 'AddTrustedDestination':
      return { functionName: 'addTrustedDestination', args: [f.destination, f.unlockAt, ownerAuth] } as const;
    case 'RemoveTrustedDestination':
      return { functionName: 'removeTrustedDestination', args: [f.destination, ownerAuth] } as const;
    case 'CancelCheque':
      return { functionName: 'cancelCheque', args: [f.id, ownerAuth] } as const;
    case 'Pause':
      return { functionName: 'pause', args: [ownerAuth] } as const;
    case 'Resume':
      return { functionName: 'resume', args: [ownerAuth] } as const;
    case 'RotateLane':
      return { functionName: 'rotateLane', args: [f.newLane, ownerAuth] } as const;
    case 'ApproveSpend':
      return { functionName: 'approveSpend', args: [f.operationId, f.token, f.to, f.amount, ownerAuth] } as const;
    default:
      return { functionName: 'transferOwnership', args: [f.newOwner, ownerAuth] } as const;
  }
}

/** The typed data the lane key signs so that anyone (the relayer) may submit `data` (a lane function's calldata). */
export function laneCallTypedData(auth: { chainId: number; account: Address; data: Hex; nonce: Hex; deadline: bigint }) {
  return {
    domain: accountDomain(auth.chainId, auth.account),
    types: {
      LaneCall: [
        { name: 'data', type: 'bytes' },
        { name: 'nonce', type: 'bytes32' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'LaneCall',
    message: { data: auth.data, nonce: auth.nonce, deadline: auth.deadline },
  } as const;
}

/** A Morpho market's params as the account takes them (MorphoMarket), from the lending settings' string lltv. */
export const morphoMarket = (p: { loanToken: Address; collateralToken: Address; oracle: Address; irm: Address; lltv: string | bigint }) => ({
  loanToken: p.loanToken,
  collateralToken: p.collateralToken,
  oracle: p.oracle,
  irm: p.irm,
  lltv: BigInt(p.lltv),
});
