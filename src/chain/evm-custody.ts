// The evm adapter's agent accounts (issue 24): deployment through the factory, owner actions and cheque claims sent
// by the relayer at once, and every money path of an account wallet as a lane call: the lane key signs `LaneCall`,
// the relayer submits `relayLane` (paying the gas). Before anything is recorded an eth_call of the lane call refuses
// with the error code the account would revert with; a revert that is not the account's own (a token's balance
// check) is left to the chain, whose receipt then ends the operation `execution_failed` with its hold released.
import type { PrivateKeyAccount, PublicClient } from 'viem';
import type { ChainConfig } from '../config.js';
import { savepoint, type Db, type Knex } from '../db/knex.js';
import * as repo from '../db/repositories/chain.repository.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import { viem } from '../lib/viem.js';
import { openWalletAccount } from '../lib/wallet-keys.js';
import { randomNonce } from '../x402/signing.js';
import { NATIVE_TOKEN, accountRevertOf, createAccountCallData, laneCall, readAccountState, readOwnerNonce, relayLaneCallData } from './accounts.js';
import { CUSTODY_SETTING, agentAccountAbi, agentAccountFactoryAbi, passkeyOwnerFactoryAbi, type CustodyContracts } from './custody.js';
import { isAlreadySent } from './evm/transactions.js';
import { ChainUnavailableError, type AccountWallet, type Address, type ChainAsset, type CustodyPort, type Hex } from './port.js';

/** Gas limit of a relayed lane call (pay or cheque: about 90-130k with the feed read and the usage write). */
export const LANE_GAS = 350_000n;
/** Gas limit of an owner action (a policy with its lists: about 60k + 45k per listed entry). */
export const OWNER_GAS = 2_000_000n;
/** Gas limit of a passkey signer's clone (about 100k: 45 bytes of proxy and the 64-byte key). */
export const PASSKEY_SIGNER_GAS = 400_000n;
/** Gas limit of the factory's createAccount (the account's code: about 2.5M). */
export const DEPLOY_GAS = 6_000_000n;

export interface EvmCustodyDeps {
  config: ChainConfig;
  chainId: number;
  client: PublicClient;
  relayer: PrivateKeyAccount;
  sealer: Sealer;
  clock: Clock;
  node<T>(call: () => Promise<T>): Promise<T>;
  nextNonce(trx: Knex.Transaction, address: Address): Promise<bigint>;
  currentFees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>;
  record(
    trx: Knex.Transaction,
    signer: PrivateKeyAccount,
    tx: { to: Address; value: bigint; data?: Hex; nonce: number; gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
    row: {
      operation_id: string | null;
      kind: repo.ChainTxKind;
      attempt: number;
      token_address: string | null;
      transfer_to: string | null;
      transfer_value: bigint | null;
      authorization_nonce: string | null;
      valid_before: bigint | null;
    },
  ): Promise<Hex>;
}

export type LaneSubmit = { ok: true; hash: Hex } | { ok: false; code: string; message: string };

export interface EvmCustody {
  port: CustodyPort;
  /** An account wallet's outgoing operation as a lane call (payment, crypto withdrawal, one-off cheque). */
  /** `prelude`: lane calls made first, in the same relayed call (AgentAccount.batch), and the gas they add. */
  submitLane(trx: Knex.Transaction, op: OperationRow, wallet: AccountWallet, asset: ChainAsset, prelude?: { calls: Hex[]; gas: bigint }): Promise<LaneSubmit>;
  /** Any lane call of an operation (DeFi: swap, vault, Morpho): checked by eth_call, then recorded for broadcast. */
  submitInner(
    trx: Knex.Transaction,
    op: OperationRow,
    wallet: AccountWallet,
    inner: Hex,
    row: { kind: repo.ChainTxKind; gas: bigint; token: string | null; value: bigint | null },
  ): Promise<LaneSubmit>;
}

export function createEvmCustody(deps: EvmCustodyDeps): EvmCustody {
  const { client, relayer, chainId, clock, config, node } = deps;
  let cached: CustodyContracts | null = null;

  /** eth_call of `data` to `to` from the relayer: null when it passes, else the error it raised. */
  async function dryRun(to: Address, data: Hex): Promise<unknown> {
    return node(() => client.call({ to, data, account: relayer.address })).then(
      () => null,
      (err: unknown) => {
        if (err instanceof ChainUnavailableError) throw err;
        return err ?? new Error('reverted');
      },
    );
  }

  const firstLine = (err: unknown) => String((err as Error)?.message ?? err).split('\n')[0]!;

  /** The lane key's relayed call: signed now, valid for CHAIN_AUTHORIZATION_TTL_SECONDS, single use by its nonce. */
  async function relayed(wallet: AccountWallet, inner: Hex): Promise<{ data: Hex; nonce: Hex; deadline: bigint }> {
    const lane = openWalletAccount(deps.sealer, wallet.sealedLaneKey);
    const deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds);
    const nonce = randomNonce();
    return { data: await relayLaneCallData(lane, chainId, wallet.address, inner, nonce, deadline), nonce, deadline };
  }

