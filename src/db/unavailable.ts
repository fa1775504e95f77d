// Recognises a failure to reach Postgres (as opposed to a bad query): contract §2 answers it 503.

/** SQLSTATE classes and codes meaning the server is gone, going, or cannot take us now. */
const UNAVAILABLE_SQLSTATE = [
  /^08/, // connection exception
  /^57P0[1-5]$/, // admin/crash shutdown, cannot connect now, database dropped, idle session timeout
  /^57014$/, // query_canceled: statement_timeout (DB_STATEMENT_TIMEOUT_MS)
  /^53300$/, // too_many_connections
  /^55P03$/, // lock_not_available
];

/** Node socket errors on the way to the server. */
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'EAI_AGAIN', 'ENOTFOUND']);

/** Messages of pg, knex and tarn for a lost, refused or timed-out connection (they carry no code). */
const UNAVAILABLE_MESSAGE = [
  /Connection terminated/i, // pg: "... unexpectedly", "... due to connection timeout"
  /not queryable/i, // pg: a client after a connection error
  /Query read timeout/, // pg: query_timeout (DB_QUERY_TIMEOUT_MS)
  /timeout expired/, // pg: connectionTimeoutMillis while connecting
  /Timeout acquiring a connection/, // knex: acquireConnectionTimeout (DB_ACQUIRE_TIMEOUT_MS)
];

/** True when `err` (or its cause, or one of an AggregateError's errors) says the database cannot be reached. */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (UNAVAILABLE_ERRNO.has(e.code) || (/^[0-9A-Z]{5}$/.test(e.code) && UNAVAILABLE_SQLSTATE.some((re) => re.test(e.code as string))))) return true;
  if (e.name === 'KnexTimeoutError') return true;
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.some((re) => re.test(e.message as string))) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}

/**
 * The error to answer for a transaction that failed: when it ended under its caller (its connection was lost, so
 * knex rolled it back and the next query said "Transaction query already complete"), what ended it; else `err`.
 */
export async function transactionFailure(trx: { executionPromise: Promise<unknown> }, err: unknown): Promise<unknown> {
  if (!(err instanceof Error) || !/Transaction query already complete/.test(err.message)) return err;
  const ended = await trx.executionPromise.then(
    () => null,
    (reason: unknown) => reason,
  );
  return ended ?? err;
}
