import type { PublicClient } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { viem } from '../lib/viem.js';
import {
  OWNER_ACTION_TYPES,
  agentAccountAbi,
  agentAccountFactoryAbi,
  laneCallTypedData,
  ownerCallArgs,
  ownerTypedData as typedDataOf,
  type OnchainLimits,
  type OnchainPolicy,
  type OwnerAction as ActionName,
  type OwnerActionFields,
} from './custody.js';
import type { Address, Hex } from './hex.js';

export const NATIVE_TOKEN = '0x0000000000000000000000000000000000000000' as Address;

/** The account's CREATE2 salt for an agent: stable, so the address is known before deployment. */
export const accountSalt = (agentId: string): Hex => viem().keccak256(viem().stringToHex(`agent-account:${agentId}`));

/** The counterfactual address of the account of (`owner`, first `lane`, `salt`): the factory's own prediction. */
export function predictAccountAddress(client: PublicClient, factory: Address, owner: Address, lane: Address, salt: Hex): Promise<Address> {
  return client.readContract({ address: factory, abi: agentAccountFactoryAbi, functionName: 'predictAddress', args: [owner, lane, salt] });
}

export type OwnerAction =
  | { kind: 'set_policy'; policy: OnchainPolicy }
  | { kind: 'add_trusted_destination'; destination: Address; unlockAt: bigint }
  | { kind: 'remove_trusted_destination'; destination: Address }
  | { kind: 'cancel_cheque'; id: Hex }
  | { kind: 'pause' }
  | { kind: 'resume' }
  | { kind: 'rotate_lane'; newLane: Address }
  | { kind: 'approve_spend'; operationId: Hex; token: Address; to: Address; amount: bigint }
  | { kind: 'transfer_ownership'; newOwner: Address };

export interface OwnerAuth {
  nonce: bigint;
  deadline: bigint;
  signature: Hex;
}

/** The owner change as custody.ts's action name and message fields. */
function named(change: OwnerAction): { action: ActionName; fields: OwnerActionFields[ActionName] } {
  switch (change.kind) {
    case 'set_policy':
      return { action: 'SetPolicy', fields: change.policy };
    case 'add_trusted_destination':
      return { action: 'AddTrustedDestination', fields: { destination: change.destination, unlockAt: change.unlockAt } };
    case 'remove_trusted_destination':
      return { action: 'RemoveTrustedDestination', fields: { destination: change.destination } };
    case 'cancel_cheque':
      return { action: 'CancelCheque', fields: { id: change.id } };
    case 'pause':
      return { action: 'Pause', fields: {} };
    case 'resume':
      return { action: 'Resume', fields: {} };
    case 'rotate_lane':
      return { action: 'RotateLane', fields: { newLane: change.newLane } };
    case 'approve_spend':
      return { action: 'ApproveSpend', fields: { operationId: change.operationId, token: change.token, to: change.to, amount: change.amount } };
    case 'transfer_ownership':
      return { action: 'TransferOwnership', fields: { newOwner: change.newOwner } };
  }
}

/** The typed data the owner's signer signs for `change` on `account` (viem's signTypedData parameters). */
export function ownerTypedData(chainId: number, account: Address, change: OwnerAction, nonce: bigint, deadline: bigint) {
  const { action, fields } = named(change);
  return typedDataOf(action, fields, { chainId, account, nonce, deadline });
}

export type OwnerTypedData = ReturnType<typeof ownerTypedData>;

/** Typed data as JSON (bigints as decimal strings), for the owner API and any wallet's eth_signTypedData_v4. */
export function typedDataJson(data: OwnerTypedData): Record<string, unknown> {
  const types = {
    EIP712Domain: [
      { name: 'name', type: 'string' },
      { name: 'version', type: 'string' },
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
    ],
    ...data.types,
  };
  return JSON.parse(JSON.stringify({ domain: data.domain, types, primaryType: data.primaryType, message: data.message }, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))) as Record<
    string,
    unknown
  >;
}

/** Signs an owner action with a local key (agentctl --owner-key-file, the development owner key). */
export function signOwnerAction(signer: PrivateKeyAccount, data: OwnerTypedData): Promise<Hex> {
  return signer.signTypedData(data as Parameters<PrivateKeyAccount['signTypedData']>[0]);
}

/**
 * Whether `signature` is `owner`'s over `data`: an EOA's ECDSA signature (recovered here), or a contract signer's
 * ERC-1271 answer (a passkey's PasskeyOwner, a contract wallet), asked of the chain through viem's verifier. A node
 * that does not answer throws (it is not a refusal).
 */
