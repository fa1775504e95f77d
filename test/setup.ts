// Root hooks: one fresh, migrated database and one Redis key prefix per test run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import knexFactory from 'knex';
import { migrationSource } from '../src/db/migrations/index.js';

const adminUrl = process.env.TEST_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const runId = randomBytes(4).toString('hex');
const dbName = `agent_api_test_${runId}`;

export const testEnv = {
  databaseUrl: adminUrl.replace(/\/[^/]*$/, `/${dbName}`),
  redisUrl: process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379',
  redisPrefix: `agentapi-test:${runId}:`,
  runId,
};

/** One statement on the server's maintenance database (CREATE/DROP DATABASE). */
export async function adminQuery(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const db = knexFactory({ client: 'pg', connection: testEnv.databaseUrl });
    // TEST_MIGRATIONS=0001_foundation,... limits the run to some areas (handy while one area's migration is mid-edit).
    const only = process.env.TEST_MIGRATIONS?.split(',').map((s) => s.trim()).filter(Boolean);
    const source = only?.length
      ? { ...migrationSource, getMigrations: async () => (await migrationSource.getMigrations([])).filter((m) => only.includes(m)) }
      : migrationSource;
    await db.migrate.latest({ migrationSource: source });
    await db.destroy();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    if (process.env.KEEP_TEST_DB) return;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  },
};
