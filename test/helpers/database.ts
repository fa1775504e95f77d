// A scratch database of its own for tests that must not touch the test file's clone of the template (they rewrite whole tables).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testEnv } from '../setup.js';

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

const adminUrl = () => testEnv.databaseUrl.replace(/\/[^/]*$/, '/postgres');

export async function createScratchDatabase(label: string): Promise<ScratchDatabase> {
  const name = `agent_api_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: testEnv.databaseUrl.replace(/\/[^/]*$/, `/${name}`),
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