export async function verifyOwnerSignature(client: PublicClient, owner: Address, data: OwnerTypedData, signature: Hex): Promise<boolean> {
  const v = viem();
  const digest = v.hashTypedData(data as unknown as Parameters<typeof v.hashTypedData>[0]);
  if (signature.length === 132) {
    try {
      if (v.isAddressEqual(await v.recoverAddress({ hash: digest, signature }), owner)) return true;
    } catch {
      /* not an ECDSA signature: the contract path below */
    }
  }
  const code = await client.getCode({ address: owner });
  if (!code || code === '0x') return false;
  return client.verifyHash({ address: owner, hash: digest, signature });
}

/** The account's call data of an owner change carrying the owner's authorization. */
export function ownerActionCallData(change: OwnerAction, a: OwnerAuth): Hex {
  const { action, fields } = named(change);
  const call = ownerCallArgs(action, fields, a);
  return viem().encodeFunctionData({ abi: agentAccountAbi, functionName: call.functionName, args: call.args } as Parameters<ReturnType<typeof viem>['encodeFunctionData']>[0]);
}

/** `relayLane(inner, nonce, deadline, laneSignature)`: the lane key's signed call, submitted by the relayer. */
export async function relayLaneCallData(lane: PrivateKeyAccount, chainId: number, account: Address, inner: Hex, nonce: Hex, deadline: bigint): Promise<Hex> {
  const signature = await lane.signTypedData(laneCallTypedData({ chainId, account, data: inner, nonce, deadline }));
  return viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'relayLane', args: [inner, nonce, deadline, signature] });
}

/** Lane calls (the inner data of relayLane). */
export const laneCall = {
  pay: (token: Address, to: Address, amount: bigint): Hex => viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'pay', args: [token, to, amount] }),
  issueCheque: (id: Hex, token: Address, to: Address, amount: bigint, unlockAt: bigint, expiresAt: bigint): Hex =>
    viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'issueCheque', args: [id, token, to, amount, unlockAt, expiresAt] }),
  batch: (calls: Hex[]): Hex => viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'batch', args: [calls] }),
  confirmTrustedDestination: (destination: Address): Hex => viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'confirmTrustedDestination', args: [destination] }),
  authorizeX402: (token: Address, to: Address, value: bigint, validAfter: bigint, validBefore: bigint, nonce: Hex): Hex =>
    viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'authorizeX402', args: [token, to, value, validAfter, validBefore, nonce] }),
};

export const claimChequeCallData = (id: Hex): Hex => viem().encodeFunctionData({ abi: agentAccountAbi, functionName: 'claimCheque', args: [id] });
export const createAccountCallData = (owner: Address, lane: Address, salt: Hex): Hex =>
  viem().encodeFunctionData({ abi: agentAccountFactoryAbi, functionName: 'createAccount', args: [owner, lane, salt] });

/** An account's state as the chain holds it (limits, usage, what remains, pause, keys, policy hash). */
export interface AccountState {
  deployed: boolean;
  owner: Address | null;
  lane: Address | null;
  paused: boolean;
  policyVersion: bigint;
  policyHash: Hex | null;
  limits: OnchainLimits | null;
  usage: { periodStart: bigint; periodTxs: number; lastTxBlock: bigint; periodSwaps: number; periodUsd: bigint; lifetimeUsd: bigint } | null;
  allowance: { perTxUsd: bigint; periodRemainingUsd: bigint; lifetimeRemainingUsd: bigint; txsRemaining: number; nextTxBlock: bigint; exposureUsd: bigint } | null;
}

export async function readAccountState(client: PublicClient, account: Address): Promise<AccountState> {
  const code = await client.getCode({ address: account });
  if (!code || code === '0x') return { deployed: false, owner: null, lane: null, paused: false, policyVersion: 0n, policyHash: null, limits: null, usage: null, allowance: null };
  const read = <T>(functionName: string) => client.readContract({ address: account, abi: agentAccountAbi, functionName: functionName as 'owner' }) as unknown as Promise<T>;
  const [owner, lane, paused, policyVersion, policyHash, limits, usage, allowance] = await Promise.all([
    read<Address>('owner'),
    read<Address>('lane'),
    read<boolean>('paused'),
    read<bigint>('policyVersion'),
    read<Hex>('policyHash'),
    read<OnchainLimits>('limits'),
    read<AccountState['usage']>('usage'),
    read<AccountState['allowance']>('allowance'),
  ]);
  return { deployed: true, owner, lane, paused, policyVersion, policyHash, limits, usage, allowance };
}

/** The owner's next EIP-712 nonce at the account (NoncesKeyed: key 0 is sequential; another key answers key << 64 | its sequence). */
export async function readOwnerNonce(client: PublicClient, account: Address, owner: Address, key = 0n): Promise<bigint> {
  const code = await client.getCode({ address: account });
  if (!code || code === '0x') return key << 64n;
  return client.readContract({ address: account, abi: agentAccountAbi, functionName: 'nonces', args: [owner, key] });
}

