// Applies pending migrations to DATABASE_URL (or the embedded database when it is unset).
import { loadConfig } from '../src/config.js';
import { createKnex, migrateLatest } from '../src/db/knex.js';

const config = loadConfig();
const db = await createKnex({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
try {
  await migrateLatest(db);
  const [, pending] = (await db.migrate.list()) as [unknown[], unknown[]];
  process.stdout.write(`migrations applied; pending: ${pending.length}\n`);
} finally {
  await db.destroy();
}
