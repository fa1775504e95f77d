// Agent accounts, the service (issue 24, docs/CUSTODY.md). In evm mode with the factory deployed, a new agent's
// wallet is an AgentAccount owned by its owner's signer; the server keeps only the lane key (sealed as wallet keys
// are). Every owner change of the agent (policy, trusted destination, cheque cancel, pause, resume, lane rotation)
// is an EIP-712 message the owner's signer signs: `propose` answers the typed data, `apply` checks the signature,
// relays it (the relayer pays the gas) and the caller mirrors the result in the database. On the development chain
// an owner registered without a signer gets a generated key in DATA_DIR/owner-keys/ that the server signs with: a
// development convenience, refused in production.
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  accountSalt,
  approvalNonceKey,
  ownerActionCallData,
  ownerTypedData,
  predictAccountAddress,
  signOwnerAction,
  typedDataJson,
  verifyOwnerSignature,
  type AccountState,
  type OwnerAction,
  type OwnerAuth,
} from '../../chain/accounts.js';
import { createChainClient } from '../../chain/connect.js';
import { DEV_CHAIN_ID } from '../../chain/dev-accounts.js';
import type { Address, Chain, Hex } from '../../chain/port.js';
import type { Config } from '../../config.js';
import type { Db, Knex } from '../../db/knex.js';
import { findOwner } from '../../db/repositories/agent.repository.js';
import * as repo from '../../db/repositories/custody.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Sealer } from '../../lib/crypto.js';
import { ApiError, type ErrorCode } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { devOwnerKeyPath, generateOwnerKey, readOwnerKeyFile, writeOwnerKeyFile } from '../../lib/owner-keys.js';
import { viem, viemAccounts } from '../../lib/viem.js';
import { generateWalletKey } from '../../lib/wallet-keys.js';
import type { AgentCreatedHook } from '../agent.service.js';

/** An owner change waiting for its signature: the typed data to sign and what to send back with the signature. */
export interface Proposal {
  account: Address;
  signer: Address;
  nonce: string;
  deadline: string;
  /** A trusted destination's unlock time as proposed (Unix seconds): the signed message holds it. */
  unlock_at?: string;
  typed_data: Record<string, unknown>;
}

/** The owner's signature as the owner API and agentctl send it back (nonce and deadline from the proposal). */
export interface OwnerSignature {
  signature: Hex;
  nonce: string | number | bigint;
  deadline: string | number | bigint;
  /** A trusted destination's unlock time from the proposal (Unix seconds). */
  unlock_at?: string;
}

