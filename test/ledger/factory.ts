// Ledger-area test factory (the composition root's services): a Knex on the test file's database, the area on a fake clock, and funded agents.
import type { Knex } from '../../src/db/knex.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { ApiError } from '../../src/lib/errors.js';
import { isRefusal, type Refusal } from '../../src/lib/refusal.js';
import type { AgentService } from '../../src/services/agent.service.js';
import type { LedgerArea } from '../../src/services/ledger/area.js';
import { createTestCore } from '../support/core.js';
import { createTestAgent } from '../support/agents.js';

export const MASTER_KEY = 'test-master-key-0123456789abcdef0123456789';

/** A service whose refusals reject: what a service test calls, so `.catch(codeOf)` reads a refusal's code. */
export type RefusalsRejected<S> = { [K in keyof S]: S[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => Promise<Exclude<R, Refusal>> : S[K] };

/** Rejected with this when the service returned a Refusal (its effects committed, as for any answer). */
export class Refused extends ApiError {}

function rejectRefusal(result: unknown): unknown {
  if (isRefusal(result)) throw new Refused(result.refusal.code, result.refusal.message, result.refusal.details);
  return result;
}

export function rejectingRefusals<S extends object>(service: S): RefusalsRejected<S> {
  const view: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(service)) {
    view[name] =
      typeof member === 'function'
        ? (...args: unknown[]) => {
            const out: unknown = (member as (...a: unknown[]) => unknown).apply(service, args);
            return out instanceof Promise ? out.then(rejectRefusal) : out;
          }
        : member;
  }
  return view as RefusalsRejected<S>;
}

export type TestLedgerArea = Omit<LedgerArea, 'payments' | 'withdrawals' | 'destinations'> & {
  payments: RefusalsRejected<LedgerArea['payments']>;
  withdrawals: RefusalsRejected<LedgerArea['withdrawals']>;
  destinations: RefusalsRejected<LedgerArea['destinations']>;
};

export interface LedgerFixture {
  db: Knex;
  clock: FakeClock;
  area: TestLedgerArea;
  agents: AgentService;
  close(): Promise<void>;
}

export async function createLedgerFixture(opts: { settlementDelayMs?: number; poolMax?: number } = {}): Promise<LedgerFixture> {
  const clock = createFakeClock('2026-03-02T10:00:00.000Z');
  const core = await createTestCore({ clock, env: { MASTER_KEY, SETTLEMENT_DELAY_MS: String(opts.settlementDelayMs ?? 0), DATABASE_POOL_MAX: String(opts.poolMax ?? 30) } });
  const area = core.services.ledger;
  const view: TestLedgerArea = { ...area, payments: rejectingRefusals(area.payments), withdrawals: rejectingRefusals(area.withdrawals), destinations: rejectingRefusals(area.destinations) };
  return { db: core.db, clock, area: view, agents: core.services.agents, close: core.close };
}

export interface TestAgent {
  agentId: string;
  walletId: string;
  ownerId: string;
}

export async function makeAgent(f: LedgerFixture, opts: { policy?: Record<string, unknown> | 'all' | null; fund?: Record<string, string> } = {}): Promise<TestAgent> {
  const { agentId, walletId, ownerId } = await createTestAgent(
    { db: f.db, agents: f.agents, ledger: f.area },
    { name: 'ledger test agent', policy: opts.policy === undefined ? 'all' : opts.policy, fund: opts.fund },
  );
  return { agentId, walletId, ownerId };
}

export const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

/** Every journal entry sums to zero per asset, and each wallet's balances equal its journal. */
export async function assertBooksBalance(db: Knex, walletIds: string[]): Promise<void> {
  const sums = (await db('journal_entries').select('asset_symbol').sum({ total: 'amount' }).groupBy('asset_symbol')) as unknown as { asset_symbol: string; total: string }[];
  for (const s of sums) if (BigInt(s.total as string) !== 0n) throw new Error(`journal for ${s.asset_symbol} sums to ${s.total}`);
  for (const walletId of walletIds) {
    const journal = (await db('journal_entries').where({ wallet_id: walletId }).select('account', 'asset_symbol').sum({ total: 'amount' }).groupBy('account', 'asset_symbol')) as unknown as {
      account: string;
      asset_symbol: string;
      total: string;
    }[];
    const balances = await db('balances').where({ wallet_id: walletId });
    for (const b of balances) {
      const avail = journal.find((j) => j.account === `wallet:${walletId}:available` && j.asset_symbol === b.asset_symbol);
      const held = journal.find((j) => j.account === `wallet:${walletId}:held` && j.asset_symbol === b.asset_symbol);
      if (BigInt((avail?.total as string) ?? 0) !== BigInt(b.available)) throw new Error(`available ${b.asset_symbol} of ${walletId}: balance ${b.available} vs journal ${avail?.total}`);
      if (BigInt((held?.total as string) ?? 0) !== BigInt(b.held)) throw new Error(`held ${b.asset_symbol} of ${walletId}: balance ${b.held} vs journal ${held?.total}`);
    }
  }
}

/** Runs settlement passes until one moves nothing. */
export async function settleAll(f: LedgerFixture): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const moved = (await f.area.operations.settleDue(f.db)) + (await f.area.payments.expireOneOffs(f.db));
    if (moved === 0) return;
  }
  throw new Error('settlement did not go idle');
}
