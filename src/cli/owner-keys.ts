// agentctl and the owner's signer (issue 24): which signer a new owner registers, and the key file an owner signs
// with (--owner-key-file). On the development chain without --signer, agentctl generates the key and writes it to
// DATA_DIR/owner-keys/<owner_id>.key (mode 0600): a development convenience, refused in production.
import type { PrivateKeyAccount } from 'viem/accounts';
import { DEV_CHAIN_ID } from '../chain/dev-accounts.js';
import type { Config } from '../config.js';
import { devOwnerKeyPath, generateOwnerKey, readOwnerKeyFile, writeOwnerKeyFile } from '../lib/owner-keys.js';
import { isApiError } from '../lib/errors.js';
import type { OwnerSignature } from '../services/custody/accounts.js';
import { ApiCallError } from './client.js';
import { CliUsageError, onDatabase, optionalFlag, type CliArgs } from './types.js';
import { typedDataOf } from '../lib/typed-data-json.js';

export interface OwnerSignerPlan {
  /** The signer to register, or null (simulated chain: owners need none). */
  signer: string | null;
  /** Completes the output once the owner exists (writes a generated key under its id). */
  finish(created: Record<string, unknown>): Record<string, unknown>;
}

export async function ownerSignerPlan(config: Readonly<Config>, args: CliArgs): Promise<OwnerSignerPlan> {
  const given = optionalFlag(args, 'signer');
  if (given !== undefined) {
    if (!/^0x[0-9a-fA-F]{40}$/.test(given)) throw new CliUsageError('--signer must be a 0x EVM address');
    return { signer: given, finish: (created) => ({ ...created, signer_address: given }) };
  }
  if (!config.chain.rpcUrl) return { signer: null, finish: (created) => created };
  const { createLogger, resolveChainId } = await onDatabase();
  const chainId = await resolveChainId(config, createLogger('silent'));
  if (chainId !== DEV_CHAIN_ID)
    throw new CliUsageError(`--signer is required on chain ${chainId}: the owner keeps the key of that address (a key is generated on the development chain ${DEV_CHAIN_ID} only)`);
  if (config.nodeEnv === 'production') throw new CliUsageError('--signer is required when NODE_ENV=production (generated owner keys are a development convenience)');
  const key = generateOwnerKey();
  return {
    signer: key.address,
    finish(created) {
      const file = writeOwnerKeyFile(devOwnerKeyPath(config.dataDir, String(created.owner_id)), key.privateKey);
      return { ...created, signer_address: key.address, owner_key_file: file };
    },
  };
}

/** The owner's signer from --owner-key-file, or null when the flag is absent. */
export function ownerKeyFromArgs(args: CliArgs): PrivateKeyAccount | null {
  const file = optionalFlag(args, 'owner-key-file');
  if (file === undefined) return null;
  try {
    return readOwnerKeyFile(file);
  } catch (err) {
    throw new CliUsageError(`--owner-key-file: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * Signs an `owner_signature_required` proposal with the owner's key here (the key never leaves this machine).
 * The key must be the account's signer, and the message's verifying contract the proposal's account.
 */
export async function signProposal(key: PrivateKeyAccount, proposal: Record<string, unknown>): Promise<OwnerSignature> {
  const signer = String(proposal.signer ?? '');
  if (signer.toLowerCase() !== key.address.toLowerCase()) throw new CliUsageError(`--owner-key-file holds the key of ${key.address}, but the agent's account is owned by ${signer}`);
  const typed = proposal.typed_data as Record<string, unknown>;
  const domain = typed.domain as { verifyingContract?: string };
  if (String(domain.verifyingContract).toLowerCase() !== String(proposal.account).toLowerCase()) throw new CliUsageError("the proposal's typed data is not for the agent's account: not signed");
  const signature = await key.signTypedData(typedDataOf(typed));
  return { signature, nonce: String(proposal.nonce), deadline: String(proposal.deadline), ...(proposal.unlock_at !== undefined ? { unlock_at: String(proposal.unlock_at) } : {}) };
}

/** The proposal of an `owner_signature_required` refusal (the server's answer, or the service's error), else null. */
function proposalOf(err: unknown): Record<string, unknown> | null {
  if (err instanceof ApiCallError && err.code === 'owner_signature_required' && err.details) return err.details;
  if (isApiError(err) && err.code === 'owner_signature_required' && err.details) return err.details;
  return null;
}

/**
 * Runs `attempt` unsigned; when the change needs the owner's signature and `key` is given, signs the proposal here
 * and runs it again with the signature (the same change, so the same typed data).
 */
export async function withOwnerSignature<T>(key: PrivateKeyAccount | null, attempt: (signature?: OwnerSignature) => Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    const proposal = proposalOf(err);
    if (!proposal || !key) throw err;
    return attempt(await signProposal(key, proposal));
  }
}