export interface CustodyService {
  /** Registered on onAgentCreated in evm mode: the new wallet becomes an account (when the factory is deployed). */
  assignAccount: AgentCreatedHook;
  /** The agent's account wallet, or undefined (the simulated chain, or a wallet created before accounts). */
  account(db: Db, agentId: string): Promise<repo.AccountWalletRow | undefined>;
  state(account: string): Promise<AccountState>;
  /** The typed data of `change` for the owner's signer (nonce read from the account, deadline in an hour). */
  propose(db: Db, agentId: string, change: OwnerAction): Promise<Proposal>;
  /**
   * Checks and relays the owner's signed `change` (deploying the account first if needed) and waits for it to be
   * mined; without `signature`, signs with the development owner key when there is one, else throws
   * `owner_signature_required` (428) whose details are the proposal: the caller changed nothing yet, and the
   * owner's wallet signs `typed_data` and sends the same request again with the signature.
   */
  apply(db: Knex, agentId: string, change: OwnerAction, signature?: OwnerSignature, opts?: { beforeRelay?: () => Promise<void> }): Promise<{ tx_hash: Hex }>;
  /**
   * Hands the agent's account to the owner's passkey (issue 27): `transferOwnership` to the passkey's PasskeyOwner
   * (contracts/PasskeyOwner.sol), signed by the account's current owner, with the passkey's signer deployed before it
   * is relayed; the wallet then mirrors that signer. Without `signature`: 428 with the proposal (as `apply`).
   */
  handToPasskey(db: Knex, agentId: string, passkey: { id: string; qx: Hex; qy: Hex }, signature?: OwnerSignature): Promise<{ owner_signer: Address; tx_hash: Hex }>;
  /** Whether a change of this agent can be signed here without the owner's signature (the development owner key). */
  canSignLocally(db: Db, agentId: string): Promise<boolean>;
  /** The lane key a rotation would install: generated once and kept sealed until the rotation is applied. */
  pendingLane(db: Db, agentId: string): Promise<Address>;
  /** After a relayed RotateLane: the pending key becomes the wallet's lane key. */
  completeRotation(db: Db, agentId: string, newLane: Address): Promise<void>;
  /**
   * The owner's pause or resume of the agent's account (agent disable and enable in evm mode): relayed unless the
   * account is already in that state; null when the wallet is not an account (nothing on chain to do).
   */
  setPaused(db: Knex, agentId: string, paused: boolean, signature?: OwnerSignature): Promise<{ tx_hash: Hex | null } | null>;
  /** Replaces the lane key with a new sealed one (RotateLane signed by the owner); the old key's calls revert. */
  rotateLane(db: Knex, agentId: string, signature?: OwnerSignature): Promise<{ previous_lane_address: Address; lane_address: Address; tx_hash: Hex }>;
}

/** The body's `owner_signature`, if any (the OpenAPI document checked its shape). */
export const ownerSignatureOf = (body: unknown): OwnerSignature | undefined => {
  const sig = body && typeof body === 'object' ? (body as { owner_signature?: unknown }).owner_signature : undefined;
  return sig && typeof sig === 'object' ? (sig as OwnerSignature) : undefined;
};

/** The owner nonce key of a change: an approval's own (one per operation), else 0 (sequential). */
const nonceKeyOf = (change: OwnerAction): bigint => (change.kind === 'approve_spend' ? approvalNonceKey(change.operationId) : 0n);

/** How long a proposal can be signed for (its deadline), in seconds. */
export const DEADLINE_SECONDS = 3600;

/** Chain refusals as the API's error codes (some of the account's have no API code of their own). */
export function apiCodeOf(code: string): ErrorCode {
  const map: Record<string, ErrorCode> = {
    invalid_owner_signature: 'validation_failed',
    agent_paused: 'agent_disabled',
    lane_not_authorized: 'permission_not_granted',
    execution_reverted: 'invalid_state_transition',
  };
  return (map[code] ?? code) as ErrorCode;
}

