// Knex for Postgres (DATABASE_URL) or PGlite (embedded default); the only place a pool is built.
import knexFactory, { type Knex } from 'knex';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import pg from 'pg';
import { acquireDataDirLock } from './data-dir-lock.js';
import type { DbTimeouts } from '../config.js';
import type { Logger } from '../lib/logger.js';
import { migrationSource } from './migrations/index.js';

export type { Knex };
/** A pool or a transaction: repositories and services take either. */
export type Db = Knex | Knex.Transaction;

// NUMERIC stays a string (money is converted to bigint in code); int8 counts fit in number.
pg.types.setTypeParser(20, (v) => Number(v));

/**
 * The embedded database's buffer cache. initdb writes Postgres's 128MB default into the data directory, and in PGlite
 * that is WebAssembly memory of the API process, touched as the cache fills; the files are in the OS page cache anyway.
 * 16MB took the embedded API's RSS (no validator warm-up) from 414 MB to 285 MB (docs/ARCHITECTURE.md, footprint).
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

/** knex's logger hooks, as structured lines. */
function knexLog(log: Logger): Knex.Config['log'] {
  return {
    warn: (message: unknown) => log.warn({ component: 'knex', detail: String(message) }, 'database warning'),
    error: (message: unknown) => log.error({ component: 'knex', detail: String(message) }, 'database error'),
    deprecate: (method: unknown, alternative: unknown) => log.warn({ component: 'knex', method, alternative }, 'knex deprecation'),
    debug: (message: unknown) => log.debug({ component: 'knex', detail: message }, 'knex debug'),
  };
}

