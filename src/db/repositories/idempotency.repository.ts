// Idempotency records: one row per (agent, key), written in the transaction of the effects it describes.
import { rows, type Db } from '../knex.js';
import { prepared, sql, type Sql } from '../sql.js';

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
 * Claims (agent, key) in one statement: the transaction-scoped advisory lock on the pair, then, only when it was
 * taken, an insert of the record with a placeholder response (status 0) that replaces an expired record of the
 * key and yields to a live one. The conflict check reads the latest committed row whatever the statement's
 * snapshot, so a run of the same key that committed (and released the lock) a moment before is seen.
 * `locked: false`: one is running. `claimed: false` (locked): a live record exists, read it with findLiveRecord.
 * The placeholder is never visible to others: the transaction stores the response (storeResponseStatement) or drops the
 * claim (dropClaimStatement) with its commit, and a rollback removes it.
 */
export async function claimRecord(
  db: Db,
  claim: Pick<IdempotencyRow, 'agent_id' | 'key' | 'fingerprint' | 'operation_id' | 'created_at' | 'expires_at'>,
): Promise<{ locked: boolean; claimed: boolean }> {
  const [row] = await rows(
    db,
    prepared(
      sql<{ locked: boolean; claimed: boolean }>`WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtextextended(${`${claim.agent_id}:${claim.key}`}, 0)) AS locked),
     claimed AS (
       INSERT INTO idempotency_keys (agent_id, key, fingerprint, operation_id, status_code, sealed_response, response_body, response_headers, created_at, expires_at)
       SELECT ${claim.agent_id}, ${claim.key}, ${claim.fingerprint}, ${claim.operation_id}, 0, NULL, NULL, '{}'::jsonb, ${claim.created_at}, ${claim.expires_at} FROM lock WHERE lock.locked
       ON CONFLICT (agent_id, key) DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, operation_id = EXCLUDED.operation_id, status_code = 0, sealed_response = NULL, response_body = NULL,
             response_headers = '{}'::jsonb, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
         WHERE idempotency_keys.expires_at <= EXCLUDED.created_at
       RETURNING 1
     )
     SELECT (SELECT locked FROM lock) AS locked, EXISTS (SELECT 1 FROM claimed) AS claimed`,
      'agentapi_idempotency_claim',
    ),
  );
  return { locked: row?.locked === true, claimed: row?.claimed === true };
}

/**
 * The statement that stores the answer on the record this transaction claimed: the idempotency layer sends it as the
 * transaction's last, with the COMMIT (knex.ts withTransaction), so storing the answer costs no round trip of its own.
 */
export function storeResponseStatement(agentId: string, key: string, response: Pick<IdempotencyRow, 'status_code' | 'sealed_response' | 'response_headers'>): Sql<never> {
  return prepared(
    sql<never>`UPDATE idempotency_keys SET status_code = ${response.status_code}, sealed_response = ${response.sealed_response}, response_headers = ${JSON.stringify(response.response_headers)}::jsonb
      WHERE agent_id = ${agentId} AND key = ${key}`,
    'agentapi_idempotency_store',
  );
}

/** The statement that drops the claim of a run whose answer is not stored (5xx, 429, 401), so the key may be retried. */
export function dropClaimStatement(agentId: string, key: string): Sql<never> {
  return sql<never>`DELETE FROM idempotency_keys WHERE agent_id = ${agentId} AND key = ${key} AND status_code = 0`;
}

export async function findLiveRecord(db: Db, agentId: string, key: string, now: Date): Promise<IdempotencyRow | undefined> {
  return db('idempotency_keys').where({ agent_id: agentId, key }).andWhere('expires_at', '>', now).first();
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
