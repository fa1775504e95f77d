// HTTP entry: config -> app -> listen (+ in-process worker loops); drains in-flight requests on SIGTERM.
import { createServer, type Server } from 'node:http';
import { createApp } from './app.js';
import { fundDemoWalletOnDevChain } from './chain/connect.js';
import { ConfigError, loadConfig } from './config.js';
import { ensureDemoAgent } from './demo.js';
import { createWorker } from './worker.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const built = await createApp(config);
  const { log } = built;
  if (!config.databaseUrl) {
    const chainId = built.chain?.chainId;
    const line = await ensureDemoAgent(built.db, built.services, [
      (db, services, agent) => services.ledger.setupDemoAgent(db, agent, { fund: chainId === undefined }),
      // On the development chain the demo funds are put on chain; the deposit watcher credits the ledger.
      async (db, _services, agent) => {
        if (chainId !== undefined) await fundDemoWalletOnDevChain({ config, db, chainId }, agent.agentId).catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'demo wallet not funded on the development chain'));
      },
    ]);
    if (line) process.stdout.write(`${line}\n`);
  }
  const worker = config.runWorker ? createWorker({ loops: built.loops, log }) : null;
  const server: Server = createServer(built.app);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const address = server.address();
  log.info({ address, embedded: !config.databaseUrl, redis: Boolean(config.redisUrl) }, 'agent api listening');
  process.stdout.write(`listening on http://${config.host}:${typeof address === 'object' && address ? address.port : config.port}\n`);
  worker?.start();
  void built.router.warm().catch((err: unknown) => log.error({ err }, 'validator warm-up failed'));

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'draining');
    const force = setTimeout(() => {
      log.error('drain timed out; exiting');
      process.exit(1);
    }, config.shutdownGraceMs);
    force.unref();
    // Stop accepting, let in-flight requests finish, close idle keep-alive sockets.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await closed;
    await worker?.stop();
    await built.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
