// HTTP harness for the DeFi route tests: the real test server (response validation on) with a fake clock,
// agents with a policy, funds and a write limit high enough for the concurrency tests.
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { parseAmount } from '../../src/lib/money.js';
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
    async agent(opts: { policy?: Record<string, unknown> | null; funds?: Record<string, string> } = {}) {
      const a = await server.createAgent();
      if (opts.policy === undefined) await ledger.policy.allowAll(server.db, a.agentId);
      else if (opts.policy !== null) await ledger.policy.set(server.db, a.agentId, opts.policy);
      for (const [asset, amount] of Object.entries(opts.funds ?? { USDC: '10000' })) {
        const row = await ledger.ledger.requireAsset(server.db, asset);
        await ledger.ledger.deposit(server.db, { walletId: a.walletId, asset, amount: parseAmount(amount, row.decimals) });
      }
      for (const cls of ['write', 'simulate', 'read']) await server.services.agents.setRateLimit(server.db, a.agentId, { class: cls, limit: 1000, burst: 1000, windowSeconds: 60 });
      return a;
    },
    settle: () => ledger.operations.settleDue(server.db),
  });
}