  /** Sends `data` from the relayer in a transaction of its own, broadcasts it and waits for its receipt. */
  async function sendAndWait(db: Knex, to: Address, data: Hex, kind: repo.ChainTxKind, gas: bigint): Promise<{ hash: Hex; success: boolean }> {
    const fees = await deps.currentFees();
    const hash = await savepoint(db, async (trx) => {
      const nonce = await deps.nextNonce(trx, relayer.address);
      return deps.record(
        trx,
        relayer,
        { to, value: 0n, data, nonce: Number(nonce), gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas },
        { operation_id: null, kind, attempt: 0, token_address: null, transfer_to: null, transfer_value: null, authorization_nonce: null, valid_before: null },
      );
    });
    const row = (await repo.findChainTxByHash(db, hash))!;
    // The row is recorded, so the broadcaster (a worker's pump) may send it first: the node then refuses ours as
    // already imported, and the transaction is on its way all the same.
    await node(() => client.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex })).catch((err: unknown) => {
      if (!isAlreadySent(err)) throw err;
    });
    await repo.markChainTxBroadcast(db, row.id, clock.now());
    const receipt = await node(() => client.waitForTransactionReceipt({ hash, pollingInterval: Math.min(config.pollMs, 250), timeout: 60_000 }));
    await repo.markChainTxMined(
      db,
      row,
      {
        block_number: receipt.blockNumber,
        block_hash: receipt.blockHash,
        receipt_status: receipt.status === 'success' ? 1 : 0,
        gas_used: receipt.gasUsed,
        effective_gas_price: receipt.effectiveGasPrice,
        log_index: null,
      },
      clock.now(),
    );
    return { hash, success: receipt.status === 'success' };
  }

  const port: CustodyPort = {
    async contracts(db: Db) {
      if (cached) return cached;
      const raw = await repo.findSetting(db, chainId, CUSTODY_SETTING);
      if (!raw) return null;
      const parsed = JSON.parse(raw) as CustodyContracts;
      const code = await node(() => client.getCode({ address: parsed.factory }));
      if (!code || code === '0x') return null;
      cached = parsed;
      return cached;
    },

    state: (account) => node(() => readAccountState(client, account)),

    async hasCode(address) {
      const code = await node(() => client.getCode({ address }));
      return Boolean(code && code !== '0x');
    },

    ownerNonce: (account, owner, key) => node(() => readOwnerNonce(client, account, owner, key)),

    readTrusted: (account, destination) => node(() => client.readContract({ address: account, abi: agentAccountAbi, functionName: 'trustedUnlockAt', args: [destination] })),

    readPayee: (account, address) => node(() => client.readContract({ address: account, abi: agentAccountAbi, functionName: 'isPayee', args: [address] })),

    readPaidBefore: (account, address) => node(() => client.readContract({ address: account, abi: agentAccountAbi, functionName: 'paidBefore', args: [address] })),

    async ensureDeployed(db, a) {
      const code = await node(() => client.getCode({ address: a.address }));
      if (code && code !== '0x') return;
      const contracts = await port.contracts(db);
      if (!contracts) throw new Error('no AgentAccountFactory on this chain yet: run agentctl chain bootstrap');
      const predicted = await node(() => client.readContract({ address: contracts.factory, abi: agentAccountFactoryAbi, functionName: 'predictAddress', args: [a.owner, a.firstLane, a.salt] }));
      if (predicted.toLowerCase() !== a.address.toLowerCase()) throw new Error(`the factory predicts ${predicted} for this owner and lane, not the wallet's ${a.address}`);
      const sent = await sendAndWait(db, contracts.factory, createAccountCallData(a.owner, a.firstLane, a.salt), 'deploy', DEPLOY_GAS);
      if (!sent.success) throw new Error(`the account's deployment reverted (${sent.hash})`);
    },

    async passkeySigner(db, key, deploy) {
      const factory = (await port.contracts(db))?.passkeyOwnerFactory;
      if (!factory || !(await port.hasCode(factory))) throw new Error(`no PasskeyOwnerFactory on chain ${chainId} yet: run agentctl chain bootstrap`);
      const signer = await node(() => client.readContract({ address: factory, abi: passkeyOwnerFactoryAbi, functionName: 'predict', args: [key.qx, key.qy] }));
      if (!deploy || (await port.hasCode(signer))) return signer;
      const data = viem().encodeFunctionData({ abi: passkeyOwnerFactoryAbi, functionName: 'create', args: [key.qx, key.qy] });
      const sent = await sendAndWait(db, factory, data, 'deploy', PASSKEY_SIGNER_GAS);
      if (!sent.success) throw new Error(`the passkey signer's deployment reverted (${sent.hash})`);
      return signer;
    },

    async sendNow(db, to, data, kind, gas = OWNER_GAS) {
      const refused = await dryRun(to, data);
      if (refused) {
        const revert = accountRevertOf(refused);
        return { ok: false, code: revert?.code ?? 'execution_reverted', message: revert?.message ?? `the call would revert: ${firstLine(refused)}`, txHash: null };
      }
      const sent = await sendAndWait(db, to, data, kind, gas);
      if (!sent.success) return { ok: false, code: 'execution_reverted', message: `transaction ${sent.hash} reverted on chain ${chainId}`, txHash: sent.hash };
      return { ok: true, txHash: sent.hash };
    },

    async sendLaneNow(db, wallet, inner, gas = LANE_GAS) {
      return port.sendNow(db, wallet.address, (await relayed(wallet, inner)).data, 'lane', gas);
    },

    async checkLane(wallet, inner) {
      const refused = await dryRun(wallet.address, (await relayed(wallet, inner)).data);
      if (!refused) return null;
      const revert = accountRevertOf(refused);
      return { code: revert?.code ?? 'execution_reverted', message: revert?.message ?? `the lane call would revert: ${firstLine(refused)}` };
    },
  };

  return {
    port,
    async submitLane(trx, op, wallet, asset, prelude) {
      const amount = BigInt(op.amount!);
      const to = viem().getAddress(op.to_address!);
      const token = asset.contract_address ? viem().getAddress(asset.contract_address) : NATIVE_TOKEN;
      let inner: Hex;
      let transferTo: Address | null = to;
      if (op.type === 'one_off_payment.create') {
        const d = op.details as { cheque_id: Hex; unlock_at: string; expires_at: string };
        const seconds = (iso: string) => BigInt(Math.floor(new Date(iso).getTime() / 1000));
        inner = laneCall.issueCheque(d.cheque_id, token, to, amount, seconds(d.unlock_at), seconds(d.expires_at));
        transferTo = null; // nothing moves until the claim
      } else {
        if (token === NATIVE_TOKEN) {
          const onchain = await node(() => client.getBalance({ address: wallet.address }));
          if (onchain < amount) return { ok: false, code: 'insufficient_onchain_balance', message: `the account holds ${onchain} wei on chain ${chainId}, below the amount` };
        }
        inner = laneCall.pay(token, to, amount);
      }
      if (prelude) inner = laneCall.batch([...prelude.calls, inner]);
      return submit(trx, op, wallet, inner, { kind: 'lane', gas: LANE_GAS + (prelude?.gas ?? 0n), token: transferTo && token !== NATIVE_TOKEN ? token : null, transferTo, value: amount });
    },

    submitInner: (trx, op, wallet, inner, row) => submit(trx, op, wallet, inner, { ...row, transferTo: wallet.address }),
  };

  async function submit(
    trx: Knex.Transaction,
    op: OperationRow,
    wallet: AccountWallet,
    inner: Hex,
    row: { kind: repo.ChainTxKind; gas: bigint; token: string | null; transferTo: string | null; value: bigint | null },
  ): Promise<LaneSubmit> {
    const code = await node(() => client.getCode({ address: wallet.address }));
    if (!code || code === '0x') return { ok: false, code: 'permission_not_granted', message: `the agent's account ${wallet.address} is not deployed: its owner has not signed a policy yet` };
    const { data, nonce: laneNonce, deadline } = await relayed(wallet, inner);
    const refused = await dryRun(wallet.address, data);
    if (refused) {
      const revert = accountRevertOf(refused);
      // The account's own refusal (a cap, a payee, a time lock, the pause) is final; another revert (a token's
      // balance check) is left to the chain, which fails it visibly.
      if (revert) return { ok: false, code: revert.code, message: revert.message };
    }
    const fees = await deps.currentFees();
    const nonce = await deps.nextNonce(trx, relayer.address);
    // The row keeps the LaneCall's single-use nonce and deadline, as an EIP-3009 row keeps its authorization's:
    // a fee bump re-sends the same signed call, so at most one of them can ever be executed.
    const hash = await deps.record(
      trx,
      relayer,
      { to: wallet.address, value: 0n, data, nonce: Number(nonce), gas: row.gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas },
      { operation_id: op.id, kind: row.kind, attempt: 0, token_address: row.token, transfer_to: row.transferTo, transfer_value: row.value, authorization_nonce: laneNonce, valid_before: deadline },
    );
    return { ok: true, hash };
  }
}
