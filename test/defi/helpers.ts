// Service-level harness for the DeFi tests: the ledger and DeFi areas on the per-run database, a fake clock,
// and agents with a permissive policy and funded wallets.
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/knex.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { createAgentService, type AgentService } from '../../src/services/agent.service.js';
import { createDefiArea, type DefiArea } from '../../src/services/defi-area.js';
import { createLedgerArea, type LedgerArea } from '../../src/services/ledger-area.js';
import { testEnv } from '../setup.js';
import { createTestAgent } from '../support/agents.js';

export interface DefiHarness {
  db: Knex;
  clock: FakeClock;
  ledger: LedgerArea;
  defi: DefiArea;
  agents: AgentService;
  newAgent(opts?: { policy?: Record<string, unknown>; funds?: Record<string, string> }): Promise<{ agentId: string; walletId: string }>;
  balance(walletId: string, asset: string): Promise<bigint>;
  close(): Promise<void>;
}

export async function createDefiHarness(): Promise<DefiHarness> {
  const db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '', poolMax: 60 });
  const clock = createFakeClock('2026-03-01T12:00:00.000Z');
  const ledger = createLedgerArea({ config: { masterKey: 'test-master-key-0123456789abcdef0123456789', settlementDelayMs: 0 }, clock });
  const defi = createDefiArea({ clock, ledger });
  const agents = createAgentService({ clock });
  return {
    db,
    clock,
    ledger,
    defi,
    agents,
    async newAgent(opts = {}) {
      const { agentId, walletId } = await createTestAgent({ db, agents, ledger }, { name: 'defi agent', emailPrefix: 'defi', policy: opts.policy ?? 'all', fund: opts.funds ?? { USDC: '10000' }, fundVia: 'deposit' });
      return { agentId, walletId };
    },
    async balance(walletId, asset) {
      return (await ledger.ledger.balance(db, walletId, asset)).available;
    },
    close: () => db.destroy(),
  };
}

/** Runs `fn` and returns the ApiError code it threw (fails when it did not throw). */
export async function errorCode(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
  throw new Error('expected an error');
}
