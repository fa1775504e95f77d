// Applies pending migrations to DATABASE_URL (or the embedded database when it is unset).
import { ConfigError, loadConfig } from '../src/config.js';
import { DataDirLockedError } from '../src/db/data-dir-lock.js';
import { createKnex, migrateLatest } from '../src/db/knex.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const db = await createKnex({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrateLatest(db);
    const [, pending] = (await db.migrate.list()) as [unknown[], unknown[]];
    process.stdout.write(`migrations applied; pending: ${pending.length}\n`);
  } finally {
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  // A refusal the user can act on is one line; anything else keeps its stack.
  const plain = err instanceof ConfigError || err instanceof DataDirLockedError;
  process.stderr.write(`migrate: ${plain ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
