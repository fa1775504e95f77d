// EIP-3009 TransferWithAuthorization for USDC on Base, signed offline with the wallet's viem account, and the x402
// payment header built from it (v1 `X-PAYMENT`, v2 `PAYMENT-SIGNATURE`). Pure apart from the random nonce.
import { randomBytes } from 'node:crypto';
import type { Hex, LocalAccount } from 'viem';
import { viem } from '../lib/viem.js';
import { BASE_CHAIN_ID, BASE_PAYABLE, encodeBase64Json, USDC_BASE_ADDRESS, USDC_EIP712, type PayableNetwork, type RawRequirement, type X402Version } from './challenge.js';

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

export const USDC_BASE_DOMAIN = { name: USDC_EIP712.name, version: USDC_EIP712.version, chainId: BASE_CHAIN_ID, verifyingContract: USDC_BASE_ADDRESS } as const;

export const PAYMENT_HEADER_NAMES = { 1: 'X-PAYMENT', 2: 'PAYMENT-SIGNATURE' } as const;

/** A fresh random 32-byte nonce (EIP-3009 nonces are random, not sequential), lower-case hex. */
export const randomNonce = (): Hex => `0x${randomBytes(32).toString('hex')}`;

export interface Authorization {
  from: string;
  to: string;
  /** Base units, decimal string (the wire form of every x402 implementation). */
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: Hex;
}

export interface SignInput {
  account: LocalAccount;
  /**
   * The authorizer when it is not `account` itself: an agent's AgentAccount (issue 24), which vouches for the
   * authorization by ERC-1271 once its lane registered it (`authorizeX402`); `account` (the lane key) then signs only
   * to give the payload a signature of the usual shape, which the account does not read.
   */
  from?: string;
  payTo: string;
  amount: bigint;
  nonce: Hex;
  /** Unix seconds. */
  validAfter: bigint;
  validBefore: bigint;
  /** The payable network (its chain id, token and EIP-712 name/version); USDC on Base by default. */
  payable?: PayableNetwork;
}

/** The EIP-712 domain of the payable network's USDC. */
export const domainOf = (payable: PayableNetwork) =>
  payable === BASE_PAYABLE ? USDC_BASE_DOMAIN : { name: payable.eip712.name, version: payable.eip712.version, chainId: payable.chainId, verifyingContract: viem().getAddress(payable.usdc) };

/** Signs exactly `amount` base units from the account to `payTo`; deterministic for a fixed key, nonce and window. */
export async function signTransferAuthorization(input: SignInput): Promise<{ authorization: Authorization; signature: Hex }> {
  const from = input.from ? viem().getAddress(input.from) : input.account.address;
  const to = viem().getAddress(input.payTo);
  const signature = await input.account.signTypedData({
    domain: domainOf(input.payable ?? BASE_PAYABLE),
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: { from, to, value: input.amount, validAfter: input.validAfter, validBefore: input.validBefore, nonce: input.nonce },
  });
  return {
    authorization: { from, to, value: input.amount.toString(), validAfter: input.validAfter.toString(), validBefore: input.validBefore.toString(), nonce: input.nonce },
    signature,
  };
}

/**
 * The payment payload per the x402 specification, base64 JSON:
 * v1 `{ x402Version: 1, scheme, network: "base", payload: { signature, authorization } }`;
 * v2 `{ x402Version: 2, resource?, accepted: <the requirement verbatim>, payload: { signature, authorization } }`.
 */
export function encodePaymentHeader(input: { version: X402Version; authorization: Authorization; signature: Hex; requirement?: RawRequirement | null; resource?: unknown; payable?: PayableNetwork }): {
  name: (typeof PAYMENT_HEADER_NAMES)[X402Version];
  value: string;
  payload: Record<string, unknown>;
} {
  const inner = { signature: input.signature, authorization: input.authorization };
  const payable = input.payable ?? BASE_PAYABLE;
  let payload: Record<string, unknown>;
  if (input.version === 1) {
    payload = { x402Version: 1, scheme: 'exact', network: payable.networks[1], payload: inner };
  } else {
    const accepted = input.requirement ?? {
      scheme: 'exact',
      network: payable.networks[2],
      asset: payable.usdc,
      amount: input.authorization.value,
      payTo: input.authorization.to,
      maxTimeoutSeconds: 60,
      extra: { ...payable.eip712 },
    };
    payload = { x402Version: 2, ...(input.resource ? { resource: input.resource } : {}), accepted, payload: inner };
  }
  return { name: PAYMENT_HEADER_NAMES[input.version], value: encodeBase64Json(payload), payload };
}
