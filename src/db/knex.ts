// Knex for Postgres (DATABASE_URL) or PGlite (embedded default); the only place a pool is built. Hand-written SQL
// (sql.ts) runs here: `rows` (one statement), `batch` (several in one round trip), `withTransaction(..., last)`.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { acquireDataDirLock } from './data-dir-lock.js';
import type { DbTimeouts } from '../config.js';
import type { Logger } from '../lib/logger.js';
import { migrationSource } from './migrations/index.js';
import { fromNative, prepared, type Sql } from './sql.js';
import { transactionFailure } from './unavailable.js';

export type { Knex };
/** A pool or a transaction: repositories and services take either. */
export type Db = Knex | Knex.Transaction;

/**
 * The embedded database's buffer cache. initdb writes Postgres's 128MB default into the data directory, and in PGlite
 * that is WebAssembly memory of the API process, touched as the cache fills; the files are in the OS page cache anyway.
 * 16MB took the embedded API's RSS (no validator warm-up) from 414 MB to 285 MB (docs/perf/issue-12-performance.md, footprint).
 */
const PGLITE_SHARED_BUFFERS = '16MB';

export interface DbOptions {
  databaseUrl: string | null;
  dataDir: string;
  poolMax?: number;
  /** Bounds on connecting, acquiring and querying (Postgres only); knex's and pg's defaults when absent. */
  timeouts?: DbTimeouts;
  /** Where knex's own warnings go (it prints plain text to the console otherwise). */
  log?: Logger;
}

/**
 * What the statements of one database handle share, kept in knex's `userParams` (which its transactions inherit):
 * whether it is the embedded database, and the generation of the prepared statements' names (`rows`).
 */
interface StatementState {
  embedded: boolean;
  generation: number;
  /** Told of operation rows that entered a status, once their transaction committed (the operations counter). */
  operationStatus?: (entered: readonly OperationEntry[]) => void;
  /** The transaction each savepoint was opened in (savepoint/openSavepoint record it; afterCommit walks up). */
  parents: WeakMap<Knex.Transaction, Db>;
}

/** An operation row that entered `status` (inserted in it, or moved to it). */
export interface OperationEntry {
  type: string;
  status: string;
}

function stateOf(db: Db): StatementState {
  const state = (db.userParams as { statements?: StatementState } | undefined)?.statements;
  if (!state) throw new Error('a database handle without its statement state: open nested transactions with savepoint()');
  return state;
}

/**
 * A transaction's options that carry the handle's userParams (its StatementState) into the transaction it opens: knex
 * gives a transaction opened on a transaction (a savepoint) empty userParams unless its options name them.
 */
const carried = (db: Db): Knex.TransactionConfig => ({ userParams: db.userParams });

