// The composition root for service-level tests: src/app.ts `buildCore` on this file's database and Redis prefix
// with the test configuration, so harnesses get the services wired as the server wires them (the agent-created
// hooks, the DeFi area on the ledger) instead of rebuilding them by hand.
import { buildCore } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import type { Clock } from '../../src/lib/clock.js';
import type { Logger } from '../../src/lib/logger.js';
import { testConfigEnv } from '../helpers/server.js';

export type TestCore = Awaited<ReturnType<typeof buildCore>>;

/** `env` overrides the test configuration (e.g. SETTLEMENT_DELAY_MS, DATABASE_POOL_MAX); nothing listens and no loop runs. */
export async function createTestCore(opts: { clock?: Clock; env?: Record<string, string>; log?: Logger } = {}): Promise<TestCore> {
  // The database as the hand-built harnesses had it: knex's own 60 s acquire and no statement bound, so a test
  // of 200 concurrent operations on a busy machine waits for connections instead of timing out.
  const config = loadConfig(testConfigEnv({ DB_CONNECT_TIMEOUT_MS: '60000', DB_ACQUIRE_TIMEOUT_MS: '60000', DB_STATEMENT_TIMEOUT_MS: '0', DB_QUERY_TIMEOUT_MS: '0', ...opts.env }), () => {});
  return buildCore(config, { clock: opts.clock, log: opts.log });
}
