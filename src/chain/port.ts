// The settlement port (issue 11): what the ledger needs from a chain. Two adapters: `simulated` (the embedded
// default and sandbox: hashes of the operation id, blocks from the clock) and `evm` (viem against CHAIN_RPC_URL).
// Ledger holds, policy, idempotency, events and every route stay above this port.
import type { Db, Knex } from '../db/knex.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import type { Dex } from './dex.js';
import type { LendingVenue } from './lending.js';
import type { EarnVenue } from './vaults.js';
import type { Address, Hex } from './hex.js';
import type { AccountState } from './accounts.js';
import type { CustodyContracts } from './custody.js';

export type { Address, Hex } from './hex.js';

/** What `include=onchain` shows (nulls before submission; the simulated chain fills what it can). */
export interface OnchainView {
  chain_id: number;
  wallet_address: string | null;
  from: string | null;
  to: string | null;
  to_address: string | null;
  token_address: string | null;
  tx_hash: string | null;
  block_number: number | null;
  block_hash: string | null;
  log_index: number | null;
  gas_used: string | null;
  effective_gas_price: string | null;
  /** Agent accounts (issue 24): the contract the lane call went through (the account), and the transaction's sender. */
  agent_wrapper_address?: string | null;
  agent_sender_address?: string | null;
}

/** The state of a submitted transfer on the chain. */
export type TrackResult =
  | { state: 'pending' }
  /** Mined with receipt status 1 and CHAIN_CONFIRMATIONS confirmations; `feeUnits` = gas paid by the wallet (ETH). */
  | { state: 'confirmed'; txHash: string; feeUnits: bigint; details: Record<string, unknown> }
  | { state: 'failed'; code: string; message: string; txHash: string | null; feeUnits: bigint };

export type SubmitResult = { ok: true; txHash: string; recheckAt: Date } | { ok: false; code: string; message: string };

/** The asset facts the adapters need (a row of `assets`). */
export interface ChainAsset {
  symbol: string;
  decimals: number;
  contract_address: string | null;
  eip712_name: string | null;
  eip712_version: string | null;
}

/** The node did not answer (connection refused, timeout): the caller leaves its work for a later pass. */
export class ChainUnavailableError extends Error {
  constructor(override readonly cause: unknown) {
    super(`chain node unavailable: ${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`);
  }
}

export interface BlockRef {
  number: bigint;
  hash: Hex;
  parentHash: Hex;
  timestamp: bigint;
}

/** A token `Transfer` log (deposits, reconcile). */
export interface TransferLog {
  token: Address;
  from: Address;
  to: Address;
  value: bigint;
  txHash: Hex;
  logIndex: number;
  blockNumber: bigint;
  blockHash: Hex;
}

/** A plain ETH transfer found in a block (deposits). */
export interface NativeTransfer {
  from: Address;
  to: Address;
  value: bigint;
  txHash: Hex;
  blockNumber: bigint;
  blockHash: Hex;
}

/** ETH moved by a contract call inside a transaction (not the transaction's own value): the `index`-th such transfer of the transaction. */
export interface InternalTransfer extends NativeTransfer {
  index: number;
}

export interface ChainHealth {
  mode: 'simulated' | 'evm';
  chain_id: number;
  state: 'ok' | 'unreachable';
  head_block: number | null;
  error?: string;
}

/** An agent account wallet as the custody port needs it (a `wallets` row with custody 'account'). */
export interface AccountWallet {
  agentId: string;
  /** The AgentAccount. */
  address: Address;
  /** The lane key, sealed. */
  sealedLaneKey: string;
}

/** Agent accounts (evm mode, issue 24): deployment, the account's reads, owner actions and lane checks. */
export interface CustodyPort {
  /** The factory and USD feeds on this chain, or null before they are deployed (new wallets stay keys the server holds). */
  contracts(db: Db): Promise<CustodyContracts | null>;
  state(account: Address): Promise<AccountState>;
  /** Whether `address` has code on this chain (an asset seeded with another chain's address has none here). */
  hasCode(address: Address): Promise<boolean>;
  /** The owner's next nonce under `key` (NoncesKeyed; key 0 sequential, another key answers key << 64 | its sequence). */
  ownerNonce(account: Address, owner: Address, key?: bigint): Promise<bigint>;
  /** The account's trustedUnlockAt(destination): 0 when not trusted. */
  readTrusted(account: Address, destination: Address): Promise<bigint>;
  /** The account's isPayee(address): whether its current policy lists `address` as a payee. */
  readPayee(account: Address, address: Address): Promise<boolean>;
  /** The account's paidBefore(address): whether a lane transfer went there (or the owner listed it), so it is no new payee. */
  readPaidBefore(account: Address, address: Address): Promise<boolean>;
  /** Deploys the account through the factory (the relayer pays) unless it has code; waits for the receipt. */
  ensureDeployed(db: Knex, account: { address: Address; owner: Address; firstLane: Address; salt: Hex }): Promise<void>;
  /** eth_call, then the relayer sends `data` to `to` and waits for the receipt: an owner's signed action, a cheque claim. */
  sendNow(db: Knex, to: Address, data: Hex, kind: 'owner' | 'claim' | 'lane', gas?: bigint): Promise<{ ok: true; txHash: Hex } | { ok: false; code: string; message: string; txHash: Hex | null }>;
  /**
   * A lane call (`inner`, a lane function's calldata) signed by the wallet's lane key, sent at once by the relayer:
   * eth_call first (a refusal has txHash null, nothing was sent), then sent and waited for like `sendNow`.
   */
  sendLaneNow(db: Knex, wallet: AccountWallet, inner: Hex, gas?: bigint): Promise<{ ok: true; txHash: Hex } | { ok: false; code: string; message: string; txHash: Hex | null }>;
  /**
   * The ERC-1271 signer of the passkey whose P-256 key is (qx, qy) (contracts/PasskeyOwner.sol, issue 27): its
   * CREATE2 address, deployed first through the factory when `deploy` (the relayer pays; idempotent). Throws when
   * this chain has no passkey signer factory.
   */
  passkeySigner(db: Knex, key: { qx: Hex; qy: Hex }, deploy: boolean): Promise<Address>;
  /** The eth_call of a lane call signed by the wallet's lane key: null when it would pass, else the refusal. */
  checkLane(wallet: AccountWallet, inner: Hex): Promise<{ code: string; message: string } | null>;
}

