// Applies pending migrations to DATABASE_URL (or the embedded database when it is unset). On the
// embedded default it refuses while a server answers at AGENT_API_BASE_URL: that server holds the
// data directory, and a second writer would lose data.
import { loadConfig } from '../src/config.js';
import { createKnex, migrateLatest } from '../src/db/knex.js';

const config = loadConfig();
if (!config.databaseUrl) {
  const answering = await fetch(`${config.agentApiBaseUrl}/healthz`, { signal: AbortSignal.timeout(1500) }).then(
    () => true,
    () => false,
  );
  if (answering) {
    process.stderr.write(`migrate: a server answers at ${config.agentApiBaseUrl} and holds the embedded data directory ${config.dataDir}; stop it first (npm start applies migrations itself)\n`);
    process.exit(1);
  }
}
const db = await createKnex({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
try {
  await migrateLatest(db);
  const [, pending] = (await db.migrate.list()) as [unknown[], unknown[]];
  process.stdout.write(`migrations applied; pending: ${pending.length}\n`);
} finally {
  await db.destroy();
}
