// Access-token signing keys: ES256, private halves sealed at rest, newest signs, older ones keep verifying.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as Jose from 'jose';
import type { JWK } from 'jose';
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/oauth.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import { SIGNING_ALG } from '../auth/signing-keys.js';

/** jose loads on first use (the first bearer token or key operation), not at start: ~0.8 MB of heap. */
const jose = (
  (load) => () =>
    load('jose') as typeof Jose
)(createRequire(import.meta.url));

export { loadPublicJwks, SIGNING_ALG } from '../auth/signing-keys.js';

/**
 * A retired key stops being published. A key stays published for this long after a newer key
 * replaced it: far beyond the 15-minute access-token lifetime, so every token it signed expires first.
 */
export const KEY_RETENTION_MS = 24 * 60 * 60 * 1000;

export interface SigningKey {
  kid: string;
  alg: string;
  privateJwk: JWK;
  publicJwk: JWK;
  createdAt: Date;
}

async function generateSigningKey(): Promise<{ kid: string; privateJwk: JWK; publicJwk: JWK }> {
  const { privateKey, publicKey } = await jose().generateKeyPair(SIGNING_ALG, { extractable: true });
  const kid = randomBytes(12).toString('base64url');
  const meta = { kid, alg: SIGNING_ALG, use: 'sig' };
  return { kid, privateJwk: { ...(await jose().exportJWK(privateKey)), ...meta }, publicJwk: { ...(await jose().exportJWK(publicKey)), ...meta } };
}

async function insertNewKey(db: Db, sealer: Sealer, now: Date): Promise<string> {
  const { kid, privateJwk, publicJwk } = await generateSigningKey();
  await repo.insertSigningKey(db, {
    kid,
    alg: SIGNING_ALG,
    sealed_private_jwk: sealer.seal(JSON.stringify(privateJwk)),
    public_jwk: publicJwk as Record<string, unknown>,
    created_at: now,
  });
  return kid;
}

/** Live keys, newest first; creates the first key when there is none (serialised across processes). */
export async function loadSigningKeys(db: Db, sealer: Sealer, clock: Clock): Promise<SigningKey[]> {
  let rows = await repo.listSigningKeys(db);
  if (rows.length === 0) {
    rows = await withTransaction(db, async (trx) => {
      await repo.lockSigningKeys(trx);
      const again = await repo.listSigningKeys(trx);
      if (again.length > 0) return again;
      await insertNewKey(trx, sealer, clock.now());
      return repo.listSigningKeys(trx);
    });
  }
  return rows.map((row) => ({
    kid: row.kid,
    alg: row.alg,
    privateJwk: JSON.parse(sealer.open(row.sealed_private_jwk)) as JWK,
    publicJwk: row.public_jwk as JWK,
    createdAt: new Date(row.created_at),
  }));
}

/**
 * Adds a new signing key, which signs from now on; earlier keys keep verifying. Keys that were
 * replaced more than KEY_RETENTION_MS ago are retired.
 */
export async function rotateSigningKeys(db: Db, sealer: Sealer, clock: Clock): Promise<{ kid: string; retired: string[] }> {
  return withTransaction(db, async (trx) => {
    await repo.lockSigningKeys(trx);
    const now = clock.now();
    const kid = await insertNewKey(trx, sealer, now);
    const live = await repo.listSigningKeys(trx); // newest first, including the new key
    const retired: string[] = [];
    for (let i = 1; i < live.length; i += 1) {
      const replacedAt = new Date(live[i - 1]!.created_at).getTime();
      if (now.getTime() - replacedAt > KEY_RETENTION_MS) retired.push(live[i]!.kid);
    }
    await repo.retireSigningKeys(trx, retired, now);
    return { kid, retired };
  });
}