/** An API operation id (a UUID) as ApproveSpend's bytes32: its 16 bytes, right-padded. */
export const operationIdBytes32 = (operationId: string): Hex => `0x${operationId.replace(/-/g, '').toLowerCase().padEnd(64, '0')}` as Hex;

/** The owner nonce key of an operation's approval (NoncesKeyed): one key per operation, so approvals never queue behind other owner changes. */
export const approvalNonceKey = (operationId: Hex): bigint => BigInt(viem().keccak256(operationId)) >> 64n;

/** What `policyHash` holds for `policy` (computed here as AgentAccount's policyHashOf does). */
export function policyHashOf(policy: OnchainPolicy): Hex {
  const v = viem();
  const types = OWNER_ACTION_TYPES.SetPolicy;
  const limitsHash = v.hashStruct({ data: policy.limits as never, primaryType: 'Limits', types });
  const ruleHashes = policy.assets.map((r) => v.hashStruct({ data: r as never, primaryType: 'AssetRule', types }));
  const packed = (items: Hex[]) => v.keccak256(items.length === 0 ? '0x' : v.concat(items.map((x) => v.pad(x, { size: 32 }))));
  return v.keccak256(
    v.encodeAbiParameters(
      [{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'bytes32' }, { type: 'bytes32' }, { type: 'bytes32' }],
      [limitsHash, packed(ruleHashes), packed(policy.protocols), packed(policy.markets), packed(policy.payees)],
    ),
  );
}

/** AgentAccount's revert reasons as the API's error codes (what the database's policy would have answered). */
const ERROR_CODES: Record<string, string> = {
  AssetNotAllowed: 'asset_not_allowed',
  ProtocolNotAllowed: 'protocol_not_allowed',
  MarketNotAllowed: 'protocol_not_allowed',
  RecipientNotAllowed: 'recipient_not_allowed',
  NotTrusted: 'recipient_not_allowed',
  TimeLockNotReached: 'time_delay_not_reached',
  ChequeLocked: 'time_delay_not_reached',
  PerTxCapExceeded: 'limit_exceeded',
  PeriodCapExceeded: 'limit_exceeded',
  LifetimeCapExceeded: 'limit_exceeded',
  TooManyTransactions: 'limit_exceeded',
  CooldownActive: 'limit_exceeded',
  TooManySwaps: 'limit_exceeded',
  ApprovalRequired: 'owner_only_action',
  StalePrice: 'price_stale',
  ZeroPrice: 'price_stale',
  InsufficientOutput: 'slippage_exceeded',
  LtvExceeded: 'ltv_too_high',
  EnforcedPause: 'agent_paused',
  NotLane: 'lane_not_authorized',
  InvalidLaneSignature: 'lane_not_authorized',
  InvalidOwnerSignature: 'invalid_owner_signature',
  InvalidAccountNonce: 'invalid_owner_signature',
  SignatureExpired: 'invalid_owner_signature',
  ChequeNotPending: 'invalid_state_transition',
  ChequeUnlocked: 'invalid_state_transition',
  ChequeExpired: 'invalid_state_transition',
  BadCheque: 'validation_failed',
  InvalidLimits: 'validation_failed',
};

export interface AccountRevert {
  /** The custom error's name (AgentAccount's, or one of the OpenZeppelin errors it raises). */
  name: string;
  /** The API error code it answers. */
  code: string;
  message: string;
}

/** The AgentAccount custom error in a failed eth_call or simulation, or null when the revert is not one of its own. */
export function accountRevertOf(err: unknown): AccountRevert | null {
  const v = viem();
  let data: Hex | undefined;
  for (let e = err as { data?: unknown; cause?: unknown; walk?: unknown } | undefined; e; e = e.cause as typeof e) {
    const d = e.data;
    if (typeof d === 'string' && d.startsWith('0x') && d.length >= 10) {
      data = d as Hex;
      break;
    }
    if (d && typeof d === 'object' && typeof (d as { data?: unknown }).data === 'string') {
      data = (d as { data: Hex }).data;
      break;
    }
  }
  if (!data) {
    const m = /(0x[0-9a-fA-F]{8,})/.exec(String((err as Error)?.message ?? ''));
    if (!m) return null;
    data = m[1] as Hex;
  }
  try {
    const decoded = v.decodeErrorResult({ abi: agentAccountAbi, data });
    const code = ERROR_CODES[decoded.errorName];
    if (!code) return null;
    const args = (decoded.args ?? []).map((a) => (typeof a === 'bigint' ? a.toString() : String(a)));
    return { name: decoded.errorName, code, message: `the agent's account refused the call on chain: ${decoded.errorName}(${args.join(', ')})` };
  } catch {
    return null;
  }
}