export interface Chain {
  readonly mode: 'simulated' | 'evm';
  /** The chain id (evm: read from the node at start, or CHAIN_ID). */
  readonly chainId: number;
  /** The conversion venue on this chain (Uniswap v2 pairs of the development bootstrap); null on the simulated chain. */
  readonly dex: Dex | null;
  /** The ERC-4626 vaults on this chain (development bootstrap); null on the simulated chain. */
  readonly earn: EarnVenue | null;
  /** The Morpho Blue market on this chain (development bootstrap); null on the simulated chain. */
  readonly lending: LendingVenue | null;
  /** Agent accounts (evm mode); null on the simulated chain. */
  readonly custody: CustodyPort | null;

  // --- outbound settlement (the operation service's settlement loop) ---
  /** Whether this operation's money moves on this chain (else the simulated chain and the type's settler settle it). */
  settlesOnChain(op: Pick<OperationRow, 'type' | 'details'>, asset: ChainAsset | null): boolean;
  /** The extra hold an outgoing transfer of `asset` needs beside its amount (ETH: the gas reserve); 0n if none. */
  gasReserve(asset: ChainAsset): bigint;
  /**
   * accepted -> submitted, inside the caller's transaction: evm signs the transfer and records the raw transaction
   * (broadcast happens after commit, by `pump`). Returns the tx hash and when to look at the operation again.
   */
  submit(trx: Knex.Transaction, op: OperationRow): Promise<SubmitResult>;
  /** A submitted operation: mined, confirmed, reverted, timed out? Simulated: confirmed once due. */
  track(trx: Knex.Transaction, op: OperationRow): Promise<TrackResult>;
  /** Broadcasts recorded transactions not yet sent and rebroadcasts (fee-bumped) stale ones; returns how many. */
  pump(db: Knex): Promise<number>;
  /** The on-chain view of an operation. */
  onchain(db: Db, op: OperationRow, walletAddress: string | null): Promise<OnchainView>;

  // --- reads (deposits, x402, reconcile) ---
  health(): Promise<ChainHealth>;
  /** The head block (evm); null on the simulated chain. */
  head(): Promise<BlockRef | null>;
  block(number: bigint): Promise<BlockRef | null>;
  /** Balance of `address` in `asset` (native when the asset has no contract address). */
  balanceOf(address: Address, asset: ChainAsset): Promise<bigint>;
  /** Token `Transfer` logs of `tokens` in [fromBlock, toBlock]. */
  transferLogs(tokens: Address[], fromBlock: bigint, toBlock: bigint): Promise<TransferLog[]>;
  /** Plain ETH transfers (value > 0, to an EOA) in one block. */
  nativeTransfers(blockNumber: bigint): Promise<NativeTransfer[]>;
  /** ETH moved by internal calls (CALL with value, CREATE, SELFDESTRUCT) of one block's successful frames; null when the node has no traces. */
  internalTransfers(block: { number: bigint; hash: Hex }): Promise<InternalTransfer[] | null>;
  /** Whether an EIP-3009 authorization (`authorizer`, `nonce`) was used on `token`. */
  authorizationUsed(token: Address, authorizer: Address, nonce: Hex): Promise<boolean>;
  /**
   * The block whose `AuthorizationUsed(authorizer, nonce)` log on `token` shows the authorization used, searched in
   * [fromBlock, toBlock]; null when no such log is there (x402 finality counts confirmations from it).
   */
  authorizationUsedAt(token: Address, authorizer: Address, nonce: Hex, fromBlock: bigint, toBlock: bigint): Promise<bigint | null>;
  /**
   * An `eth_call` of `token.transfer(to, amount)` from `from` at the head (simulate `depth: onchain`): null when it
   * would succeed, else the revert reason. Throws ChainUnavailableError when the node does not answer.
   */
  callTransfer(token: Address, from: Address, to: Address, amount: bigint): Promise<string | null>;
}
