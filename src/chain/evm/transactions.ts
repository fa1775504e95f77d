// The evm adapter's transactions: every one is signed inside the settlement transaction with a nonce allocated in
// Postgres and recorded (raw bytes + hash) before `pump` broadcasts it after commit; after a crash the same bytes are
// rebroadcast. A stale transaction is re-signed with bumped fees at the same nonce (`replace`), or as a zero-value
// self-transfer cancelling it. The fee cache is the only state, held in the factory's closure.
import type { PrivateKeyAccount, PublicClient, TransactionReceipt, TransactionSerializableEIP1559 } from 'viem';
import { viem } from '../../lib/viem.js';
import type { ChainConfig } from '../../config.js';
import { savepoint, type Db, type Knex } from '../../db/knex.js';
import * as repo from '../../db/repositories/chain.repository.js';
import type { ChainTxRow } from '../../db/repositories/chain.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Sealer } from '../../lib/crypto.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { openWalletAccount } from '../../lib/wallet-keys.js';
import { ChainUnavailableError, type Address, type Hex } from '../port.js';

/** Gas of a plain ETH transfer to an account without code. */
export const NATIVE_TRANSFER_GAS = 21_000n;
/** Gas limit of a relayed `transferWithAuthorization` (about 60-80k used; fixed, so a transfer that would revert is still mined and fails visibly). */
export const EIP3009_GAS = 150_000n;

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
export interface UnsignedTx {
  to: Address;
  value: bigint;
  data?: Hex;
  nonce: number;
  gas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** What a submission answers: the recorded transaction's hash, or a refusal before anything was recorded. */
export type Submitted = { ok: true; hash: Hex } | { ok: false; code: string; message: string };

export const maxOf = (a: bigint, b: bigint) => (a > b ? a : b);
export const minOf = (a: bigint, b: bigint) => (a < b ? a : b);

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
  {
    type: 'function',
    name: 'eip712Domain',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { name: 'fields', type: 'bytes1' },
      { name: 'name', type: 'string' },
      { name: 'version', type: 'string' },
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
      { name: 'salt', type: 'bytes32' },
      { name: 'extensions', type: 'uint256[]' },
    ],
  },
  { type: 'function', name: 'nonces', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
] as const;

/** Node errors meaning "this transaction (or one at its nonce) is already in the pool or mined": safe to treat as sent. */
const ALREADY_SENT = /already known|known transaction|nonce too low|already imported|replacement transaction underpriced|transaction already exists/i;

/** Whether a broadcast was refused because the node already has the transaction (or one at its nonce): it was sent. */
export const isAlreadySent = (err: unknown): boolean => ALREADY_SENT.test(String((err as Error)?.message));

/** Errors of the transport (node down, refused, timed out) rather than of the request. */
function isUnreachable(err: unknown): boolean {
  const text = `${(err as { name?: string })?.name ?? ''} ${(err as Error)?.message ?? ''} ${String((err as { cause?: unknown })?.cause ?? '')}`;
  return /HttpRequestError|TimeoutError|ECONNREFUSED|ECONNRESET|fetch failed|socket|timed out|SocketClosed/i.test(text);
}

export type EvmTransactions = ReturnType<typeof createTransactions>;

export function createTransactions(deps: EvmChainDeps) {
  const { config, chainId, client, relayer, sealer, clock, log } = deps;

  /** Any call to the node: transport failures become ChainUnavailableError (the loops back off on it). */
  async function node<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (isUnreachable(err)) throw new ChainUnavailableError(err);
      throw err;
    }
  }

  /** A dry run (eth_call, simulation) of `call`: null when it passes, else the first line of its error. */
  async function revertOf(call: () => Promise<unknown>): Promise<string | null> {
    return node(call).then(
      () => null,
      (err: unknown) => {
        if (err instanceof ChainUnavailableError) throw err;
        return String((err as Error).message).split('\n')[0]!;
      },
    );
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

  async function record(
    trx: Knex.Transaction,
    signer: PrivateKeyAccount,
    tx: UnsignedTx,
    row: Omit<repo.NewChainTxRow, 'id' | 'chain_id' | 'from_address' | 'to_address' | 'nonce' | 'raw_tx' | 'tx_hash' | 'max_fee_per_gas' | 'max_priority_fee_per_gas' | 'created_at'>,
  ): Promise<Hex> {
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
    const signature = await account.signTypedData({
      domain: { name: domain[1], version: domain[2], chainId, verifyingContract: token },
      types: permitTypes,
      primaryType: 'Permit',
      message: { owner: account.address, spender, value, nonce, deadline },
    });
    const { v, r, s } = viem().parseSignature(signature);
    return { permit: { deadline, v: Number(v), r, s }, deadline, inFlight: nonce !== onchainNonce };
  }

  /** Records a call of the relayer to `to` at its next nonce and the current fees. */
  async function recordRelayerCall(trx: Knex.Transaction, to: Address, data: Hex, gas: bigint, row: Parameters<typeof record>[3]): Promise<Hex> {
    const fees = await currentFees();
    const txNonce = await nextNonce(trx, relayer.address);
    const tx = { to, value: 0n, data, nonce: Number(txNonce), gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    return record(trx, relayer, tx, row);
  }

  /** One pass of the broadcaster: fee bumps of stale transactions, then every recorded transaction not sent yet. */
  async function pump(db: Knex): Promise<number> {
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
        if (!isAlreadySent(err)) {
          await repo.markChainTxError(db, row.id, String((err as Error).message).split('\n')[0]!, clock.now());
          log.warn({ tx_hash: row.tx_hash, operation_id: row.operation_id, err: String((err as Error).message).split('\n')[0] }, 'broadcast refused; retried on a later pass');
          continue;
        }
      }
      await repo.markChainTxBroadcast(db, row.id, clock.now());
      sent += 1;
    }
    return sent;
  }

  return { node, revertOf, currentFees, nextNonce, record, recordRelayerCall, nativeFeeCap, receiptOf, replace, signPermit, pump };
}
