// Service-level harness for the DeFi tests: the composition root's ledger and DeFi areas on the test file's database, a fake clock,
// and agents with a permissive policy and funded wallets.
import type { Knex } from 'knex';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import type { AgentService } from '../../src/services/agent.service.js';
import type { DefiArea } from '../../src/services/defi/area.js';
import type { LedgerArea } from '../../src/services/ledger/area.js';
import { createTestCore } from '../support/core.js';
import { createTestAgent } from '../support/agents.js';
import { rejectingRefusals, type RefusalsRejected } from '../ledger/factory.js';

export interface DefiHarness {
  db: Knex;
  clock: FakeClock;
  ledger: LedgerArea;
  defi: Omit<DefiArea, 'earn' | 'borrow' | 'conversions'> & {
    earn: RefusalsRejected<DefiArea['earn']>;
    borrow: RefusalsRejected<DefiArea['borrow']>;
    conversions: RefusalsRejected<DefiArea['conversions']>;
  };
  agents: AgentService;
  newAgent(opts?: { policy?: Record<string, unknown>; funds?: Record<string, string> }): Promise<{ agentId: string; walletId: string }>;
  balance(walletId: string, asset: string): Promise<bigint>;
  close(): Promise<void>;
}

export async function createDefiHarness(): Promise<DefiHarness> {
  const clock = createFakeClock('2026-03-01T12:00:00.000Z');
  const core = await createTestCore({ clock, env: { SETTLEMENT_DELAY_MS: '0', DATABASE_POOL_MAX: '60' } });
  const { db } = core;
  const { ledger, defi, agents } = core.services;
  return {
    db,
    clock,
    ledger,
    defi: { ...defi, earn: rejectingRefusals(defi.earn), borrow: rejectingRefusals(defi.borrow), conversions: rejectingRefusals(defi.conversions) },
    agents,
    async newAgent(opts = {}) {
      const { agentId, walletId } = await createTestAgent(
        { db, agents, ledger },
        { name: 'defi agent', emailPrefix: 'defi', policy: opts.policy ?? 'all', fund: opts.funds ?? { USDC: '10000' }, fundVia: 'deposit' },
      );
      return { agentId, walletId };
    },
    async balance(walletId, asset) {
      return (await ledger.ledger.balance(db, walletId, asset)).available;
    },
    close: core.close,
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
