// Ledger-area test factory: a Knex on the per-run database, the area on a fake clock, and funded agents.
import { createKnex, type Knex } from '../../src/db/knex.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { ApiError } from '../../src/lib/errors.js';
import { isRefusal, type Refusal } from '../../src/lib/refusal.js';
import { createAgentService, type AgentCreatedHook, type AgentService } from '../../src/services/agent.service.js';
import { createLedgerArea, type LedgerArea } from '../../src/services/ledger/area.js';
import { testEnv } from '../setup.js';

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

export type TestLedgerArea = Omit<LedgerArea, 'payments' | 'withdrawals' | 'destinations'> & { payments: RefusalsRejected<LedgerArea['payments']>; withdrawals: RefusalsRejected<LedgerArea['withdrawals']>; destinations: RefusalsRejected<LedgerArea['destinations']> };

export interface LedgerFixture {
  db: Knex;
  clock: FakeClock;
  area: TestLedgerArea;
  agents: AgentService;
  close(): Promise<void>;
}

export async function createLedgerFixture(opts: { settlementDelayMs?: number; poolMax?: number } = {}): Promise<LedgerFixture> {
  const db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '', poolMax: opts.poolMax ?? 30 });
  const clock = createFakeClock('2026-03-02T10:00:00.000Z');
  const hooks: AgentCreatedHook[] = [];
  const area = createLedgerArea({ config: { masterKey: MASTER_KEY, settlementDelayMs: opts.settlementDelayMs ?? 0 }, clock, onAgentCreated: hooks });
  const agents = createAgentService({ clock, onAgentCreated: hooks });
  const view: TestLedgerArea = { ...area, payments: rejectingRefusals(area.payments), withdrawals: rejectingRefusals(area.withdrawals), destinations: rejectingRefusals(area.destinations) };
  return { db, clock, area: view, agents, close: () => db.destroy() };
}

export interface TestAgent {
  agentId: string;
  walletId: string;
  ownerId: string;
}

let seq = 0;
export async function makeAgent(f: LedgerFixture, opts: { policy?: Record<string, unknown> | 'all' | null; fund?: Record<string, string> } = {}): Promise<TestAgent> {
  const { owner_id } = await f.agents.createOwner(f.db, { email: `owner-${Date.now()}-${seq++}@example.com` });
  const created = await f.agents.createAgent(f.db, { ownerId: owner_id, name: 'ledger test agent' });
  const agent = { agentId: created.agent_id, walletId: created.wallet_id, ownerId: owner_id };
  const policy = opts.policy === undefined ? 'all' : opts.policy;
  if (policy === 'all') await f.area.policy.allowAll(f.db, agent.agentId);
  else if (policy) await f.area.policy.set(f.db, agent.agentId, policy);
  for (const [asset, amount] of Object.entries(opts.fund ?? {})) await f.area.account.fund(f.db, agent.agentId, { asset, amount });
  return agent;
}

export const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

/** Every journal entry sums to zero per asset, and each wallet's balances equal its journal. */
export async function assertBooksBalance(db: Knex, walletIds: string[]): Promise<void> {
  const sums = (await db('journal_entries').select('asset_symbol').sum({ total: 'amount' }).groupBy('asset_symbol')) as unknown as { asset_symbol: string; total: string }[];
  for (const s of sums) if (BigInt(s.total as string) !== 0n) throw new Error(`journal for ${s.asset_symbol} sums to ${s.total}`);
  for (const walletId of walletIds) {
    const journal = (await db('journal_entries').where({ wallet_id: walletId }).select('account', 'asset_symbol').sum({ total: 'amount' }).groupBy('account', 'asset_symbol')) as unknown as { account: string; asset_symbol: string; total: string }[];
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