/** Runs `fn` in a savepoint of `trx` (or a transaction of the pool): released when it resolves, rolled back when it throws. */
export function savepoint<T>(db: Db, fn: (sp: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction((sp) => (stateOf(db).parents.set(sp, db), fn(sp)), carried(db));
}

/** Opens a savepoint of `trx` the caller commits or rolls back. */
export async function openSavepoint(trx: Knex.Transaction): Promise<Knex.Transaction> {
  // knex reads (config) alone as the container on a transaction: the container is given as undefined.
  const sp = await trx.transaction(undefined, carried(trx));
  stateOf(trx).parents.set(sp, trx);
  return sp;
}

/**
 * Runs `fn` once what `db` wrote is committed: at once on the pool (the statement committed itself); in a transaction
 * once its COMMIT was sent and the transaction settled (executionPromise), unless it or a savepoint on the way rolled
 * back. knex emits its documented `query` event for COMMIT and ROLLBACK (not `query-response`), and its
 * executionPromise resolves on a rollback too, so the two are read together.
 */
export function afterCommit(db: Db, fn: () => void): void {
  if (!isTransaction(db)) return fn();
  let undone = false;
  let committed = false;
  const watch = (t: Knex.Transaction, onCommit: boolean) =>
    t.on('query', (q: { sql?: string }) => {
      if (/^ROLLBACK\b/i.test(q.sql ?? '')) undone = true;
      else if (onCommit && /^COMMIT\b/i.test(q.sql ?? '')) committed = true;
    });
  const { parents } = stateOf(db);
  let trx = db as Knex.Transaction;
  for (let parent = parents.get(trx); parent && isTransaction(parent); parent = parents.get(trx)) {
    watch(trx, false);
    trx = parent as Knex.Transaction;
  }
  watch(trx, true);
  trx.executionPromise.then(
    () => void (committed && !undone && fn()),
    () => undefined,
  );
}

/** Counts operation rows that entered a status, after their transaction commits (no-op unless observed). */
export function countOperationEntries(db: Db, entered: readonly OperationEntry[]): void {
  const observe = stateOf(db).operationStatus;
  if (observe && entered.length > 0) afterCommit(db, () => observe(entered));
}

/** Sets the observer of operation status entries for this handle and its transactions (the metrics counter). */
export function observeOperationEntries(db: Knex, observe: (entered: readonly OperationEntry[]) => void): void {
  stateOf(db).operationStatus = observe;
}

/** knex's logger hooks, as structured lines. */
function knexLog(log: Logger): Knex.Config['log'] {
  return {
    warn: (message: unknown) => log.warn({ component: 'knex', detail: String(message) }, 'database warning'),
    error: (message: unknown) => log.error({ component: 'knex', detail: String(message) }, 'database error'),
    deprecate: (method: unknown, alternative: unknown) => log.warn({ component: 'knex', method, alternative }, 'knex deprecation'),
    debug: (message: unknown) => log.debug({ component: 'knex', detail: message }, 'knex debug'),
  };
}

/** The pool's type parsers: NUMERIC stays a string (money is converted to bigint in code); int8 counts fit in number. */
function typeParsers(): Knex.PgCustomTypesConfig {
  const int8 = (v: string) => Number(v);
  return { getTypeParser: (oid, format) => (oid === pg.types.builtins.INT8 ? int8 : pg.types.getTypeParser(oid, format === 'binary' ? 'binary' : 'text')) };
}

export async function createKnex(options: DbOptions): Promise<Knex> {
  if (options.databaseUrl) {
    const t = options.timeouts;
    const connection: Knex.PgConnectionConfig & { pipeline: boolean } = {
      connectionString: withoutJit(options.databaseUrl),
      // Statements sent while earlier ones run go out at once (pg's pipeline mode), answered in order: `batch` and
      // `withTransaction(..., last)` put several statements in one round trip with bound parameters. A query past
      // `query_timeout` also ends its connection in this mode (the pool drops it), instead of leaving it waiting.
      pipeline: true,
      types: typeParsers(),
      ...(t
        ? {
            connectionTimeoutMillis: t.connectTimeoutMs,
            ...(t.statementTimeoutMs > 0 ? { statement_timeout: t.statementTimeoutMs } : {}),
            ...(t.queryTimeoutMs > 0 ? { query_timeout: t.queryTimeoutMs } : {}),
            // Idle pooled connections to a vanished server are noticed and discarded.
            keepAlive: true,
          }
        : {}),
    };
    const db = knexFactory({
      client: 'pg',
      connection,
      ...(t ? { acquireConnectionTimeout: t.acquireTimeoutMs } : {}),
      ...(options.log ? { log: knexLog(options.log) } : {}),
      pool: { min: 0, max: options.poolMax ?? 20 },
      migrations: { migrationSource },
    });
    return withStatementState(db, false);
  }
  const { default: ClientPgLite } = await import('knex-pglite');
  const { PGlite } = await import('@electric-sql/pglite');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(options.dataDir, { recursive: true });
  // Every process that opens the embedded database (server, agentctl, migrate) takes the directory's lock first.
  const lock = acquireDataDirLock(options.dataDir);
  const pglite = new PGlite(`${options.dataDir}/pglite`, { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`] });
  /** knex-pglite's client, freeing the directory when the database is destroyed (knex.destroy() ends in client.destroy()). */
  class EmbeddedClient extends ClientPgLite {
    override async destroy(callback?: unknown): Promise<void> {
      try {
        await super.destroy(callback);
      } finally {
        lock.release();
      }
    }
  }
  const connection: Knex.PgConnectionConfig & { pglite: typeof pglite } = { pglite };
  const db = knexFactory({
    client: EmbeddedClient,
    dialect: 'postgres',
    connection,
    ...(options.log ? { log: knexLog(options.log) } : {}),
    migrations: { migrationSource },
    // knex-pglite 0.14 derives the command from knex's method name, and knex names DELETE `del`: a `.delete()` then
    // resolves to the raw result (command 'DEL') instead of the row count Postgres gives. Give the count.
    postProcessResponse: (result: unknown) => (isDelResult(result) ? result.rowCount : result),
  });
  return withStatementState(db, true);
}

/** Sets the handle's StatementState (knex's documented userParams, which its transactions inherit). */
function withStatementState(db: Knex, embedded: boolean): Knex {
  const statements: StatementState = { embedded, generation: 0, parents: new WeakMap() };
  db.userParams = { ...db.userParams, statements };
  return db;
}

function isDelResult(result: unknown): result is { command: 'DEL'; rowCount: number } {
  return typeof result === 'object' && result !== null && !Array.isArray(result) && (result as { command?: unknown }).command === 'DEL';
}

/**
 * The connection URL with JIT compilation off (`options=-c jit=off`, added to any options it gives; pg reads the
 * URL's parameters over the config's own). Every statement here is short, and the generic plan of a prepared
 * statement (the policy usage sums) is costed over all of an agent's rows, above jit_above_cost:
 * compiling it took ~12 ms of a 0.1 ms execution on every payment once 1,000,000 operations were stored (issue 12).
 */
function withoutJit(databaseUrl: string): string {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return databaseUrl;
  }
  url.searchParams.set('options', [url.searchParams.get('options'), '-c jit=off'].filter(Boolean).join(' '));
  return url.toString();
}

/**
 * Whether `db` (or a transaction of it) is the embedded database: one connection, no pipelining, each statement of a
 * batch sent after the one before.
 */
export function isEmbedded(db: Db): boolean {
  return stateOf(db).embedded;
}

/** The rows of a statement. */
type RowsOf<S> = S extends Sql<infer R> ? R[] : never;

/**
 * The statement as a knex raw query: `$n` parameters become knex's `?` bindings (a literal `?` of the text is escaped),
 * and a named statement gets the name pg prepares it under on each connection (knex hands its options to pg's query).
 */
function rawOf(db: Db, statement: Sql<unknown>, generation: number): Knex.Raw {
  const bindings: Knex.RawBinding[] = [];
  const text = statement.text.replace(/\?/g, '\\?').replace(/\$(\d+)/g, (_, n: string) => {
    bindings.push(statement.values[Number(n) - 1] as Knex.RawBinding);
    return '?';
  });
  const raw = db.raw(text, bindings);
  if (!statement.name || stateOf(db).embedded) return raw;
  return raw.options({ name: generation === 0 ? statement.name : `${statement.name}_${generation}` });
}

/**
 * After a named statement failed because a connection's prepared statement went stale (a migration changed a table
 * under it: "cached plan must not change result type", 0A000) or is gone (DEALLOCATE, 26000): every connection
 * prepares its statements afresh under new names from now on (the next generation), and the failed call may run once
 * more. Returns whether `err` was that.
 */
function renamedAfter(db: Db, statement: Sql<unknown>, generation: number, err: unknown): boolean {
  const code = (err as { code?: string }).code;
  if (!statement.name || (code !== '0A000' && code !== '26000')) return false;
  const state = stateOf(db);
  if (state.generation === generation) state.generation += 1;
  return true;
}

const isTransaction = (db: Db): boolean => (db as Knex.Transaction).isTransaction === true;

/**
 * The rows of one statement. A named statement that failed on a stale prepared statement runs once more under its new
 * name outside a transaction; inside one, the transaction has failed and the error is the caller's.
 */
export async function rows<S extends Sql<unknown>>(db: Db, statement: S): Promise<RowsOf<S>> {
  const generation = stateOf(db).generation;
  try {
    return (await rawOf(db, statement, generation)).rows;
  } catch (err) {
    if (!renamedAfter(db, statement, generation, err) || isTransaction(db)) throw err;
    return (await rawOf(db, statement, stateOf(db).generation)).rows;
  }
}

/** The rows of a knex builder query (an ordinary query of a hot read), run as a named statement its compiled text names. */
export async function preparedRows<R>(db: Db, query: Knex.QueryBuilder): Promise<R[]> {
  return rows(db, prepared(fromNative<R>(query.toSQL().toNative())));
}

/**
 * Sends `statements` on the transaction's connection in order, each handed to pg (knex's documented `query` event,
 * fired as the statement goes to the driver) before the next starts, then `after()` (the COMMIT); resolves to each
 * statement's rows. On the pipelined connection they leave together: one round trip.
 */
async function sendInOrder(trx: Knex.Transaction, statements: readonly Sql<unknown>[], after?: () => Promise<unknown>): Promise<unknown[][]> {
  const generation = stateOf(trx).generation;
  const pending: Promise<unknown[]>[] = [];
  for (const statement of statements) {
    const raw = rawOf(trx, statement, generation);
    const handed = new Promise<void>((resolve) => raw.on('query', () => resolve()));
    const result = Promise.resolve(raw).then(
      (r: { rows: unknown[] }) => r.rows,
      (err: unknown) => {
        renamedAfter(trx, statement, generation, err);
        throw err;
      },
    );
    pending.push(result);
    await Promise.race([handed, result.then(noop, noop)]);
  }
  const all = Promise.all(pending);
  if (after) await Promise.all([all, after()]);
  return all;
}

const noop = (): void => undefined;

/**
 * Several statements in ONE round trip, in order, each still a statement of its own (under read committed each takes
 * its snapshot when it starts, after the one before has finished): the explicit batch. In a transaction, they are
 * statements of it; on the pool, they run in a transaction of their own, sent with its COMMIT (BEGIN, then one round
 * trip). Bound parameters and named statements as with `rows`. The embedded database runs them one after the other.
 */
export async function batch<const S extends readonly Sql<unknown>[]>(db: Db, statements: S): Promise<{ -readonly [K in keyof S]: RowsOf<S[K]> }> {
  type Result = { -readonly [K in keyof S]: RowsOf<S[K]> };
  if (isTransaction(db)) return (await sendInOrder(db as Knex.Transaction, statements)) as Result;
  const trx = await (db as Knex).transaction();
  try {
    return (await sendInOrder(trx, statements, () => trx.commit())) as Result;
  } catch (err) {
    if (!trx.isCompleted()) await trx.rollback();
    throw await transactionFailure(trx, err);
  }
}

export async function migrateLatest(db: Knex): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

/**
 * Runs `fn` in the transaction it is given, or opens one on the pool. `last(value)`, when it gives a statement, is
 * the transaction's last: in a transaction opened here it is sent with the COMMIT, in one round trip (a failure of
 * it rolls the transaction back, and is thrown).
 */
export async function withTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>, last?: (value: T) => Sql<unknown> | null): Promise<T> {
  if (isTransaction(db)) {
    const trx = db as Knex.Transaction;
    const value = await fn(trx);
    const statement = last?.(value);
    if (statement) await rows(trx, statement);
    return value;
  }
  if (!last) return (db as Knex).transaction(fn);
  const trx = await (db as Knex).transaction();
  try {
    const value = await fn(trx);
    const statement = last(value);
    if (statement) await sendInOrder(trx, [statement], () => trx.commit());
    else await trx.commit();
    return value;
  } catch (err) {
    if (!trx.isCompleted()) await trx.rollback();
    throw await transactionFailure(trx, err);
  }
}

/** An outcome as a value: what a function returned, or what it threw. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * A dry run: runs `fn` in a transaction (a savepoint inside one it is given) that is always rolled
 * back, and returns what `fn` returned or threw as a value. Only a failure to open or roll back the
 * transaction itself is thrown.
 */
export async function rollbackAfter<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<Settled<T>> {
  let settled: Settled<T> | undefined;
  await savepoint(db, async (trx) => {
    try {
      settled = { ok: true, value: await fn(trx) };
    } catch (error) {
      settled = { ok: false, error };
    }
    // knex resolves (does not reject) a transaction rolled back without an error.
    if (!trx.isCompleted()) await trx.rollback();
  });
  return settled!;
}

/**
 * Runs `fn` in a read-only transaction (`BEGIN TRANSACTION READ ONLY`: Postgres refuses any write in it). Inside a
 * transaction it is given, a savepoint always rolled back (a transaction cannot turn read-only once it has run a
 * statement), so nothing it did survives either way.
 */
export async function readOnlyTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if (!isTransaction(db)) return (db as Knex).transaction(fn, { readOnly: true, userParams: db.userParams });
  const settled = await rollbackAfter(db, fn);
  if (!settled.ok) throw settled.error;
  return settled.value;
}
