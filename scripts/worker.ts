// Worker entry: the background loops alone (settlement, webhook deliveries, cleanup) against Postgres.
import { buildCore } from '../src/app.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { startMetricsServer } from '../src/observability/metrics.js';
import { routeConsoleTo } from '../src/lib/logger.js';
import { createWorker } from '../src/worker.js';

async function main(): Promise<void> {
  const config = loadConfig();
  if (!config.databaseUrl) throw new ConfigError(['DATABASE_URL is required for a separate worker (the embedded database belongs to `npm start`)']);
  const core = await buildCore(config);
  routeConsoleTo(core.log);
  const worker = createWorker({ loops: core.loops, log: core.log });
  const metricsServer = core.metrics.registry ? await startMetricsServer(core.metrics.registry, config.metricsPort ?? 0, config.metricsHost) : null;
  worker.start();
  const stop = async () => {
    metricsServer?.close();
    await worker.stop();
    await core.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
