// The evm adapter (CHAIN_RPC_URL set): payments and crypto withdrawals of ETH and EIP-3009 tokens settle on a real
// node through viem. USDC moves by `transferWithAuthorization` signed by the wallet and submitted (gas paid) by the
// relayer; ETH by a plain transaction from the wallet. Every transaction is signed inside the settlement transaction
// with a nonce allocated in Postgres and recorded (raw bytes + hash) before `pump` broadcasts it after commit; after
// a crash the same bytes are rebroadcast. A stale transaction is re-signed with bumped fees at the same nonce; past
// CHAIN_SUBMIT_TIMEOUT_MS a zero-value self-transfer replaces it, and whichever of them is mined decides.
import type { PrivateKeyAccount, PublicClient, TransactionReceipt, TransactionSerializableEIP1559 } from 'viem';
import { viem } from '../lib/viem.js';
import type { ChainConfig } from '../config.js';
import { savepoint, type Db, type Knex } from '../db/knex.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import * as repo from '../db/repositories/chain.repository.js';
import type { ChainTxRow } from '../db/repositories/chain.repository.js';
import { findAsset, type AssetRow } from '../db/repositories/ledger.repository.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/logger.js';
import { openWalletAccount } from '../lib/wallet-keys.js';
import { randomNonce } from '../x402/signing.js';
import { ChainUnavailableError, type AccountWallet, type Address, type Chain, type ChainAsset, type Hex, type OnchainView, type TrackResult } from './port.js';
import { createDex, swapRouterAbi } from './dex.js';
import { borrowRouterAbi, createLendingVenue, marketTuple, morphoAbi, morphoEventsAbi, type MarketParams } from './lending.js';
import { createEarnVenue, devVaultAbi, earnRouterAbi, rewardsDistributorAbi } from './vaults.js';
import { tokenDomain, transferWithAuthorizationTypes, usdCoinAbi } from './token.js';
import { createEvmCustody } from './evm-custody.js';
import { LANE_GAS } from './evm-custody.js';
import { agentAccountAbi, morphoMarket } from './custody.js';

/** Gas of a plain ETH transfer to an account without code. */
export const NATIVE_TRANSFER_GAS = 21_000n;
/** Gas limit of a relayed `transferWithAuthorization` (about 60-80k used; fixed, so a transfer that would revert is still mined and fails visibly). */
export const EIP3009_GAS = 150_000n;
const CHAIN_SETTLED_TYPES = new Set(['payment', 'withdrawal.crypto']);
/** The operation types an agent account's lane carries (issue 24). */
const LANE_TYPES = new Set(['payment', 'withdrawal.crypto', 'one_off_payment.create']);
/** Gas limit of a routed swap with its permit (about 110k per hop + 60k; fixed, so a swap that would revert is still mined and fails visibly). */
export const SWAP_GAS = 400_000n;
/** Gas limit of a vault action through the EarnRouter (a move redeems and deposits: about 200k). */
export const VAULT_GAS = 500_000n;

/** What a conversion executed on chain records in its operation's details (see conversion.service.ts). */
export interface OnchainSwapDetails {
  onchain_route: { router: Address; pairs: Address[]; path: Address[] };
  min_amount_out: string;
}

/** What an earn operation acting on an ERC-4626 vault records in its details (see earn.service.ts). */
export interface OnchainVaultDetails {
  onchain_vault: {
    router: Address;
    action: 'deposit' | 'redeem' | 'move';
    vault: Address;
    /** move: the vault receiving the assets. */
    to_vault?: Address;
    /** deposit: assets; redeem and move: shares of `vault`. */
    amount: string;
    /** deposit and move: the least shares minted; redeem: the least assets paid. */
    minimum: string;
  };
}

/** Gas limit of a rewards claim at the RewardsDistributor (credit + transfer: about 80k). */
export const REWARDS_GAS = 200_000n;

/** What an earn rewards claim paid by the rewards distributor records in its details (see earn.service.ts). */
export interface OnchainRewardsDetails {
  onchain_rewards: {
    distributor: Address;
    /** The reward token the distributor pays. */
    token: Address;
    /** Reward units: the ledger's accrual, credited on chain and paid in the same transaction. */
    amount: string;
  };
}

/** Gas limit of a Morpho Blue action through the BorrowRouter (a first borrow also sets the authorization: about 250k). */
export const LENDING_GAS = 500_000n;

/** What a borrow operation acting on the Morpho Blue market records in its details (see borrow.service.ts). */
export interface OnchainLendingDetails {
  onchain_lending: {
    router: Address;
    morpho: Address;
    market_id: Hex;
    params: MarketParams;
    action: 'supply_collateral' | 'withdraw_collateral' | 'borrow' | 'repay';
    /** Collateral or loan units; repay by shares: 0. */
    assets: string;
    /** repay by shares (repay_all): the borrow shares repaid. */
    shares?: string;
    /** repay: the most loan units the router may pull from the wallet (the rest returns). */
    max_assets?: string;
  };
}

