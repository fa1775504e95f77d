// HTTP entry: config -> app -> listen (+ in-process worker loops); drains in-flight requests on SIGTERM.
import type { Server } from 'node:http';
import { createApp } from './app.js';
import { fundDemoWalletOnDevChain } from './chain/connect.js';
import { ConfigError, listenUrl, loadConfig } from './config.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import { ensureDemoAgent } from './demo.js';
import { createHttpServer } from './http/http-server.js';
import { routeConsoleTo, writeFatalLine } from './lib/logger.js';
import { startMetricsServer } from './observability/metrics.js';
import { createWorker, sleep } from './worker.js';

// In production every line the process writes is JSON (operators ship them to a log pipeline).
let production = false;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      if (err.production) writeFatalLine('invalid configuration', { problems: err.problems });
      else process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  production = config.nodeEnv === 'production';
  const built = await createApp(config);
  const { log } = built;
  routeConsoleTo(log);
  if (!config.databaseUrl) {
    const chainId = built.chain?.chainId;
    const line = await ensureDemoAgent(built.db, built.services, [
      (db, services, agent) => services.ledger.setupDemoAgent(db, agent, { fund: chainId === undefined }),
      // On the development chain the demo funds are put on chain; the deposit watcher credits the ledger.
      async (db, _services, agent) => {
        if (chainId !== undefined)
          await fundDemoWalletOnDevChain({ config, db, chainId }, agent.agentId).catch((err: unknown) =>
            log.error({ err: err instanceof Error ? err.message : String(err) }, 'demo wallet not funded on the development chain'),
          );
      },
    ]);
    if (line) process.stdout.write(`${line}\n`);
  }
  const worker = config.runWorker ? createWorker({ loops: built.loops, log }) : null;
  const server: Server = createHttpServer({ log });
  server.on('request', built.listener);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const address = server.address();
  const url = listenUrl(config.host, typeof address === 'object' && address ? address.port : config.port);
  log.info({ address, url, embedded: !config.databaseUrl, redis: Boolean(config.redisUrl) }, 'agent api listening');
  // The plain line is for people at a terminal; in production the JSON line above carries `url`.
  if (!production) process.stdout.write(`listening on ${url}\n`);
  const metricsServer = built.metrics.registry ? await startMetricsServer(built.metrics.registry, config.metricsPort ?? 0, config.metricsHost) : null;
  if (metricsServer) log.info({ address: metricsServer.address() }, 'metrics listening');
  worker?.start();
  // Warm-up is CPU work on the event loop (seconds on a busy machine): a drain must not wait behind it.
  const warming = new AbortController();
  if (config.warmValidators) void built.router.warm(warming.signal).catch((err: unknown) => log.error({ err }, 'validator warm-up failed'));

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    warming.abort();
    log.info({ signal }, 'draining');
    const force = setTimeout(() => {
      log.error('drain timed out; exiting');
      process.exit(1);
    }, config.shutdownGraceMs);
    force.unref();
    // Readiness fails first, and requests keep being served for DRAIN_DELAY_MS, so the load balancer stops routing here before we stop listening.
    built.startDraining();
    if (config.drainDelayMs > 0) await sleep(config.drainDelayMs, new AbortController().signal);
    // Stop accepting, let in-flight requests finish, close idle keep-alive sockets. MCP streams never finish on their own: end them (clients re-initialize elsewhere).
    await built.endMcpSessions();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await closed;
    await worker?.stop();
    metricsServer?.close();
    await built.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  if (err instanceof DataDirLockedError) {
    if (production) writeFatalLine('data directory locked', { message: err.message });
    else process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  if (production) writeFatalLine('fatal', { err: err instanceof Error ? { type: err.name, message: err.message, stack: err.stack } : String(err) });
  else process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
