// Re-seals every registered sealed column under MASTER_KEY, opening with MASTER_KEY_PREVIOUS (docs/OPERATIONS.md, key rotation).
import { ConfigError, loadConfig } from '../src/config.js';
import { createKnex } from '../src/db/knex.js';
import { rotateMasterKey } from '../src/services/master-key.service.js';

async function main(): Promise<number> {
  const config = loadConfig();
  if (!config.masterKeyPrevious) throw new ConfigError(['MASTER_KEY_PREVIOUS (the key being retired) is required; MASTER_KEY is the new key']);
  const db = await createKnex({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    const columns = await rotateMasterKey({ db, masterKey: config.masterKey, previousMasterKey: config.masterKeyPrevious });
    const unopenable = columns.reduce((n, c) => n + c.unopenable.length, 0);
    process.stdout.write(`${JSON.stringify({ ok: unopenable === 0, columns })}\n`);
    if (unopenable > 0) process.stderr.write(`${unopenable} value(s) open with neither key; keep MASTER_KEY_PREVIOUS until they are explained\n`);
    return unopenable === 0 ? 0 : 1;
  } finally {
    await db.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  },
);