export async function createKnex(options: DbOptions): Promise<Knex> {
  if (options.databaseUrl) {
    const t = options.timeouts;
    return knexFactory({
      client: boundedPgClient(),
      connection: {
        connectionString: withoutJit(options.databaseUrl),
        ...(t
          ? {
              connectionTimeoutMillis: t.connectTimeoutMs,
              ...(t.statementTimeoutMs > 0 ? { statement_timeout: t.statementTimeoutMs } : {}),
              ...(t.queryTimeoutMs > 0 ? { query_timeout: t.queryTimeoutMs } : {}),
              // Idle pooled connections to a vanished server are noticed and discarded.
              keepAlive: true,
            }
          : {}),
      } as Knex.PgConnectionConfig,
      ...(t ? { acquireConnectionTimeout: t.acquireTimeoutMs } : {}),
      ...(options.log ? { log: knexLog(options.log) } : {}),
      pool: { min: 0, max: options.poolMax ?? 20 },
      migrations: { migrationSource },
    });
  }
  const { default: ClientPgLite } = await import('knex-pglite');
  const { PGlite } = await import('@electric-sql/pglite');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(options.dataDir, { recursive: true });
  // Every process that opens the embedded database (server, agentctl, migrate) takes the directory's lock first.
  const lock = acquireDataDirLock(options.dataDir);
  const pglite = new PGlite(`${options.dataDir}/pglite`, { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`] });
  const db = knexFactory({
    client: pgliteClient(ClientPgLite as unknown as PgLiteClientClass),
    dialect: 'postgres',
    connection: { pglite } as unknown as Knex.StaticConnectionConfig,
    ...(options.log ? { log: knexLog(options.log) } : {}),
    migrations: { migrationSource },
  });
  // knex.destroy() ends in client.destroy() (knex's own property is read-only): free the directory there.
  const client = db.client as { destroy(callback?: unknown): Promise<unknown> };
  const destroy = client.destroy.bind(client);
  client.destroy = async (callback?: unknown) => {
    try {
      return await destroy(callback);
    } finally {
      lock.release();
    }
  };
  return db;
}

/**
 * The connection URL with JIT compilation off (`options=-c jit=off`, added to any options it gives; pg reads the
 * URL's parameters over the config's own). Every statement here is short, and the generic plan of a prepared
 * statement (the policy usage sums, statementsIn) is costed over all of an agent's rows, above jit_above_cost:
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
 * Whether `db` (or a transaction of it) may send several statements in one simple-protocol query: node-postgres
 * can, PGlite's query (extended protocol) cannot.
 */
export function multiStatementQueries(db: Knex): boolean {
  return (db.client.constructor as { embedded?: boolean }).embedded !== true;
}

type PgLiteClientClass = new (config: unknown) => { processResponse(obj: { method?: string }, runner: unknown): unknown };

/**
 * knex-pglite 0.14 derives the command from knex's method name, and knex names DELETE `del`: a
 * `.delete()` then resolves to the raw result object instead of the row count (Postgres gives a
 * number), so `if (deleted === 0)` checks and polling loops that count work break. Map it back.
 */
function pgliteClient(Base: PgLiteClientClass): typeof knexFactory.Client {
  class PgLiteClient extends Base {
    /** Read by simpleQueriesAllowed. */
    static readonly embedded = true;
    override processResponse(obj: { method?: string }, runner: unknown): unknown {
      return super.processResponse(obj.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
    }
  }
  return PgLiteClient as unknown as typeof knexFactory.Client;
}

type PgDialectClass = new (config: unknown) => { _query(connection: unknown, obj: unknown): Promise<unknown> };

/** What `prepared()` marks a query with; the pg client below turns it into a named statement. */
const PREPARE_OPTION = 'agentapiPrepare';

/**
 * A hot read as a named (server-side prepared) statement: Postgres parses and plans it once per connection, and each
 * later run only binds and executes (measured here: ~0.5 ms of Postgres time per run saved on the key check). The name
 * is derived from the SQL text, so two variants of one builder (a filter present or not) are two statements. Only for
 * queries with bindings and one statement, whose text takes a bounded number of shapes; with PGlite it is a no-op.
 */
export function prepared<Q extends { options(options: Readonly<Record<string, unknown>>): Q }>(query: Q): Q {
  return query.options({ [PREPARE_OPTION]: true });
}

/** What `preparedRows` needs of knex's client: its pool and the dialect's query call (BoundedPgClient._query below). */
interface PooledClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  _query(connection: unknown, obj: { sql: string; bindings: readonly unknown[]; options: Record<string, unknown>; response?: { rows: unknown[] } }): Promise<unknown>;
}

const positional = new Map<string, string>();
/** `?` placeholders as Postgres's `$1, $2, ...` (fixed SQL of ours: no `?` operator, no `??` identifiers). */
function positionalSql(sql: string): string {
  let out = positional.get(sql);
  if (out === undefined) {
    let n = 0;
    out = sql.replace(/\?/g, () => `$${++n}`);
    if (positional.size < 1000) positional.set(sql, out);
  }
  return out;
}

/**
 * The rows of a hot read written as fixed SQL with `?` placeholders, as a named statement (`prepared`), on a pooled
 * connection without knex's builder and runner: per request that machinery cost about as much Node CPU as the
 * statement's own send and parse (issue 12, P1). Errors, timeouts and a retired prepared statement are handled as for
 * any query (the same dialect call, BoundedPgClient._query). Knex's path is kept inside a transaction (its
 * connection), on PGlite, and while anything listens to the database's query events (tracing spans, metrics of
 * statement timeouts), so those still see every statement.
 */
export async function preparedRows<R>(db: Db, sql: string, bindings: readonly Knex.RawBinding[]): Promise<R[]> {
  const knex = db as Knex;
  if ((db as Knex.Transaction).isTransaction || !multiStatementQueries(knex) || knex.listenerCount('query') + knex.listenerCount('query-error') + knex.listenerCount('query-response') > 0) {
    return ((await prepared(db.raw(sql, bindings))) as unknown as { rows: R[] }).rows;
  }
  const client = knex.client as unknown as PooledClient;
  const connection = await client.acquireConnection();
  try {
    const obj: Parameters<PooledClient['_query']>[1] = { sql: positionalSql(sql), bindings, options: { [PREPARE_OPTION]: true } };
    await client._query(connection, obj);
    return obj.response!.rows as R[];
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * A statement that a multi-statement query string runs prepared: `PREPARE name(params) AS text` once per connection,
 * then `EXECUTE name(literals)` inside the string (issue 12, P2). Every `$n` of `text` carries an explicit cast, so
 * that `literalSql` (the same text with the values in place) means the same thing where nothing is prepared.
 */
export interface SqlStatement {
  name: string;
  params: readonly string[];
  text: string;
}

/** A statement with its values (strings: each becomes a literal). */
export interface SqlCall {
  statement: SqlStatement;
  values: readonly string[];
}

/** The call as one plain statement, its values as literals (pg escapeLiteral). */
export function literalSql(call: SqlCall): string {
  return call.statement.text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = call.values[Number(n) - 1];
    if (value === undefined) throw new Error(`${call.statement.name}: no value for $${n}`);
    return pg.escapeLiteral(value);
  });
}

/** The SQL-level statements each pooled connection has PREPAREd (by name). */
const sqlPrepared = new WeakMap<object, Set<string>>();

/**
 * The statements of a transaction's multi-statement string, each as `EXECUTE` of a statement PREPAREd on the
 * transaction's connection (the first time on a connection, one round trip PREPAREs the missing ones), or as plain
 * statements with literal values where nothing can be prepared: PGlite (one statement per query) or outside a
 * transaction (no one connection). A prepared statement is parsed and planned once per connection instead of on
 * every run: the usage sums and the payees-and-price read of a payment spent ~0.35 ms of Postgres CPU planning.
 * A connection whose PREPAREs failed is retired (which of them exist is then unknown), as is one whose prepared
 * statements a migration invalidated (BoundedPgClient._query).
 */
export async function statementsIn(trx: Db, calls: readonly SqlCall[]): Promise<string[]> {
  const knex = trx as Knex;
  if (!(trx as Knex.Transaction).isTransaction || !multiStatementQueries(knex)) return calls.map(literalSql);
  const connection = (await (knex.client as unknown as PooledClient).acquireConnection()) as object;
  let names = sqlPrepared.get(connection);
  if (!names) sqlPrepared.set(connection, (names = new Set()));
  const missing = [...new Map(calls.filter((c) => !names.has(c.statement.name)).map((c) => [c.statement.name, c.statement])).values()];
  if (missing.length > 0) {
    try {
      await knex.raw(missing.map((s) => `PREPARE ${s.name}(${s.params.join(', ')}) AS ${s.text}`).join(';\n'));
    } catch (err) {
      (connection as { __knex__disposed?: unknown }).__knex__disposed = err;
      throw err;
    }
    for (const s of missing) names.add(s.name);
  }
  return calls.map((c) => `EXECUTE ${c.statement.name}(${c.values.map((v) => pg.escapeLiteral(v)).join(', ')})`);
}

const statementNames = new Map<string, string>();
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `p_${createHash('sha256').update(sql).digest('base64url').slice(0, 22)}`;
    // A bounded memo: the names of the prepared shapes (a handful), never one per request.
    if (statementNames.size < 1000) statementNames.set(sql, name);
  }
  return name;
}

/**
 * knex's pg dialect with two additions. `prepared()` queries run as named statements. And pg's `query_timeout`
 * rejects the query but leaves the connection waiting for its answer, and knex would hand that connection out again
 * (every later query on it times out too, and a transaction's ROLLBACK waits once more): destroying its socket marks
 * it disposed, so the pool drops it and a new connection is made once the database answers again.
 */
function boundedPgClient(): typeof knexFactory.Client {
  // knex's own pg dialect (no type declarations; loaded by path as knex itself does).
  const PgDialect = createRequire(import.meta.url)('knex/lib/dialects/postgres/index.js') as PgDialectClass;
  class BoundedPgClient extends PgDialect {
    override async _query(connection: unknown, obj: unknown): Promise<unknown> {
      const query = obj as { sql: string; bindings?: unknown[]; options?: Record<string, unknown> };
      let unnamed: Record<string, unknown> | undefined;
      if (query.options?.[PREPARE_OPTION]) {
        const { [PREPARE_OPTION]: _marker, ...options } = query.options;
        unnamed = options;
        query.options = query.bindings?.length ? { ...options, name: statementName(query.sql) } : options;
      }
      try {
        return await super._query(connection, obj);
      } catch (err) {
        if (err instanceof Error && err.message === 'Query read timeout') (connection as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
        // A migration changed a table under a statement this connection prepared ("cached plan must not change result
        // type", 0A000), or the session lost its statements PREPAREd in SQL (statementsIn, 26000): the connection is
        // retired (its statements with it), and the next one prepares afresh. A named statement then runs once more,
        // unnamed; an EXECUTE cannot (its transaction has failed).
        const code = (err as { code?: string }).code;
        if (code === '0A000' || code === '26000') (connection as { __knex__disposed?: unknown }).__knex__disposed = err;
        if (unnamed && code === '0A000') {
          query.options = unnamed;
          return super._query(connection, obj);
        }
        throw err;
      }
    }
  }
  return BoundedPgClient as unknown as typeof knexFactory.Client;
}

export async function migrateLatest(db: Knex): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

/** Runs `fn` in the transaction it is given, or opens one on the pool. */
export async function withTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if ((db as Knex.Transaction).isTransaction) return fn(db as Knex.Transaction);
  return (db as Knex).transaction(fn);
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
  await db.transaction(async (trx) => {
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
