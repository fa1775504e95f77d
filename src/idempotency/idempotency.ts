// Idempotency-Key semantics (contract §5): one transaction holds the claim, the effects and the stored response.
import type { Knex } from 'knex';
import { withTransaction } from '../db/knex.js';
import type { Sql } from '../db/sql.js';
import * as repo from '../db/repositories/idempotency.repository.js';
import { conflictErrorOf, isIdempotencyKeyViolation } from '../db/unique-violation.js';
import type { Clock } from '../lib/clock.js';
import { canonicalJson, sha256Hex, type Sealer } from '../lib/crypto.js';
import { ApiError, errorBody, isApiError } from '../lib/errors.js';
import type { HandlerResult } from '../lib/contract.js';
import type { Metrics } from '../observability/metrics.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const MAX_KEY_LENGTH = 200;

export interface FingerprintInput {
  method: string;
  operationId: string;
  params: Record<string, unknown>;
  body: unknown;
}

export function fingerprint(input: FingerprintInput): string {
  return sha256Hex(canonicalJson({ method: input.method.toUpperCase(), operation: input.operationId, params: input.params, body: input.body ?? null }));
}

/** The Idempotency-Key rule, for the header and the MCP `idempotency_key` argument alike: a non-blank string of at most 200 characters. */
export const isAcceptableKey = (key: unknown): key is string => typeof key === 'string' && key.trim() !== '' && key.length <= MAX_KEY_LENGTH;

export function validateKey(key: string | undefined): string | null {
  if (key === undefined) return null;
  if (!isAcceptableKey(key)) {
    throw new ApiError('validation_failed', `Idempotency-Key must be a non-blank string of at most ${MAX_KEY_LENGTH} characters`, {
      errors: [{ location: 'header', path: 'Idempotency-Key', message: 'must be non-blank and at most 200 characters' }],
    });
  }
  return key;
}

export interface IdempotentRun {
  agentId: string;
  key: string;
  fingerprint: string;
  operationId: string;
}

export interface IdempotencyOutcome {
  result: HandlerResult;
  replayed: boolean;
}

/** Statuses that are never stored: the caller may retry with the same key. */
const isStorable = (status: number): boolean => status < 500 && status !== 429 && status !== 401;

/**
 * Responses are stored as the bytes the writer sends (`JSON.stringify` of the body, as Express's res.json
 * does), never as jsonb, which reorders keys; a replay parses them back, and JSON.stringify(JSON.parse(s))
 * reproduces s for any s JSON.stringify made, so the replayed body is byte-identical. Every record is
 * sealed with MASTER_KEY, not only those holding a secret (webhook create and rotate-secret return one):
 * no list of secret-bearing routes to keep up to date, for ~17 µs to seal and ~16 µs to open a 450-byte
 * body (measured here), beside the milliseconds of the write's round trips.
 */
