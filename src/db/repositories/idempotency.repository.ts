// Idempotency records: one row per (agent, key), written in the transaction of the effects it describes.
import type { Db } from '../knex.js';

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  fingerprint: string;
  operation_id: string;
  status_code: number;
  /** The response body exactly as sent, sealed (src/db/sealed-columns.ts); null only on records not yet sealed. */
  sealed_response: string | null;
  /** Legacy plaintext body of records written before 0006, until the cleanup loop seals them; null otherwise. */
  response_body?: unknown;
  response_headers: Record<string, string>;
  created_at: Date;
  expires_at: Date;
}

/**
 * Takes the transaction-scoped advisory lock on (agent, key), then reads the live record in a second
 * statement: under READ COMMITTED that statement's snapshot is taken after the lock, so it sees a run of
 * the same key that committed (and released the lock) just before. `locked: false` means one is running.
 */
export async function lockAndFindRecord(db: Db, agentId: string, key: string, now: Date): Promise<{ locked: boolean; record: IdempotencyRow | undefined }> {
  const result = await db.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked', [`${agentId}:${key}`]);
  if (!result.rows[0]?.locked) return { locked: false, record: undefined };
  return { locked: true, record: await findLiveRecord(db, agentId, key, now) };
}

export async function findLiveRecord(db: Db, agentId: string, key: string, now: Date): Promise<IdempotencyRow | undefined> {
  return db('idempotency_keys').where({ agent_id: agentId, key }).andWhere('expires_at', '>', now).first();
}

/**
 * Stores the record, replacing only an expired one for the same key; false when a live record exists (another
 * transaction committed this key after our look, whose snapshot could not see it): the caller must not commit.
 */
export async function upsertRecord(db: Db, row: IdempotencyRow): Promise<boolean> {
  const stored = await db('idempotency_keys')
    .insert({ ...row, response_body: null, response_headers: JSON.stringify(row.response_headers) })
    .onConflict(['agent_id', 'key'])
    .merge()
    .where('idempotency_keys.expires_at', '<=', row.created_at)
    .returning('key');
  return stored.length === 1;
}

export async function deleteExpired(db: Db, now: Date, batch = 1000): Promise<number> {
  return db('idempotency_keys')
    .whereIn(['agent_id', 'key'], db('idempotency_keys').select('agent_id', 'key').where('expires_at', '<=', now).limit(batch))
    .delete();
}

/** Records written before responses were sealed (their body is plaintext jsonb), a batch at a time. */
export async function findUnsealedRecords(db: Db, batch: number): Promise<Array<Pick<IdempotencyRow, 'agent_id' | 'key' | 'response_body'>>> {
  return db('idempotency_keys').whereNull('sealed_response').select('agent_id', 'key', 'response_body').limit(batch);
}

export async function storeSealedResponse(db: Db, agentId: string, key: string, sealedResponse: string): Promise<void> {
  await db('idempotency_keys').where({ agent_id: agentId, key }).whereNull('sealed_response').update({ sealed_response: sealedResponse, response_body: null });
}
