// Knex CLI configuration: the same migration source as the app (DATABASE_URL, Postgres).
import { migrationSource } from './src/db/migrations/index.js';

export default {
  client: 'pg',
  connection: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/agent_api',
  migrations: { migrationSource },
};
