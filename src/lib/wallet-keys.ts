// Wallet keys: a real secp256k1 key per wallet (viem), sealed at rest with AES-256-GCM under the master key.
import type { PrivateKeyAccount } from 'viem/accounts';
import { viemAccounts } from './viem.js';
import type { Sealer } from './crypto.js';

export interface GeneratedWalletKey {
  /** EIP-55 checksummed address: the wallet's public address. */
  address: string;
  sealedPrivateKey: string;
}

export function generateWalletKey(sealer: Sealer): GeneratedWalletKey {
  const privateKey = viemAccounts().generatePrivateKey();
  const account = viemAccounts().privateKeyToAccount(privateKey);
  return { address: account.address, sealedPrivateKey: sealer.seal(privateKey) };
}

/** Opens a sealed key into a local viem account (signing stays in-process; no RPC). */
export function openWalletAccount(sealer: Sealer, sealedPrivateKey: string): PrivateKeyAccount {
  const privateKey = sealer.open(sealedPrivateKey);
  if (!/^0x[0-9a-f]{64}$/i.test(privateKey)) throw new Error('sealed wallet key is malformed');
  return viemAccounts().privateKeyToAccount(privateKey as `0x${string}`);
}

export const isEvmAddress = (value: unknown): value is string => typeof value === 'string' && /^0x[0-9a-fA-F]{40}$/.test(value);