export function createCustodyService(deps: { config: Readonly<Config>; chain: Chain; sealer: Sealer; clock: Clock; log?: Logger }): CustodyService {
  const { chain, sealer, clock, config } = deps;
  const port = chain.custody!;
  const client = createChainClient(config.chain.rpcUrl!, chain.chainId, config.chain.pollMs);
  const devChain = chain.chainId === DEV_CHAIN_ID && config.nodeEnv !== 'production';
  /**
   * The lane key a rotation installs: derived from MASTER_KEY, the agent and its current lane, so the proposal and
   * the signed request name the same key although an unsigned request (428) commits nothing. Whoever can derive it
   * holds MASTER_KEY, which opens every sealed lane key anyway; after a compromise, rotate MASTER_KEY first.
   */
  async function nextLaneKey(db: Db, agentId: string): Promise<{ address: Address; privateKey: Hex }> {
    const acct = await requireAccount(db, agentId);
    const privateKey = `0x${createHmac('sha256', config.masterKey).update(`agent-api:lane-rotation:${agentId}:${acct.lane_address.toLowerCase()}`).digest('hex')}` as Hex;
    return { address: viem().getAddress(viemAccounts().privateKeyToAccount(privateKey).address) as Address, privateKey };
  }

  async function requireAccount(db: Db, agentId: string): Promise<repo.AccountWalletRow & { signer_address: string }> {
    const acct = await repo.findAccountWallet(db, agentId);
    if (!acct) throw new ApiError('invalid_state_transition', "the agent's wallet is not an agent account (simulated chain, or created before accounts)");
    if (!acct.signer_address) throw new ApiError('invalid_state_transition', "the agent's owner has no signer registered");
    return acct as repo.AccountWalletRow & { signer_address: string };
  }

  function devSigner(ownerId: string) {
    if (!devChain) return null;
    const file = devOwnerKeyPath(config.dataDir, ownerId);
    return existsSync(file) ? readOwnerKeyFile(file) : null;
  }

  const service: CustodyService = {
    async assignAccount(db, created) {
      const contracts = await port.contracts(db);
      if (!contracts) {
        // No factory on this chain: the wallet keeps a key of its own (database enforcement only).
        const key = generateWalletKey(sealer);
        await db('wallets').where({ id: created.walletId }).update({ address: key.address, sealed_private_key: key.sealedPrivateKey });
        deps.log?.warn({ agent_id: created.agentId }, 'no agent account factory on this chain: the wallet is a key the server holds');
        return;
      }
      const owner = await findOwner(db, created.ownerId);
      let signer = owner?.signer_address ?? null;
      if (!signer) {
        if (!devChain) throw new ApiError('validation_failed', `the owner has no signer: register one (agentctl owner create --signer 0xADDRESS) before creating agents on chain ${chain.chainId}`);
        // Development chain: the owner's key is generated into DATA_DIR/owner-keys/ (kept if already there).
        const file = devOwnerKeyPath(config.dataDir, created.ownerId);
        if (existsSync(file)) signer = readOwnerKeyFile(file).address;
        else {
          const key = generateOwnerKey();
          writeOwnerKeyFile(file, key.privateKey);
          signer = key.address;
        }
        await repo.setOwnerSigner(db, created.ownerId, signer);
      }
      const lane = generateWalletKey(sealer);
      const address = await predictAccountAddress(client, contracts.factory, viem().getAddress(signer), lane.address as Address, accountSalt(created.agentId));
      await repo.setWalletAccount(db, created.walletId, address, lane.address, lane.sealedPrivateKey);
    },

    account: (db, agentId) => repo.findAccountWallet(db, agentId),

    state: (account) => port.state(viem().getAddress(account)),

    async propose(db, agentId, change) {
      const acct = await requireAccount(db, agentId);
      const account = viem().getAddress(acct.address);
      const signer = viem().getAddress(acct.signer_address);
      const nonce = await port.ownerNonce(account, signer, nonceKeyOf(change));
      const deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + DEADLINE_SECONDS);
      const unlock = change.kind === 'add_trusted_destination' ? { unlock_at: change.unlockAt.toString() } : {};
      return { account, signer, nonce: nonce.toString(), deadline: deadline.toString(), ...unlock, typed_data: typedDataJson(ownerTypedData(chain.chainId, account, change, nonce, deadline)) };
    },

    async canSignLocally(db, agentId) {
      const acct = await repo.findAccountWallet(db, agentId);
      if (!acct?.signer_address) return false;
      const key = devSigner(acct.owner_id);
      return key !== null && key.address.toLowerCase() === acct.signer_address.toLowerCase();
    },

    async apply(db, agentId, change, given, opts) {
      const acct = await requireAccount(db, agentId);
      const account = viem().getAddress(acct.address);
      const signer = viem().getAddress(acct.signer_address);
      let auth: OwnerAuth;
      const data = (nonce: bigint, deadline: bigint) => ownerTypedData(chain.chainId, account, change, nonce, deadline);
      if (given) {
        auth = { signature: given.signature, nonce: BigInt(given.nonce), deadline: BigInt(given.deadline) };
      } else {
        const key = devSigner(acct.owner_id);
        if (!key || key.address.toLowerCase() !== signer.toLowerCase()) {
          const proposal = await service.propose(db, agentId, change);
          throw new ApiError(
            'owner_signature_required',
            `this change must be signed by the owner's signer ${signer}: sign details.typed_data (EIP-712) and send the request again with owner_signature {signature, nonce, deadline} (agentctl: --owner-key-file FILE)`,
            proposal as unknown as Record<string, unknown>,
          );
        }
        const nonce = await port.ownerNonce(account, signer, nonceKeyOf(change));
        const deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + DEADLINE_SECONDS);
        auth = { signature: await signOwnerAction(key, data(nonce, deadline)), nonce, deadline };
      }
      // Checked here first (a friendly refusal); the account checks it again, and its nonce makes it single use.
      // A contract signer (a passkey's PasskeyOwner) answers ERC-1271 on chain.
      if (!(await verifyOwnerSignature(client, signer, data(auth.nonce, auth.deadline), auth.signature)))
        throw new ApiError('validation_failed', `the signature is not ${signer}'s over this change (nonce ${auth.nonce}, deadline ${auth.deadline})`);
      // Deployed only for a signed change (an unsigned proposal costs the relayer nothing).
      await port.ensureDeployed(db, { address: account, owner: signer, firstLane: viem().getAddress(acct.lane_address), salt: accountSalt(agentId) });
      await opts?.beforeRelay?.();
      const sent = await port.sendNow(db, account, ownerActionCallData(change, auth), 'owner');
      if (!sent.ok) throw new ApiError(apiCodeOf(sent.code), sent.message, { chain_code: sent.code, tx_hash: sent.txHash });
      return { tx_hash: sent.txHash };
    },

    async handToPasskey(db, agentId, passkey, signature) {
      const acct = await requireAccount(db, agentId);
      const key = { qx: passkey.qx, qy: passkey.qy };
      const newOwner = viem().getAddress(await port.passkeySigner(db, key, false)) as Address;
      if (viem().isAddressEqual(newOwner, viem().getAddress(acct.signer_address))) throw new ApiError('invalid_state_transition', `the account is already owned by this passkey's signer ${newOwner}`);
      // The passkey's signer is deployed once the current owner's signature checked out, before the transfer.
      const { tx_hash } = await service.apply(db, agentId, { kind: 'transfer_ownership', newOwner }, signature, { beforeRelay: async () => void (await port.passkeySigner(db, key, true)) });
      await repo.setWalletSigner(db, acct.wallet_id, newOwner, passkey.id);
      return { owner_signer: newOwner, tx_hash };
    },

    async pendingLane(db, agentId) {
      return (await nextLaneKey(db, agentId)).address;
    },

    async completeRotation(db, agentId, newLane) {
      const acct = await requireAccount(db, agentId);
      const next = await nextLaneKey(db, agentId);
      if (next.address !== newLane) throw new Error(`the lane key to install (${newLane}) is not the agent's next one (${next.address})`);
      await repo.setWalletLane(db, acct.wallet_id, next.address, sealer.seal(next.privateKey));
    },

    async setPaused(db, agentId, paused, signature) {
      const acct = await repo.findAccountWallet(db, agentId);
      if (!acct) return null;
      const state = await port.state(viem().getAddress(acct.address));
      if (state.deployed && state.paused === paused) return { tx_hash: null };
      return service.apply(db, agentId, paused ? { kind: 'pause' } : { kind: 'resume' }, signature);
    },

    async rotateLane(db, agentId, signature) {
      const acct = await requireAccount(db, agentId);
      const newLane = await service.pendingLane(db, agentId);
      const { tx_hash } = await service.apply(db, agentId, { kind: 'rotate_lane', newLane }, signature);
      await service.completeRotation(db, agentId, newLane);
      return { previous_lane_address: viem().getAddress(acct.lane_address), lane_address: newLane, tx_hash };
    },
  };
  return service;
}