export function createIdempotency(deps: { db: Knex; clock: Clock; sealer: Sealer; metrics?: Pick<Metrics, 'idempotency'> }) {
  const { sealer } = deps;
  const count = deps.metrics ? deps.metrics.idempotency : () => {};
  const storedBody = (row: repo.IdempotencyRow): unknown => (row.sealed_response !== null ? JSON.parse(sealer.open(row.sealed_response)) : row.response_body);
  const replay = (row: repo.IdempotencyRow): IdempotencyOutcome => {
    count('replayed');
    return {
      result: { status: row.status_code, body: storedBody(row), headers: { ...row.response_headers, 'X-Idempotency-Replayed': 'true' } },
      replayed: true,
    };
  };

  const check = (row: repo.IdempotencyRow, run: IdempotentRun): IdempotencyOutcome => {
    if (row.fingerprint !== run.fingerprint) {
      count('key_reuse_mismatch');
      throw new ApiError('idempotency_key_reuse_mismatch', 'This Idempotency-Key was already used with a different request (route, path parameters or body).');
    }
    return replay(row);
  };

  /**
   * Claims the key in `trx`: null when this run holds it and should execute; otherwise the answer (the replay of a
   * live record) or a throw (409 in progress, 422 fingerprint mismatch).
   */
  const claim = async (trx: Knex.Transaction, run: IdempotentRun): Promise<IdempotencyOutcome | null> => {
    const at = deps.clock.now();
    // Claim: the lock and the record in one statement (repo.claimRecord says why it sees a run that just committed).
    const { locked, claimed } = await repo.claimRecord(trx, {
      agent_id: run.agentId,
      key: run.key,
      fingerprint: run.fingerprint,
      operation_id: run.operationId,
      created_at: at,
      expires_at: new Date(at.getTime() + IDEMPOTENCY_TTL_MS),
    });
    if (!locked) {
      count('request_in_progress');
      throw new ApiError('idempotency_request_in_progress', 'A request with this Idempotency-Key is still being processed; retry shortly.');
    }
    if (claimed) return null;
    const record = await repo.findLiveRecord(trx, run.agentId, run.key, at);
    if (!record) throw new Error('the Idempotency-Key has a live record that could not be read');
    return check(record, run);
  };

  /** The statement that stores the answer on the claimed record, or drops the claim when the answer is not stored. */
  const storeStatement = (run: IdempotentRun, result: HandlerResult): Sql<never> =>
    isStorable(result.status)
      ? repo.storeResponseStatement(run.agentId, run.key, { status_code: result.status, sealed_response: sealer.seal(JSON.stringify(result.body)), response_headers: result.headers ?? {} })
      : repo.dropClaimStatement(run.agentId, run.key);

  /**
   * A thrown refusal, its effects rolled back with the claim: claims the key again and stores the refusal. Between
   * the two transactions the key was free, so a duplicate may have claimed it since: then this run answers as any
   * duplicate does (409 while it runs, its stored answer once it committed), never with a second execution of its own.
   */
  const storeRefusal = async (run: IdempotentRun, err: ApiError): Promise<IdempotencyOutcome> =>
    withTransaction(
      deps.db,
      async (trx): Promise<{ outcome: IdempotencyOutcome; last: Sql<never> | null }> => {
        const claimed = await claim(trx, run);
        if (claimed) return { outcome: claimed, last: null };
        const result: HandlerResult = { status: err.status, body: errorBody(err.code, err.message, err.details), headers: err.headers };
        return { outcome: { result, replayed: false }, last: storeStatement(run, result) };
      },
      (done) => done.last,
    ).then((done) => done.outcome);

  return {
    /**
     * Runs `execute` at most once per (agent, key). A concurrent duplicate gets 409
     * idempotency_request_in_progress at once; a later one gets the stored response.
     */
    async run(run: IdempotentRun, execute: (trx: Knex.Transaction) => Promise<HandlerResult>): Promise<IdempotencyOutcome> {
      let outcome: IdempotencyOutcome | null;
      try {
        // The answer is stored by the transaction's last statement, sent with its COMMIT (one round trip for both).
        const done = await withTransaction(
          deps.db,
          async (trx): Promise<{ outcome: IdempotencyOutcome; last: Sql<never> | null }> => {
            const claimed = await claim(trx, run);
            if (claimed) return { outcome: claimed, last: null };
            let result: HandlerResult;
            try {
              result = await execute(trx);
            } catch (err) {
              // A refusal thrown by the service: its effects must not stay. No savepoint is taken on the way in (one
              // round trip fewer for every write); the whole transaction, claim included, rolls back instead and the
              // refusal is stored in a transaction of its own (storeRefusal). Refusals that keep their effects
              // (policy rejections) are returned, not thrown, and commit below.
              // A unique violation of the handler's own rows (an e-mail, an address already taken) is its 409
              // conflict, stored like any refusal; the idempotency key's own violation cannot arise here (claimed above).
              const refusal = isApiError(err) ? err : conflictErrorOf(err);
              if (!refusal || !isStorable(refusal.status)) throw err;
              throw new ThrownRefusal(refusal);
            }
            return { outcome: { result, replayed: false }, last: storeStatement(run, result) };
          },
          (d) => d.last,
        );
        outcome = done.outcome;
      } catch (err) {
        if (err instanceof ThrownRefusal) return storeRefusal(run, err.error);
        // Backstop: the claim yields to a committed record without an error (ON CONFLICT), but a unique violation
        // on the key, should one arise, still means another run's record wins and is replayed. Told apart by the
        // constraint's name: any other unique violation is the handler's (conflictErrorOf), not a lost record.
        if (!isIdempotencyKeyViolation(err)) throw err;
        outcome = null;
      }
      if (outcome) return outcome;
      const row = await repo.findLiveRecord(deps.db, run.agentId, run.key, deps.clock.now());
      if (!row) throw new Error('the Idempotency-Key was committed by a concurrent request whose record is gone');
      return check(row, run);
    },

    async deleteExpired(): Promise<number> {
      return repo.deleteExpired(deps.db, deps.clock.now());
    },

    /** Seals records stored in plaintext before 0006 (their key order is jsonb's, the best left to keep). */
    async sealLegacyRecords(batch = 500): Promise<number> {
      const rows = await repo.findUnsealedRecords(deps.db, batch);
      for (const row of rows) await repo.storeSealedResponse(deps.db, row.agent_id, row.key, sealer.seal(JSON.stringify(row.response_body)));
      return rows.length;
    },
  };
}

/** Carries a refusal thrown by a run's effects out of its transaction, so that the transaction rolls back. */
class ThrownRefusal extends Error {
  constructor(readonly error: ApiError) {
    super(error.message);
  }
}

export type Idempotency = ReturnType<typeof createIdempotency>;
