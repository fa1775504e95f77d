// Knex for Postgres (DATABASE_URL) or PGlite (embedded default); the only place a pool is built.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { acquireDataDirLock } from './data-dir-lock.js';
import { migrationSource } from './migrations/index.js';

export type { Knex };
/** A pool or a transaction: repositories and services take either. */
export type Db = Knex | Knex.Transaction;

// NUMERIC stays a string (money is converted to bigint in code); int8 counts fit in number.
pg.types.setTypeParser(20, (v) => Number(v));

export interface DbOptions {
  databaseUrl: string | null;
  dataDir: string;
  poolMax?: number;
}

export async function createKnex(options: DbOptions): Promise<Knex> {
  if (options.databaseUrl) {
    return knexFactory({
      client: 'pg',
      connection: options.databaseUrl,
      pool: { min: 0, max: options.poolMax ?? 20 },
      migrations: { migrationSource },
    });
  }
  const { default: ClientPgLite } = await import('knex-pglite');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(options.dataDir, { recursive: true });
  // Every process that opens the embedded database (server, agentctl, migrate) takes the directory's lock first.
  const lock = acquireDataDirLock(options.dataDir);
  const db = knexFactory({
    client: pgliteClient(ClientPgLite as unknown as PgLiteClientClass),
    dialect: 'postgres',
    connection: { filename: `${options.dataDir}/pglite` } as unknown as Knex.StaticConnectionConfig,
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

type PgLiteClientClass = new (config: unknown) => { processResponse(obj: { method?: string }, runner: unknown): unknown };

/**
 * knex-pglite 0.14 derives the command from knex's method name, and knex names DELETE `del`: a
 * `.delete()` then resolves to the raw result object instead of the row count (Postgres gives a
 * number), so `if (deleted === 0)` checks and polling loops that count work break. Map it back.
 */
function pgliteClient(Base: PgLiteClientClass): typeof knexFactory.Client {
  class PgLiteClient extends Base {
    override processResponse(obj: { method?: string }, runner: unknown): unknown {
      return super.processResponse(obj.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
    }
  }
  return PgLiteClient as unknown as typeof knexFactory.Client;
}

export async function migrateLatest(db: Knex): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

/** Runs `fn` in the transaction it is given, or opens one on the pool. */
export async function withTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if ((db as Knex.Transaction).isTransaction) return fn(db as Knex.Transaction);
  return (db as Knex).transaction(fn);
}
