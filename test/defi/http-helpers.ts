// HTTP harness for the DeFi route tests: the real test server (response validation on) with a fake clock,
// agents with a policy, funds and a write limit high enough for the concurrency tests.
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

export interface DefiServer extends TestServer {
  clock: FakeClock;
  agent(opts?: { policy?: Record<string, unknown> | null; funds?: Record<string, string> }): Promise<TestAgent>;
  settle(): Promise<number>;
}

export async function startDefiServer(): Promise<DefiServer> {
  const clock = createFakeClock('2026-03-01T12:00:00.000Z');
  const server = await startTestServer({ clock });
  const { ledger } = server.services;
  return Object.assign(server, {
    clock,
    agent: (opts: { policy?: Record<string, unknown> | null; funds?: Record<string, string> } = {}) =>
      server.createAgent({
        policy: opts.policy === undefined ? 'all' : opts.policy,
        fund: opts.funds ?? { USDC: '10000' },
        fundVia: 'deposit',
        rateLimit: { limit: 1000, classes: ['write', 'simulate', 'read'] },
      }),
    settle: () => ledger.operations.settleDue(server.db),
  });
}
