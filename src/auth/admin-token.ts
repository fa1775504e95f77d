// The operator's admin token: ADMIN_TOKEN from configuration, or on the embedded default a token
// generated at first start into DATA_DIR/admin-token (mode 0600), which agentctl reads back.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';

export const ADMIN_TOKEN_FILE = 'admin-token';

export function adminTokenPath(dataDir: string): string {
  return join(dataDir, ADMIN_TOKEN_FILE);
}

/** The token in DATA_DIR/admin-token, or null when there is none. */
export function readAdminTokenFile(dataDir: string): string | null {
  try {
    const token = readFileSync(adminTokenPath(dataDir), 'utf8').trim();
    return token === '' ? null : token;
  } catch {
    return null;
  }
}

/**
 * The admin token the server accepts: ADMIN_TOKEN when set; else, on the embedded default outside
 * production, the one in DATA_DIR/admin-token (created with mode 0600 when missing); else null
 * (the /v1/admin routes are off).
 */
export function resolveAdminToken(config: Readonly<Pick<Config, 'adminToken' | 'databaseUrl' | 'dataDir' | 'nodeEnv'>>): string | null {
  if (config.adminToken) return config.adminToken;
  if (config.databaseUrl || config.nodeEnv === 'production') return null;
  const existing = readAdminTokenFile(config.dataDir);
  if (existing) return existing;
  const token = `adm_${randomBytes(32).toString('base64url')}`;
  mkdirSync(config.dataDir, { recursive: true });
  // `wx`: never overwrite a token another process wrote in the meantime.
  try {
    writeFileSync(adminTokenPath(config.dataDir), `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch {
    return readAdminTokenFile(config.dataDir);
  }
  chmodSync(adminTokenPath(config.dataDir), 0o600);
  return token;
}
