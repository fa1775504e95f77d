// Service-level harness for the DeFi tests: the ledger and DeFi areas on the per-run database, a fake clock,
// and agents with a permissive policy and funded wallets.
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/knex.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { parseAmount } from '../../src/lib/money.js';
import { createAgentService, type AgentService } from '../../src/services/agent.service.js';
import { createDefiArea, type DefiArea } from '../../src/services/defi/area.js';
import { createLedgerArea, type LedgerArea } from '../../src/services/ledger/area.js';
import { rejectingRefusals, type RefusalsRejected } from '../ledger/factory.js';
import { testEnv } from '../setup.js';

export interface DefiHarness {
  db: Knex;
  clock: FakeClock;
  ledger: LedgerArea;
  defi: Omit<DefiArea, 'earn' | 'borrow' | 'conversions'> & { earn: RefusalsRejected<DefiArea['earn']>; borrow: RefusalsRejected<DefiArea['borrow']>; conversions: RefusalsRejected<DefiArea['conversions']> };
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
    defi: { ...defi, earn: rejectingRefusals(defi.earn), borrow: rejectingRefusals(defi.borrow), conversions: rejectingRefusals(defi.conversions) },
    agents,
    async newAgent(opts = {}) {
      const { owner_id } = await agents.createOwner(db, { email: `defi-${Math.random().toString(36).slice(2)}@example.com` });
      const created = await agents.createAgent(db, { ownerId: owner_id, name: 'defi agent' });
      const who = { agentId: created.agent_id, walletId: created.wallet_id };
      if (opts.policy) await ledger.policy.set(db, who.agentId, opts.policy);
      else await ledger.policy.allowAll(db, who.agentId);
      for (const [asset, amount] of Object.entries(opts.funds ?? { USDC: '10000' })) {
        const row = await ledger.ledger.requireAsset(db, asset);
        await ledger.ledger.deposit(db, { walletId: who.walletId, asset, amount: parseAmount(amount, row.decimals) });
      }
      return who;
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
