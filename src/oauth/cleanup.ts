// Background cleanup of expired OAuth artefacts, old one-time login codes and old throttle windows.
import type { Db } from '../db/knex.js';
import { deleteExpiredModels, deleteOldLoginCodes, deleteOldThrottles } from '../db/repositories/oauth.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import { createPollingLoop, type WorkerLoop } from '../worker.js';
import { sealLegacySecrets } from './adapter.js';

/** Rows are kept a day past expiry: the provider checks expiry itself, and a consumed refresh token must stay recognisable as a replay meanwhile. */
const GRACE_MS = 24 * 60 * 60 * 1000;

export async function deleteExpiredOAuthRows(db: Db, clock: Clock): Promise<number> {
  const cutoff = new Date(clock.now().getTime() - GRACE_MS);
  const models = await deleteExpiredModels(db, cutoff, 1000);
  const throttles = await deleteOldThrottles(db, cutoff);
  const codes = await deleteOldLoginCodes(db, cutoff);
  return models + throttles + codes;
}

export function createOAuthCleanupLoop(deps: { db: Db; clock: Clock; log: Logger; sealer: Sealer }): WorkerLoop {
  return createPollingLoop('oauth-cleanup', async () => (await sealLegacySecrets(deps.db, deps.sealer)) + (await deleteExpiredOAuthRows(deps.db, deps.clock)), { idleMs: 60_000, log: deps.log });
}