const morphoAuthorizationTypes = {
  Authorization: [
    { name: 'authorizer', type: 'address' },
    { name: 'authorized', type: 'address' },
    { name: 'isAuthorized', type: 'bool' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;

const permitTypes = {
  Permit: [
    { name: 'owner', type: 'address' },
    { name: 'spender', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;
const eip5267Abi = [
  { type: 'function', name: 'eip712Domain', stateMutability: 'view', inputs: [], outputs: [{ name: 'fields', type: 'bytes1' }, { name: 'name', type: 'string' }, { name: 'version', type: 'string' }, { name: 'chainId', type: 'uint256' }, { name: 'verifyingContract', type: 'address' }, { name: 'salt', type: 'bytes32' }, { name: 'extensions', type: 'uint256[]' }] },
  { type: 'function', name: 'nonces', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
] as const;

export interface EvmChainDeps {
  config: ChainConfig;
  chainId: number;
  client: PublicClient;
  relayer: PrivateKeyAccount;
  sealer: Sealer;
  clock: Clock;
  log: Logger;
}

/** A transaction before signing (chain id and type are added by `record`). */
interface UnsignedTx {
  to: Address;
  value: bigint;
  data?: Hex;
  nonce: number;
  gas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

const isNative = (asset: Pick<ChainAsset, 'contract_address'>) => asset.contract_address === null;
const maxOf = (a: bigint, b: bigint) => (a > b ? a : b);
const minOf = (a: bigint, b: bigint) => (a < b ? a : b);

/** Node errors meaning "this transaction (or one at its nonce) is already in the pool or mined": safe to treat as sent. */
const ALREADY_SENT = /already known|known transaction|nonce too low|already imported|replacement transaction underpriced|transaction already exists/i;
/** Errors of the transport (node down, refused, timed out) rather than of the request. */
function isUnreachable(err: unknown): boolean {
  const text = `${(err as { name?: string })?.name ?? ''} ${(err as Error)?.message ?? ''} ${String((err as { cause?: unknown })?.cause ?? '')}`;
  return /HttpRequestError|TimeoutError|ECONNREFUSED|ECONNRESET|fetch failed|socket|timed out|SocketClosed/i.test(text);
}

export function createEvmChain(deps: EvmChainDeps): Chain {
  const { config, chainId, client, relayer, sealer, clock, log } = deps;
  const confirmations = BigInt(Math.max(1, config.confirmations));
  const dex = createDex({ client, chainId });
  const earn = createEarnVenue({ client, chainId });
  const lending = createLendingVenue({ client, chainId });

  /** Any call to the node: transport failures become ChainUnavailableError (the loops back off on it). */
  async function node<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (isUnreachable(err)) throw new ChainUnavailableError(err);
      throw err;
    }
  }

  let feeCache: { at: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null = null;
  async function currentFees() {
    const now = Date.now();
    if (!feeCache || now - feeCache.at > 1000) {
      const fees = await node(() => client.estimateFeesPerGas());
      feeCache = { at: now, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    }
    return feeCache;
  }

  async function nextNonce(trx: Knex.Transaction, address: Address): Promise<bigint> {
    const at = clock.now();
    const taken = await repo.takeNonce(trx, chainId, address, at);
    if (taken !== undefined) return taken;
    const pending = await node(() => client.getTransactionCount({ address, blockTag: 'pending' }));
    return (await repo.takeNonce(trx, chainId, address, at, BigInt(pending)))!;
  }

  async function signerFor(db: Db, address: string): Promise<PrivateKeyAccount> {
    if (address.toLowerCase() === relayer.address.toLowerCase()) return relayer;
    const sealed = await repo.findWalletKeyByAddress(db, address);
    if (!sealed) throw new Error(`no key for sender ${address}`);
    return openWalletAccount(sealer, sealed);
  }

  async function record(trx: Knex.Transaction, signer: PrivateKeyAccount, tx: UnsignedTx, row: Omit<repo.NewChainTxRow, 'id' | 'chain_id' | 'from_address' | 'to_address' | 'nonce' | 'raw_tx' | 'tx_hash' | 'max_fee_per_gas' | 'max_priority_fee_per_gas' | 'created_at'>): Promise<Hex> {
    const raw = await signer.signTransaction({ ...tx, chainId, type: 'eip1559' });
    const hash = viem().keccak256(raw);
    await repo.insertChainTx(trx, {
      ...row,
      id: newId(),
      chain_id: chainId,
      from_address: signer.address,
      to_address: tx.to,
      nonce: BigInt(tx.nonce),
      raw_tx: raw,
      tx_hash: hash,
      max_fee_per_gas: tx.maxFeePerGas,
      max_priority_fee_per_gas: tx.maxPriorityFeePerGas,
      created_at: clock.now(),
    });
    return hash;
  }

  const custody = createEvmCustody({ config, chainId, client, relayer, sealer, clock, node, nextNonce, currentFees, record });

  /** The fee cap of a native transfer: its gas must fit in the reserve held beside the amount. */
  const nativeFeeCap = () => config.ethGasReserveWei / NATIVE_TRANSFER_GAS;

  async function receiptOf(hash: string): Promise<TransactionReceipt | null> {
    return node(() => client.getTransactionReceipt({ hash: hash as Hex })).catch((err: unknown) => {
      if (err instanceof ChainUnavailableError) throw err;
      return null; // TransactionReceiptNotFoundError
    });
  }

  /** Re-signs `row` at the same nonce with fees raised by a quarter (nodes require at least +10%), or as a cancel. */
  async function replace(db: Db, row: ChainTxRow, asCancel: boolean): Promise<boolean> {
    const fees = await currentFees();
    const old = viem().parseTransaction(row.raw_tx as Hex) as TransactionSerializableEIP1559;
    const signer = await signerFor(db, row.from_address);
    let maxFee = maxOf((BigInt(row.max_fee_per_gas) * 5n) / 4n + 1n, fees.maxFeePerGas);
    let tip = maxOf((BigInt(row.max_priority_fee_per_gas) * 5n) / 4n + 1n, fees.maxPriorityFeePerGas);
    if (row.kind === 'native' || (asCancel && signer !== relayer)) maxFee = minOf(maxFee, nativeFeeCap());
    tip = minOf(tip, maxFee);
    if (maxFee <= BigInt(row.max_fee_per_gas) || tip <= BigInt(row.max_priority_fee_per_gas)) return false; // capped: no valid replacement
    const tx: UnsignedTx = asCancel
      ? { to: signer.address, value: 0n, nonce: Number(row.nonce), gas: NATIVE_TRANSFER_GAS, maxFeePerGas: maxFee, maxPriorityFeePerGas: tip }
      : { to: old.to as Address, value: old.value ?? 0n, data: old.data, nonce: Number(row.nonce), gas: old.gas ?? EIP3009_GAS, maxFeePerGas: maxFee, maxPriorityFeePerGas: tip };
    await savepoint(db, async (trx) => {
      await record(trx, signer, tx, {
        operation_id: row.operation_id,
        kind: asCancel ? 'cancel' : row.kind,
        attempt: row.attempt + 1,
        token_address: asCancel ? null : row.token_address,
        transfer_to: asCancel ? null : row.transfer_to,
        transfer_value: asCancel ? null : row.transfer_value === null ? null : BigInt(row.transfer_value),
        authorization_nonce: asCancel ? null : row.authorization_nonce,
        valid_before: asCancel || row.valid_before === null ? null : BigInt(row.valid_before),
      });
    });
    log.info({ operation_id: row.operation_id, nonce: row.nonce, attempt: row.attempt + 1, cancel: asCancel }, 'chain transaction re-signed with bumped fees');
    return true;
  }

  function transferLogIndex(receipt: TransactionReceipt, token: string | null): number | null {
    if (!token) return null;
    const logs = viem().parseEventLogs({ abi: usdCoinAbi, eventName: 'Transfer', logs: receipt.logs.filter((l) => l.address.toLowerCase() === token.toLowerCase()) });
    return logs[0]?.logIndex ?? null;
  }

  /**
   * The wallet's EIP-2612 permit of `value` of `token` to `spender`, at the next permit nonce (see takePermitNonce);
   * `inFlight` when another action of the wallet on this token is not mined yet (then the call cannot be simulated
   * against the present state).
   */
  async function signPermit(trx: Knex.Transaction, account: PrivateKeyAccount, token: Address, spender: Address, value: bigint) {
    const [domain, onchainNonce] = await Promise.all([
      node(() => client.readContract({ address: token, abi: eip5267Abi, functionName: 'eip712Domain' })),
      node(() => client.readContract({ address: token, abi: eip5267Abi, functionName: 'nonces', args: [account.address] })),
    ]);
    const deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds);
    const nonce = await repo.takePermitNonce(trx, chainId, token, account.address, onchainNonce, clock.now());
    const signature = await account.signTypedData({ domain: { name: domain[1], version: domain[2], chainId, verifyingContract: token }, types: permitTypes, primaryType: 'Permit', message: { owner: account.address, spender, value, nonce, deadline } });
    const { v, r, s } = viem().parseSignature(signature);
    return { permit: { deadline, v: Number(v), r, s }, deadline, inFlight: nonce !== onchainNonce };
  }

  /** A vault action through the EarnRouter on the wallet's permit (asset for deposits, shares otherwise), simulated first. */
  async function submitVaultCall(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, details: OnchainVaultDetails): Promise<{ ok: true; hash: Hex } | { ok: false; code: string; message: string }> {
    const c = details.onchain_vault;
    const vault = viem().getAddress(c.vault);
    const amount = BigInt(c.amount);
    const minimum = BigInt(c.minimum);
    const token = c.action === 'deposit' ? viem().getAddress(await node(() => client.readContract({ address: vault, abi: devVaultAbi, functionName: 'asset' }))) : vault;
    const { permit, deadline, inFlight } = await signPermit(trx, account, token, c.router, amount);
    const data =
      c.action === 'deposit'
        ? viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'depositWithPermit', args: [account.address, vault, amount, minimum, permit] })
        : c.action === 'redeem'
          ? viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'redeemWithPermit', args: [account.address, vault, amount, minimum, permit] })
          : viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'moveWithPermit', args: [account.address, vault, viem().getAddress(c.to_vault!), amount, minimum, permit] });
    if (!inFlight) {
      const reverted = await node(() => client.call({ to: c.router, data, account: relayer.address })).then(
        () => null,
        (err: unknown) => {
          if (err instanceof ChainUnavailableError) throw err;
          return String((err as Error).message).split('\n')[0]!;
        },
      );
      if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the vault ${c.action} would revert: ${reverted}` };
    }
    const fees = await currentFees();
    const txNonce = await nextNonce(trx, relayer.address);
    const tx = { to: c.router, value: 0n, data, nonce: Number(txNonce), gas: VAULT_GAS, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const hash = await record(trx, relayer, tx, { operation_id: operationId, kind: 'vault', attempt: 0, token_address: token.toLowerCase(), transfer_to: account.address.toLowerCase(), transfer_value: amount, authorization_nonce: null, valid_before: deadline });
    return { ok: true, hash };
  }

  /**
   * A rewards claim: the relayer credits the wallet's claimable at the distributor with the ledger's accrual and pays
   * it in one transaction (`creditAndClaim`); nothing of the wallet is signed (the money only comes in). Simulated first.
   */
  async function submitRewardsClaim(trx: Knex.Transaction, operationId: string, wallet: Address, details: OnchainRewardsDetails): Promise<{ ok: true; hash: Hex } | { ok: false; code: string; message: string }> {
    const c = details.onchain_rewards;
    const distributor = viem().getAddress(c.distributor);
    const amount = BigInt(c.amount);
    const data = viem().encodeFunctionData({ abi: rewardsDistributorAbi, functionName: 'creditAndClaim', args: [wallet, amount] });
    const reverted = await node(() => client.call({ to: distributor, data, account: relayer.address })).then(
      () => null,
      (err: unknown) => {
        if (err instanceof ChainUnavailableError) throw err;
        return String((err as Error).message).split('\n')[0]!;
      },
    );
    if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the rewards claim would revert: ${reverted}` };
    const fees = await currentFees();
    const txNonce = await nextNonce(trx, relayer.address);
    const tx = { to: distributor, value: 0n, data, nonce: Number(txNonce), gas: REWARDS_GAS, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const hash = await record(trx, relayer, tx, { operation_id: operationId, kind: 'rewards', attempt: 0, token_address: c.token.toLowerCase(), transfer_to: wallet.toLowerCase(), transfer_value: amount, authorization_nonce: null, valid_before: null });
    return { ok: true, hash };
  }

  /**
   * A Morpho Blue action through the BorrowRouter: a permit of the collateral (supply) or loan token (repay) to the
   * router, or the wallet's Morpho authorization of the router (borrow, withdraw). Simulated first: a call Morpho
   * would refuse (unhealthy, no liquidity) is refused here, before anything is recorded.
   */
  async function submitLendingCall(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, details: OnchainLendingDetails): Promise<{ ok: true; hash: Hex } | { ok: false; code: string; message: string }> {
    const c = details.onchain_lending;
    const router = viem().getAddress(c.router);
    const market = marketTuple(c.params);
    const assets = BigInt(c.assets);
    let data: Hex;
    let token: Address | null = null;
    let value = assets;
    let deadline: bigint;
    let inFlight = false;
    if (c.action === 'supply_collateral' || c.action === 'repay') {
      token = viem().getAddress(c.action === 'repay' ? c.params.loanToken : c.params.collateralToken);
      value = c.action === 'repay' ? BigInt(c.max_assets!) : assets;
      const signed = await signPermit(trx, account, token, router, value);
      ({ deadline, inFlight } = signed);
      data =
        c.action === 'repay'
          ? viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'repayWithPermit', args: [account.address, market, assets, BigInt(c.shares ?? '0'), value, signed.permit] })
          : viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'supplyCollateralWithPermit', args: [account.address, market, assets, signed.permit] });
    } else {
      const morpho = viem().getAddress(c.morpho);
      const nonce = await node(() => client.readContract({ address: morpho, abi: morphoAbi, functionName: 'nonce', args: [account.address] }));
      deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds);
      const auth = { authorizer: account.address, authorized: router, isAuthorized: true, nonce, deadline };
      const signature = await account.signTypedData({ domain: { chainId, verifyingContract: morpho }, types: morphoAuthorizationTypes, primaryType: 'Authorization', message: auth });
      const { v, r, s: sigS } = viem().parseSignature(signature);
      const sig = { v: Number(v), r, s: sigS };
      data =
        c.action === 'borrow'
          ? viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'borrowWithSig', args: [account.address, market, assets, auth, sig] })
          : viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'withdrawCollateralWithSig', args: [account.address, market, assets, auth, sig] });
    }
    if (!inFlight) {
      const reverted = await node(() => client.call({ to: router, data, account: relayer.address })).then(
        () => null,
        (err: unknown) => {
          if (err instanceof ChainUnavailableError) throw err;
          return String((err as Error).message).split('\n')[0]!;
        },
      );
      if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the market ${c.action} would revert: ${reverted}` };
    }
    const fees = await currentFees();
    const txNonce = await nextNonce(trx, relayer.address);
    const tx = { to: router, value: 0n, data, nonce: Number(txNonce), gas: LENDING_GAS, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const hash = await record(trx, relayer, tx, { operation_id: operationId, kind: 'lending', attempt: 0, token_address: token?.toLowerCase() ?? null, transfer_to: account.address.toLowerCase(), transfer_value: value, authorization_nonce: null, valid_before: deadline });
    return { ok: true, hash };
  }

  /**
   * A conversion: the wallet signs an EIP-2612 permit of the input to the router and the relayer submits
   * `swapExactInWithPermit` (one transaction: the input leaves the wallet, every hop swaps, and it reverts below the
   * minimum output). A swap that would revert at the current reserves is refused here, before anything is recorded.
   */
  async function submitSwap(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, amountIn: bigint, details: OnchainSwapDetails): Promise<{ ok: true; hash: Hex } | { ok: false; code: string; message: string }> {
    const { router, pairs, path } = details.onchain_route;
    const minOut = BigInt(details.min_amount_out);
    const tokenIn = viem().getAddress(path[0]!);
    const { permit, deadline, inFlight } = await signPermit(trx, account, tokenIn, router, amountIn);
    const args = [account.address, pairs, path, amountIn, minOut, permit] as const;
    if (!inFlight) {
      // Nothing of this wallet in flight: the swap can be tried against the current state.
      const reverted = await node(() => client.simulateContract({ address: router, abi: swapRouterAbi, functionName: 'swapExactInWithPermit', args, account: relayer.address })).then(
        () => null,
        (err: unknown) => {
          if (err instanceof ChainUnavailableError) throw err;
          return String((err as Error).message).split('\n')[0]!;
        },
      );
      if (reverted !== null) {
        const slippage = /InsufficientOutputAmount/.test(reverted);
        return { ok: false, code: slippage ? 'slippage_exceeded' : 'settlement_failed', message: slippage ? `the reserves moved: the swap would return less than the minimum ${minOut}` : `the swap would revert: ${reverted}` };
      }
    }
    const data = viem().encodeFunctionData({ abi: swapRouterAbi, functionName: 'swapExactInWithPermit', args });
    const fees = await currentFees();
    const txNonce = await nextNonce(trx, relayer.address);
    const tx = { to: router, value: 0n, data, nonce: Number(txNonce), gas: SWAP_GAS * BigInt(pairs.length), maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const hash = await record(trx, relayer, tx, { operation_id: operationId, kind: 'swap', attempt: 0, token_address: tokenIn.toLowerCase(), transfer_to: account.address.toLowerCase(), transfer_value: amountIn, authorization_nonce: null, valid_before: deadline });
    return { ok: true, hash };
  }

  /**
   * An account wallet's operation (issue 24): money out as a lane call of its AgentAccount (pay, cheque, swap, vault,
   * Morpho), whose proceeds the account itself receives; a rewards claim pays the account as it pays a wallet.
   */
  async function submitThroughAccount(trx: Knex.Transaction, op: OperationRow, wallet: AccountWallet, asset: ChainAsset): Promise<{ ok: true; hash: Hex } | { ok: false; code: string; message: string }> {
    const d = op.details as Partial<OnchainSwapDetails & OnchainVaultDetails & OnchainLendingDetails & OnchainRewardsDetails> | null;
    if (d?.onchain_rewards) return submitRewardsClaim(trx, op.id, wallet.address, op.details as unknown as OnchainRewardsDetails);
    const v = viem();
    const encode = (functionName: string, args: readonly unknown[]) => v.encodeFunctionData({ abi: agentAccountAbi, functionName, args } as Parameters<typeof v.encodeFunctionData>[0]);
    if (d?.onchain_route) {
      const { router, pairs, path } = d.onchain_route;
      const inner = encode('swap', [router, pairs, path, BigInt(op.amount!), BigInt(d.min_amount_out!)]);
      const call = await custody.submitInner(trx, op, wallet, inner, { kind: 'swap', gas: SWAP_GAS * BigInt(pairs.length) + LANE_GAS, token: path[0]!.toLowerCase(), value: BigInt(op.amount!) });
      return !call.ok && call.code === 'slippage_exceeded' ? { ok: false, code: 'slippage_exceeded', message: `the reserves moved: the swap would return less than the minimum ${d.min_amount_out}` } : call;
    }
    if (d?.onchain_vault) {
      const c = d.onchain_vault;
      // A move is one lane call (AgentAccount.move): the shares redeemed and the assets deposited in one transaction.
      const inner =
        c.action === 'move'
          ? encode('move', [v.getAddress(c.vault), v.getAddress(c.to_vault!), BigInt(c.amount), BigInt(c.minimum)])
          : encode(c.action === 'deposit' ? 'deposit' : 'redeem', [v.getAddress(c.vault), BigInt(c.amount), BigInt(c.minimum)]);
      return custody.submitInner(trx, op, wallet, inner, { kind: 'vault', gas: VAULT_GAS, token: c.vault.toLowerCase(), value: BigInt(c.amount) });
    }
    if (d?.onchain_lending) {
      const c = d.onchain_lending;
      const market = morphoMarket(c.params as Parameters<typeof morphoMarket>[0]);
      const morpho = v.getAddress(c.morpho);
      const inner =
        c.action === 'repay'
          ? encode('repay', [morpho, market, BigInt(c.assets), BigInt(c.shares ?? '0'), BigInt(c.max_assets!)])
          : encode(c.action === 'supply_collateral' ? 'supplyCollateral' : c.action === 'withdraw_collateral' ? 'withdrawCollateral' : 'borrow', [morpho, market, BigInt(c.assets)]);
      return custody.submitInner(trx, op, wallet, inner, { kind: 'lending', gas: LENDING_GAS, token: null, value: BigInt(c.assets) });
    }
    if (!LANE_TYPES.has(op.type)) return { ok: false, code: 'not_implemented', message: `${op.type} does not go through an agent account's lane` };
    return custody.submitLane(trx, op, wallet, asset);
  }

  const chain: Chain = {
    mode: 'evm',
    chainId,
    dex,
    earn,
    lending,
    custody: custody.port,

    settlesOnChain(op, asset) {
      // An account wallet's one-off payment is a cheque issued in the account (issue 24).
      if (op.type === 'one_off_payment.create') return Boolean((op.details as { cheque_id?: string } | null)?.cheque_id);
      if (op.type.startsWith('collateral.') || op.type.startsWith('debt.')) return Boolean((op.details as Partial<OnchainLendingDetails> | null)?.onchain_lending);
      if (op.type === 'conversion') return Boolean((op.details as Partial<OnchainSwapDetails> | null)?.onchain_route);
      if (op.type === 'earn.rewards_claim') return Boolean((op.details as Partial<OnchainRewardsDetails> | null)?.onchain_rewards);
      if (op.type.startsWith('earn.')) return Boolean((op.details as Partial<OnchainVaultDetails> | null)?.onchain_vault);
      if (!asset || !CHAIN_SETTLED_TYPES.has(op.type)) return false;
      const deliverAs = (op.details as { deliver_as?: string } | null)?.deliver_as;
      if (deliverAs && deliverAs !== asset.symbol) return false; // a conversion on delivery keeps its present settlement
      if (isNative(asset)) return asset.symbol === 'ETH';
      return asset.eip712_name !== null && (asset.symbol === 'USDC' || asset.symbol in config.assetAddresses);
    },

    gasReserve: (asset) => (isNative(asset) ? config.ethGasReserveWei : 0n),

    async submit(trx, op) {
      const asset = (await findAsset(trx, op.asset_symbol!))!;
      const wallet = await findWalletByAgent(trx, op.agent_id);
      if (!wallet?.sealed_private_key) return { ok: false, code: 'settlement_failed', message: 'the wallet has no key' };
      if (wallet.custody === 'account') {
        // Issue 24: the agent's AgentAccount, through its lane.
        const call = await submitThroughAccount(trx, op, { agentId: op.agent_id, address: viem().getAddress(wallet.address!), sealedLaneKey: wallet.sealed_private_key }, asset);
        if (!call.ok) return call;
        return { ok: true, txHash: call.hash, recheckAt: new Date(clock.now().getTime() + config.pollMs) };
      }
      const account = openWalletAccount(sealer, wallet.sealed_private_key);
      const amount = BigInt(op.amount!);
      const to = viem().getAddress(op.to_address!);
      const fees = await currentFees();
      let hash: Hex;
      if ((op.details as Partial<OnchainRewardsDetails> | null)?.onchain_rewards) {
        const call = await submitRewardsClaim(trx, op.id, account.address, op.details as unknown as OnchainRewardsDetails);
        if (!call.ok) return call;
        hash = call.hash;
      } else if ((op.details as Partial<OnchainLendingDetails> | null)?.onchain_lending) {
        const call = await submitLendingCall(trx, op.id, account, op.details as unknown as OnchainLendingDetails);
        if (!call.ok) return call;
        hash = call.hash;
      } else if (op.type === 'conversion' || op.type.startsWith('earn.')) {
        const call = op.type === 'conversion' ? await submitSwap(trx, op.id, account, amount, op.details as unknown as OnchainSwapDetails) : await submitVaultCall(trx, op.id, account, op.details as unknown as OnchainVaultDetails);
        if (!call.ok) return call;
        hash = call.hash;
      } else if (isNative(asset)) {
        const maxFee = minOf(fees.maxFeePerGas, nativeFeeCap());
        // Refused before a nonce is taken: a transaction the node would never accept would leave a gap behind it.
        const onchain = await node(() => client.getBalance({ address: account.address }));
        if (onchain < amount + maxFee * NATIVE_TRANSFER_GAS) {
          return { ok: false, code: 'insufficient_onchain_balance', message: `the wallet holds ${onchain} wei on chain ${chainId}, below the amount plus gas` };
        }
        const nonce = await nextNonce(trx, account.address);
        const tx = { to, value: amount, nonce: Number(nonce), gas: NATIVE_TRANSFER_GAS, maxFeePerGas: maxFee, maxPriorityFeePerGas: minOf(fees.maxPriorityFeePerGas, maxFee) };
        hash = await record(trx, account, tx, { operation_id: op.id, kind: 'native', attempt: 0, token_address: null, transfer_to: to, transfer_value: amount, authorization_nonce: null, valid_before: null });
      } else {
        const token = viem().getAddress(asset.contract_address!);
        const message = { from: account.address, to, value: amount, validAfter: 0n, validBefore: BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds), nonce: randomNonce() };
        const signature = await account.signTypedData({ domain: tokenDomain(chainId, token, asset.eip712_name ?? undefined, asset.eip712_version ?? undefined), types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message });
        const { v, r, s } = viem().parseSignature(signature);
        const data = viem().encodeFunctionData({ abi: usdCoinAbi, functionName: 'transferWithAuthorization', args: [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, Number(v), r, s] });
        const nonce = await nextNonce(trx, relayer.address);
        const tx = { to: token, value: 0n, data, nonce: Number(nonce), gas: EIP3009_GAS, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
        hash = await record(trx, relayer, tx, { operation_id: op.id, kind: 'eip3009', attempt: 0, token_address: token, transfer_to: to, transfer_value: amount, authorization_nonce: message.nonce, valid_before: message.validBefore });
      }
      return { ok: true, txHash: hash, recheckAt: new Date(clock.now().getTime() + config.pollMs) };
    },

    async track(trx, op): Promise<TrackResult> {
      const rows = await repo.listChainTxsByOperation(trx, op.id);
      if (rows.length === 0) return { state: 'failed', code: 'settlement_failed', message: 'no transaction was recorded for this operation', txHash: null, feeUnits: 0n };
      const head = await node(() => client.getBlockNumber({ cacheTime: 0 }));
      for (const row of rows) {
        if (row.status === 'replaced' || row.status === 'dropped') continue;
        const receipt = await receiptOf(row.tx_hash);
        if (!receipt) continue;
        if (head - receipt.blockNumber + 1n < confirmations) return { state: 'pending' };
        const logIndex = transferLogIndex(receipt, row.kind === 'swap' || row.kind === 'vault' || row.kind === 'lending' || row.kind === 'rewards' ? null : row.token_address);
        await repo.markChainTxMined(trx, row, { block_number: receipt.blockNumber, block_hash: receipt.blockHash, receipt_status: receipt.status === 'success' ? 1 : 0, gas_used: receipt.gasUsed, effective_gas_price: receipt.effectiveGasPrice, log_index: logIndex }, clock.now());
        const feeUnits = row.from_address.toLowerCase() === relayer.address.toLowerCase() ? 0n : receipt.gasUsed * receipt.effectiveGasPrice;
        if (row.kind === 'cancel') {
          return { state: 'failed', code: 'submission_timeout', message: `not mined within ${config.submitTimeoutMs} ms; replaced on chain by a cancellation (${row.tx_hash})`, txHash: row.tx_hash, feeUnits };
        }
        if (receipt.status !== 'success') return { state: 'failed', code: 'execution_reverted', message: `transaction ${row.tx_hash} reverted on chain ${chainId}`, txHash: row.tx_hash, feeUnits };
        // The router's Swapped event (an account's lane swap is sent to the account, which calls the router).
        const routerAddress = ((op.details as Partial<OnchainSwapDetails> | null)?.onchain_route?.router ?? row.to_address).toLowerCase();
        const swapped = row.kind === 'swap' ? viem().parseEventLogs({ abi: swapRouterAbi, eventName: 'Swapped', logs: receipt.logs.filter((l) => l.address.toLowerCase() === routerAddress) })[0] : undefined;
        if (row.kind === 'swap' && !swapped) return { state: 'failed', code: 'settlement_failed', message: `transaction ${row.tx_hash} emitted no Swapped event`, txHash: row.tx_hash, feeUnits };
        const extra: Record<string, unknown> = swapped ? { settled_amount_out: swapped.args.amountOut.toString() } : {};
        if (row.kind === 'vault') {
          // The vaults' own ERC-4626 events: what was redeemed (Withdraw) and minted (Deposit), and where.
          const events = viem().parseEventLogs({ abi: devVaultAbi, logs: receipt.logs }).filter((e) => e.eventName === 'Deposit' || e.eventName === 'Withdraw');
          extra.vault_events = events.map((e) => ({ event: e.eventName, vault: viem().getAddress(e.address), assets: e.args.assets.toString(), shares: e.args.shares.toString() }));
        }
        if (row.kind === 'rewards') {
          // The distributor's own Claimed events: what it paid, to whom.
          const events = viem().parseEventLogs({ abi: rewardsDistributorAbi, eventName: 'Claimed', logs: receipt.logs.filter((l) => l.address.toLowerCase() === row.to_address.toLowerCase()) });
          extra.rewards_events = events.map((e) => ({ account: viem().getAddress(e.args.account), amount: e.args.amount.toString() }));
        }
        if (row.kind === 'lending') {
          // Morpho's own events: what was supplied, withdrawn, borrowed or repaid (assets and shares), for whom.
          const morpho = String((op.details as Partial<OnchainLendingDetails>).onchain_lending?.morpho ?? '').toLowerCase();
          const events = viem().parseEventLogs({ abi: morphoEventsAbi, logs: receipt.logs.filter((l) => l.address.toLowerCase() === morpho) });
          extra.lending_events = events.map((e) => {
            const a = e.args as { assets: bigint; shares?: bigint; onBehalf: Address };
            return { event: e.eventName, assets: a.assets.toString(), shares: (a.shares ?? 0n).toString(), on_behalf: viem().getAddress(a.onBehalf) };
          });
        }
        return { state: 'confirmed', txHash: row.tx_hash, feeUnits, details: { tx_hash: row.tx_hash, block_number: Number(receipt.blockNumber), ...extra } };
      }
      // Nothing mined yet. Past the deadline, a cancellation at the same nonce is queued (once); the pool then
      // mines either it or the original, and the next pass sees which.
      const submittedAt = op.submitted_at?.getTime() ?? op.created_at.getTime();
      if (clock.now().getTime() - submittedAt > config.submitTimeoutMs && !rows.some((r) => r.kind === 'cancel')) {
        const latest = rows[rows.length - 1]!;
        if (!(await replace(trx, latest, true))) log.warn({ operation_id: op.id }, 'submission timed out but no cancellation fits the fee cap; waiting for the original');
      }
      return { state: 'pending' };
    },

    async pump(db) {
      let sent = 0;
      const now = clock.now();
      // Fee bumps first, so their replacements go out below in the same pass.
      for (const row of await repo.listStaleChainTxs(db, chainId, new Date(now.getTime() - config.rebroadcastMs), 20)) {
        if (await receiptOf(row.tx_hash)) continue; // mined: tracking finishes it
        if (!(await replace(db, row, false))) {
          // No room to bump (a native transfer at its fee cap): send the same bytes again.
          await node(() => client.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex })).catch((err: unknown) => {
            if (err instanceof ChainUnavailableError) throw err;
          });
          await repo.touchChainTxBroadcast(db, row.id, clock.now());
        }
      }
      for (const row of await repo.listUnsentChainTxs(db, chainId, 200)) {
        try {
          await node(() => client.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex }));
        } catch (err) {
          if (err instanceof ChainUnavailableError) throw err;
          if (!ALREADY_SENT.test(String((err as Error).message))) {
            await repo.markChainTxError(db, row.id, String((err as Error).message).split('\n')[0]!, clock.now());
            log.warn({ tx_hash: row.tx_hash, operation_id: row.operation_id, err: String((err as Error).message).split('\n')[0] }, 'broadcast refused; retried on a later pass');
            continue;
          }
        }
        await repo.markChainTxBroadcast(db, row.id, clock.now());
        sent += 1;
      }
      return sent;
    },

    async onchain(db, op, walletAddress) {
      const rows = await repo.listChainTxsByOperation(db, op.id);
      const row = rows.find((r) => r.status === 'mined') ?? rows.find((r) => r.tx_hash === op.tx_hash) ?? rows[rows.length - 1];
      return {
        chain_id: chainId,
        wallet_address: walletAddress,
        from: row ? viem().getAddress(row.from_address) : null,
        to: row ? viem().getAddress(row.to_address) : null,
        to_address: op.to_address,
        token_address: row?.token_address ?? null,
        tx_hash: row?.tx_hash ?? null,
        block_number: row?.block_number === null || row?.block_number === undefined ? null : Number(row.block_number),
        block_hash: row?.block_hash ?? null,
        log_index: row?.log_index ?? null,
        gas_used: row?.gas_used ?? null,
        effective_gas_price: row?.effective_gas_price ?? null,
        // A lane call goes through the agent's account (the wrapper) and is sent by the relayer.
        agent_wrapper_address: row?.kind === 'lane' ? viem().getAddress(row.to_address) : null,
        agent_sender_address: row ? viem().getAddress(row.from_address) : null,
      } satisfies OnchainView;
    },

    async health() {
      try {
        const head = await node(() => client.getBlockNumber({ cacheTime: 0 }));
        return { mode: 'evm', chain_id: chainId, state: 'ok', head_block: Number(head) };
      } catch (err) {
        return { mode: 'evm', chain_id: chainId, state: 'unreachable', head_block: null, error: err instanceof Error ? err.message.split('\n')[0]! : String(err) };
      }
    },

    async head() {
      const block = await node(() => client.getBlock({ blockTag: 'latest' }));
      return { number: block.number!, hash: block.hash!, parentHash: block.parentHash, timestamp: block.timestamp };
    },

    async block(number) {
      const block = await node(() => client.getBlock({ blockNumber: number })).catch((err: unknown) => {
        if (err instanceof ChainUnavailableError) throw err;
        return null;
      });
      return block ? { number: block.number!, hash: block.hash!, parentHash: block.parentHash, timestamp: block.timestamp } : null;
    },

    async balanceOf(address, asset) {
      if (isNative(asset)) return node(() => client.getBalance({ address }));
      return node(() => client.readContract({ address: viem().getAddress(asset.contract_address!), abi: usdCoinAbi, functionName: 'balanceOf', args: [address] }));
    },

    async transferLogs(tokens, fromBlock, toBlock) {
      if (tokens.length === 0) return [];
      const logs = await node(() => client.getContractEvents({ address: tokens, abi: usdCoinAbi, eventName: 'Transfer', fromBlock, toBlock }));
      return logs.map((l) => ({ token: viem().getAddress(l.address), from: l.args.from!, to: l.args.to!, value: l.args.value!, txHash: l.transactionHash, logIndex: l.logIndex, blockNumber: l.blockNumber, blockHash: l.blockHash }));
    },

    async nativeTransfers(blockNumber) {
      const block = await node(() => client.getBlock({ blockNumber, includeTransactions: true }));
      return block.transactions
        .filter((tx) => tx.to && tx.value > 0n)
        .map((tx) => ({ from: tx.from, to: viem().getAddress(tx.to!), value: tx.value, txHash: tx.hash, blockNumber: block.number!, blockHash: block.hash! }));
    },

    async authorizationUsed(token, authorizer, nonce) {
      return node(() => client.readContract({ address: token, abi: usdCoinAbi, functionName: 'authorizationState', args: [authorizer, nonce] }));
    },

    async callTransfer(token, from, to, amount) {
      const data = viem().encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [to, amount] });
      return node(() => client.call({ to: token, data, account: from })).then(
        () => null,
        (err: unknown) => {
          if (err instanceof ChainUnavailableError) throw err;
          return String((err as Error).message).split('\n')[0]!;
        },
      );
    },
  };
  return chain;
}

export type { AssetRow };
