// Test databases: one migrated template per run (global setup), and per test file a database cloned from it
// plus a Redis key prefix of its own (root hooks; under `--parallel` they run once per file, in a worker that
// is reused across files, so `testEnv` is reassigned per file and must be read when used, never captured at load).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import knexFactory from 'knex';
import { migrationSource } from '../src/db/migrations/index.js';

const adminUrl = process.env.TEST_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
// The main process picks the run id; parallel workers are forked after this module loads and inherit it.
const runId = (process.env.AGENT_API_TEST_RUN ||= randomBytes(4).toString('hex'));
const templateName = `agent_api_tmpl_${runId}`;
const databaseUrlOf = (name: string) => adminUrl.replace(/\/[^/]*$/, `/${name}`);
let fileSeq = 0;

export const testEnv = {
  /** This test file's database (reassigned by the root `beforeAll`). */
  databaseUrl: databaseUrlOf(`agent_api_test_${runId}`),
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

/**
 * A new database cloned from the run's migrated template; `drop()` removes it. Cloning copies files
 * (tens of milliseconds) where migrating from scratch takes seconds. Concurrent clones of one template can
 * be refused while another clone holds it ("being accessed by other users"), so that error is retried.
 */
export async function cloneTemplateDatabase(label = ''): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `agent_api_test_${runId}_${process.pid}_${++fileSeq}${label ? `_${label}` : ''}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`CREATE DATABASE ${name} TEMPLATE ${templateName}`);
      break;
    } catch (err) {
      if (attempt >= 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  return { name, url: databaseUrlOf(name), drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** Runs once per `mocha` invocation, in the main process: the migrated template every test file clones. */
export async function mochaGlobalSetup(): Promise<void> {
  await adminQuery(`CREATE DATABASE ${templateName}`);
  const db = knexFactory({ client: 'pg', connection: databaseUrlOf(templateName) });
  try {
    // TEST_MIGRATIONS=0001_foundation,... limits the run to some areas (handy while one area's migration is mid-edit).
    const only = process.env.TEST_MIGRATIONS?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const source = only?.length ? { ...migrationSource, getMigrations: async () => (await migrationSource.getMigrations([])).filter((m) => only.includes(m)) } : migrationSource;
    await db.migrate.latest({ migrationSource: source });
  } finally {
    await db.destroy();
  }
}

/** Drops the template and every database of this run a file left behind (a worker that died, KEEP_TEST_DB). */
export async function mochaGlobalTeardown(): Promise<void> {
  if (process.env.KEEP_TEST_DB) return;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname = $1 OR datname LIKE $2`, [templateName, `agent\\_api\\_test\\_${runId}\\_%`]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

let fileDatabase: { drop(): Promise<void> } | null = null;

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    const db = await cloneTemplateDatabase();
    fileDatabase = db;
    testEnv.databaseUrl = db.url;
    testEnv.redisPrefix = `agentapi-test:${runId}:${process.pid}.${fileSeq}:`;
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    const db = fileDatabase;
    fileDatabase = null;
    if (db && !process.env.KEEP_TEST_DB) await db.drop();
  },
};
