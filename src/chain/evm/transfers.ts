// The evm adapter's transfers (payments and crypto withdrawals): ETH by a plain transaction from the wallet, and
// EIP-3009 tokens (USDC) by `transferWithAuthorization` signed by the wallet and submitted (gas paid) by the relayer.
import type { PrivateKeyAccount } from 'viem';
import type { Knex } from '../../db/knex.js';
import { viem } from '../../lib/viem.js';
import { randomNonce } from '../../x402/signing.js';
import type { Address, ChainAsset } from '../port.js';
import { tokenDomain, transferWithAuthorizationTypes, usdCoinAbi } from '../token.js';
import { EIP3009_GAS, minOf, NATIVE_TRANSFER_GAS, type EvmChainDeps, type EvmTransactions, type Submitted } from './transactions.js';

export const isNative = (asset: Pick<ChainAsset, 'contract_address'>) => asset.contract_address === null;

export function createTransfers({ config, chainId, client, relayer, clock }: EvmChainDeps, tx: EvmTransactions) {
  /** ETH from the wallet, its fee capped by the gas reserve held beside the amount. */
  async function submitNative(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, to: Address, amount: bigint): Promise<Submitted> {
    const fees = await tx.currentFees();
    const maxFee = minOf(fees.maxFeePerGas, tx.nativeFeeCap());
    // Refused before a nonce is taken: a transaction the node would never accept would leave a gap behind it.
    const onchain = await tx.node(() => client.getBalance({ address: account.address }));
    if (onchain < amount + maxFee * NATIVE_TRANSFER_GAS) {
      return { ok: false, code: 'insufficient_onchain_balance', message: `the wallet holds ${onchain} wei on chain ${chainId}, below the amount plus gas` };
    }
    const nonce = await tx.nextNonce(trx, account.address);
    const unsigned = { to, value: amount, nonce: Number(nonce), gas: NATIVE_TRANSFER_GAS, maxFeePerGas: maxFee, maxPriorityFeePerGas: minOf(fees.maxPriorityFeePerGas, maxFee) };
    const hash = await tx.record(trx, account, unsigned, {
      operation_id: operationId,
      kind: 'native',
      attempt: 0,
      token_address: null,
      transfer_to: to,
      transfer_value: amount,
      authorization_nonce: null,
      valid_before: null,
    });
    return { ok: true, hash };
  }

  /** A token by the wallet's EIP-3009 authorization, relayed. */
  async function submitTokenTransfer(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, asset: ChainAsset, to: Address, amount: bigint): Promise<Submitted> {
    const fees = await tx.currentFees();
    const token = viem().getAddress(asset.contract_address!);
    const message = { from: account.address, to, value: amount, validAfter: 0n, validBefore: BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds), nonce: randomNonce() };
    const signature = await account.signTypedData({
      domain: tokenDomain(chainId, token, asset.eip712_name ?? undefined, asset.eip712_version ?? undefined),
      types: transferWithAuthorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message,
    });
    const { v, r, s } = viem().parseSignature(signature);
    const data = viem().encodeFunctionData({
      abi: usdCoinAbi,
      functionName: 'transferWithAuthorization',
      args: [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, Number(v), r, s],
    });
    const nonce = await tx.nextNonce(trx, relayer.address);
    const unsigned = { to: token, value: 0n, data, nonce: Number(nonce), gas: EIP3009_GAS, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const hash = await tx.record(trx, relayer, unsigned, {
      operation_id: operationId,
      kind: 'eip3009',
      attempt: 0,
      token_address: token,
      transfer_to: to,
      transfer_value: amount,
      authorization_nonce: message.nonce,
      valid_before: message.validBefore,
    });
    return { ok: true, hash };
  }

  return { submitNative, submitTokenTransfer };
}
