// Owner key files (issue 24): the private key of an owner's signer, kept on the owner's machine. agentctl reads one
// with --owner-key-file and signs owner changes locally; on the development chain (31337) `agentctl owner create`
// without --signer writes one under DATA_DIR/owner-keys/ (a development convenience, refused in production).
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { PrivateKeyAccount } from 'viem/accounts';
import { viemAccounts } from './viem.js';

/** Where the development owner key of `ownerId` lives. */
export const devOwnerKeyPath = (dataDir: string, ownerId: string): string => path.resolve(dataDir, 'owner-keys', `${ownerId}.key`);

/** A new secp256k1 key for an owner's signer (the key and its address). */
export function generateOwnerKey(): { privateKey: `0x${string}`; address: `0x${string}` } {
  const privateKey = viemAccounts().generatePrivateKey();
  return { privateKey, address: viemAccounts().privateKeyToAccount(privateKey).address };
}

/** Writes `privateKey` to `file` readable by its user only (mode 0600; the directory 0700). */
export function writeOwnerKeyFile(file: string, privateKey: string): string {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${privateKey}\n`, { mode: 0o600, flag: 'wx' });
  // A umask cannot widen the mode given, but an existing directory keeps its own: the file's is what matters.
  chmodSync(file, 0o600);
  return file;
}

/** The signer of an owner key file (one 0x-prefixed 32-byte hex key, whitespace around it ignored). */
export function readOwnerKeyFile(file: string): PrivateKeyAccount {
  const text = readFileSync(file, 'utf8').trim();
  if (!/^0x[0-9a-fA-F]{64}$/.test(text)) throw new Error(`${file} does not hold a 0x-prefixed 32-byte hex private key`);
  return viemAccounts().privateKeyToAccount(text as `0x${string}`);
}
