// Idempotency records: one row per (agent, key), written in the transaction of the effects it describes.
import type { Db } from '../knex.js';

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  fingerprint: string;
  operation_id: string;
  status_code: number;
  response_body: unknown;
  response_headers: Record<string, string>;
  created_at: Date;
  expires_at: Date;
}

/**
 * One round trip: take the transaction-scoped advisory lock on (agent, key) and, when it is ours,
 * read the live record. `locked: false` means another transaction is running the same key.
 */
export async function lockAndFindRecord(db: Db, agentId: string, key: string, now: Date): Promise<{ locked: boolean; record: IdempotencyRow | undefined }> {
  const result = await db.raw(
    `WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked)
     SELECT lock.locked, k.* FROM lock
     LEFT JOIN idempotency_keys k ON lock.locked AND k.agent_id = ? AND k.key = ? AND k.expires_at > ?`,
    [`${agentId}:${key}`, agentId, key, now],
  );
  const row = result.rows[0] as ({ locked: boolean } & Partial<IdempotencyRow>) | undefined;
  if (!row?.locked) return { locked: false, record: undefined };
  const { locked: _locked, ...record } = row;
  return { locked: true, record: record.agent_id ? (record as IdempotencyRow) : undefined };
}

export async function findLiveRecord(db: Db, agentId: string, key: string, now: Date): Promise<IdempotencyRow | undefined> {
  return db('idempotency_keys').where({ agent_id: agentId, key }).andWhere('expires_at', '>', now).first();
}

export async function upsertRecord(db: Db, row: IdempotencyRow): Promise<void> {
  await db('idempotency_keys')
    .insert({ ...row, response_body: JSON.stringify(row.response_body), response_headers: JSON.stringify(row.response_headers) })
    .onConflict(['agent_id', 'key'])
    .merge();
}

export async function deleteExpired(db: Db, now: Date, batch = 1000): Promise<number> {
  return db('idempotency_keys')
    .whereIn(['agent_id', 'key'], db('idempotency_keys').select('agent_id', 'key').where('expires_at', '<=', now).limit(batch))
    .delete();
}
