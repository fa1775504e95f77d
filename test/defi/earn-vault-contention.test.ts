// Issue 30: many agents deposit into ONE vault while settlement runs. The vault row is the one lock every deposit shares,
// so whoever holds it must hold it briefly and wait for nothing: a deposit that locked the vault row and then waited
// for its own balance row (held by a settlement batch, itself waiting for other wallets' rows) made every other
// deposit wait behind that batch, past the statement timeout (503 outside any outage, in the soak).
import { expect } from 'chai';
import pg from 'pg';
import type { Knex } from 'knex';
import * as erc from '../../src/lib/defi/erc4626.js';
import { newKey, type TestAgent, type TestResponse } from '../helpers/server.js';
import { testEnv } from '../setup.js';
import { assertBooksBalance } from '../ledger/factory.js';
import { startDefiServer, type DefiServer } from './http-helpers.js';

const AGENTS = 24;
const ROUNDS = 5;
const PAYEE = '0x3333333333333333333333333333333333333333';

interface Backend {
  pid: number;
  wait_event_type: string | null;
  query: string;
  blocked_by: number[];
}

/** The test database's other backends, each with the pids it waits for. */
async function backends(db: Knex): Promise<Backend[]> {
  const { rows } = await db.raw(`SELECT pid, wait_event_type, query, pg_blocking_pids(pid) AS blocked_by FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  return rows as Backend[];
}

const locksVault = (sql: string) => /from "earn_vaults"[\s\S]*for update/i.test(sql);
/** The settlement batch's last statement (settlement.repository applyBalanceDeltas). */
const isBatch = (b: Backend) => /with locked as materialized/i.test(b.query);

/** The statements of transactions that hold (or queue first for) the vault row while they wait for another lock. */
function vaultHoldersWaiting(all: Backend[]): string[] {
  const byPid = new Map(all.map((x) => [x.pid, x]));
  const out: string[] = [];
  for (const w of all.filter((x) => x.wait_event_type === 'Lock' && locksVault(x.query)))
    for (const pid of w.blocked_by) {
      const holder = byPid.get(pid);
      if (holder && holder.wait_event_type === 'Lock' && !locksVault(holder.query)) out.push(holder.query.replace(/\s+/g, ' ').slice(0, 80));
    }
  return out;
}

/** Polls until `done` holds (fails after `tries` polls of 25 ms). */
async function until(what: string, done: () => Promise<boolean>, tries = 400): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await done()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting until ${what}`);
}

interface VaultHolder {
  /** The vault row as the lock returned it. */
  locked: Record<string, unknown> | null;
  /** The statements sent after the lock, COMMIT excluded. */
  after: string[];
  bindings: unknown[];
}

/**
 * Every transaction that locks the vault row, through knex's documented events (`query`: each statement as it goes
 * to the driver, tagged with its transaction; `query-response`: its rows).
 */
function watchVaultHolders(db: Knex): { holders: () => VaultHolder[]; stop: () => void } {
  const byTx = new Map<string, VaultHolder>();
  const onQuery = (q: { __knexTxId?: string; sql?: string; bindings?: unknown[] }) => {
    if (!q.__knexTxId || !q.sql) return;
    const holder = byTx.get(q.__knexTxId);
    if (locksVault(q.sql)) byTx.set(q.__knexTxId, holder ?? { locked: null, after: [], bindings: [] });
    else if (holder && !/^\s*(commit|rollback)/i.test(q.sql)) {
      holder.after.push(q.sql.replace(/\s+/g, ' ').slice(0, 80));
      holder.bindings.push(...(q.bindings ?? []));
    }
  };
  const onResponse = (response: unknown, q: { __knexTxId?: string; sql?: string }) => {
    const holder = q.__knexTxId ? byTx.get(q.__knexTxId) : undefined;
    if (holder && q.sql && locksVault(q.sql) && !holder.locked) holder.locked = (Array.isArray(response) ? response[0] : response) as Record<string, unknown>;
  };
  db.on('query', onQuery);
  db.on('query-response', onResponse);
  return {
    holders: () => [...byTx.values()],
    stop: () => {
      db.off('query', onQuery);
      db.off('query-response', onResponse);
    },
  };
}

describe('createEarnDeposit under contention (issue 30)', () => {
  let s: DefiServer;
  let agents: TestAgent[];
  let vaultId: string;
  let watch: ReturnType<typeof watchVaultHolders>;
  const answered = new Map<string, { agent: TestAgent; amount: string; response: TestResponse }>();
  before(async () => {
    s = await startDefiServer();
    vaultId = (await s.services.defi.earn.addVault(s.db, { name: 'shared vault', protocol: 'morpho', asset: 'USDC', apyBps: 700, capacity: null, rewardAsset: 'USDC', rewardBps: 50 })).vault_id;
    agents = await Promise.all(Array.from({ length: AGENTS }, () => s.agent({ funds: { USDC: '1000' } })));
    watch = watchVaultHolders(s.db);
  });
  after(async () => {
    watch.stop();
    await s.db('earn_vaults').where({ id: vaultId }).update({ active: false });
    await s.close();
  });

  const deposit = async (agent: TestAgent, amount: string, key = newKey()): Promise<TestResponse> => {
    const response = await s.request('POST', '/v1/agent/earn/deposit', { agent, body: { asset: 'USDC', vault_id: vaultId, amount }, idempotencyKey: key });
    answered.set(key, { agent, amount, response });
    return response;
  };
  const pay = (agent: TestAgent): Promise<TestResponse> => s.request('POST', '/v1/agent/payments', { agent, body: { to: PAYEE, asset: 'USDC', amount: '0.01' }, idempotencyKey: newKey() });

  it('answers every deposit while a settlement batch holds a depositor balance row', async () => {
    // The batch settles payments of A and B and takes their balance rows in wallet order: A's, then B's, which a write
    // still in flight holds (a raw transaction here). While the batch waits for B's row it holds A's.
    const [a, b] = [...agents].sort((x, y) => (x.walletId < y.walletId ? -1 : 1)).slice(0, 2) as [TestAgent, TestAgent];
    for (const x of [a, b]) expect((await pay(x)).status).to.equal(200);
    const writer = new pg.Client({ connectionString: testEnv.databaseUrl });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      await writer.query(`SELECT 1 FROM balances WHERE wallet_id = $1 AND asset_symbol = 'USDC' FOR UPDATE`, [b.walletId]);
      const settling = s.settle();
      await until('the batch waits for B', async () => (await backends(s.db)).some((x) => x.wait_event_type === 'Lock' && isBatch(x)));
      // A deposits and must wait for its balance row (the batch has it); while it waits it must hold nothing others need.
      const first = deposit(a, '1');
      await until('A waits for its balance row', async () => (await backends(s.db)).some((x) => x.wait_event_type === 'Lock' && !isBatch(x)));
      const others = agents.filter((x) => x !== a && x !== b);
      const answers: (TestResponse | null)[] = others.map(() => null);
      const running = others.map((x, i) => deposit(x, '2').then((r) => (answers[i] = r)));
      // Until every other deposit has answered. Deposits queue for the vault row, briefly; what must never be seen is
      // a queue behind a holder that itself waits for a lock (old tree: A, holding the vault row, waits for the batch).
      await until('every other deposit answered', async () => {
        const stuck = vaultHoldersWaiting(await backends(s.db));
        expect(stuck, 'deposits wait for the vault row held by a transaction waiting for another lock').to.deep.equal([]);
        return answers.every((r) => r !== null);
      });
      expect(answers.map((r) => r!.status)).to.deep.equal(others.map(() => 200));
      await writer.query('COMMIT');
      await settling;
      await Promise.all(running);
      expect((await first).status).to.equal(200);
    } finally {
      await writer.query('ROLLBACK').catch(() => {});
      await writer.end();
    }
  });

  it(`executes each of ${AGENTS} agents' concurrent deposits once, holding the vault row for the mint alone, while settlement runs`, async () => {
    const before = watch.holders().length;
    let settling = true;
    const settler = (async () => {
      while (settling) await s.settle();
    })();
    // A vault holder that waits for a lock (other than the vault row's own queue), seen by sampling pg_stat_activity.
    const holderWaits: string[] = [];
    const sampler = (async () => {
      while (settling) {
        holderWaits.push(...vaultHoldersWaiting(await backends(s.db)));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const results = await Promise.all(agents.flatMap((agent, i) => [deposit(agent, `${1 + ((i * 7 + round) % 13)}.${String(100_001 + i * 37 + round).slice(1)}`), pay(agent)]));
        expect(results.filter((r) => r.status !== 200).map((r) => `${r.status} ${JSON.stringify(r.body)}`)).to.deep.equal([]);
        s.clock.advance(37_250); // interest and rewards accrue between rounds
      }
    } finally {
      settling = false;
      await Promise.all([settler, sampler]);
    }
    await s.settle();
    // Bound, counted in statements rather than time: after its vault row lock a deposit sends the mint (vault, position,
    // operation details and event in one statement) and the idempotency record's answer, sent with the COMMIT. Neither
    // can wait: the position is the wallet's own (its balance row, locked before the vault, keeps settlement out), and
    // the other rows are this transaction's own.
    const held = watch.holders().slice(before);
    expect(held.length).to.be.at.least(AGENTS * ROUNDS);
    const longest = held.map((h) => h.after).reduce((m, x) => (x.length > m.length ? x : m), [] as string[]);
    expect(longest.length, `statements while holding the vault row: ${longest.join(' | ')}`).to.be.at.most(2);
    expect(holderWaits, 'a transaction holding the vault row waited for another lock').to.deep.equal([]);

    // A replay answers the stored deposit: no second execution.
    const [key, first] = [...answered.entries()].at(-1)!;
    const replay = await deposit(first.agent, first.amount, key);
    expect([replay.status, replay.body.operation_id]).to.deep.equal([200, first.response.body.operation_id]);
  });

  it('keeps the vault, its positions and the journal equal to every deposit replayed in the order it locked the vault', async () => {
    const ops = new Set([...answered.values()].map((x) => x.response.body.operation_id as string));
    const stored = await s.db('operations').where({ type: 'earn.deposit' }).whereRaw(`details->>'vault_id' = ?`, [vaultId]).select('id', 'status', 'wallet_id', 'amount', 'details', 'created_at');
    expect(stored.map((o) => o.id).sort()).to.deep.equal([...ops].sort());
    expect(stored.every((o) => o.status === 'executed')).to.equal(true);
    // The order the deposits minted in: the vault row each one locked (its shares only grow, one deposit at a time).
    const lockedBy = new Map<string, Record<string, unknown>>();
    for (const h of watch.holders()) {
      const id = h.bindings.find((b): b is string => typeof b === 'string' && ops.has(b));
      if (id && h.locked) lockedBy.set(id, h.locked);
    }
    expect(lockedBy.size).to.equal(ops.size);
    const order = [...ops].sort((x, y) => {
      const [sx, sy] = [BigInt(lockedBy.get(x)!.total_shares as string), BigInt(lockedBy.get(y)!.total_shares as string)];
      return sx < sy ? -1 : sx > sy ? 1 : 0;
    });
    const byId = new Map(stored.map((o) => [o.id as string, o]));
    const v = await s.db('earn_vaults').where({ id: vaultId }).first();
    // vaults.ts accruedVault, as an oracle over the pure maths of src/lib/defi/erc4626.ts.
    let state: erc.VaultState = { totalAssets: 0n, totalShares: 0n, decimalsOffset: v.decimals_offset };
    let acc = 0n;
    let last: Date | null = null;
    const positions = new Map<string, { shares: bigint; principal: bigint; checkpoint: bigint; rewards: bigint }>();
    for (const id of order) {
      const op = byId.get(id)!;
      // What the deposit found under its lock is what every deposit before it left.
      const found = lockedBy.get(id)!;
      expect([found.total_assets, found.total_shares, found.acc_reward_per_share_ray, (found.last_accrued_at as Date | null)?.getTime() ?? null], `the vault as ${id} locked it`).to.deep.equal([
        state.totalAssets.toString(),
        state.totalShares.toString(),
        acc.toString(),
        last?.getTime() ?? null,
      ]);
      const now = op.created_at as Date;
      const seconds: bigint = last ? BigInt(Math.max(0, Math.floor((now.getTime() - last.getTime()) / 1000))) : 0n;
      if (state.totalShares > 0n && seconds > 0n) {
        state = { ...state, totalAssets: erc.accrueTotalAssets(state.totalAssets, BigInt(v.apy_bps), seconds) };
        acc += erc.rewardPerShareDelta(BigInt(v.reward_rate_ray), seconds);
      }
      last = last ? new Date(last.getTime() + Number(seconds) * 1000) : now;
      const amount = BigInt(op.amount);
      const shares = erc.previewDeposit(state, amount);
      expect(op.details.shares, `shares of ${id}`).to.equal(shares.toString());
      state = erc.afterDeposit(state, amount, shares);
      const p = positions.get(op.wallet_id) ?? { shares: 0n, principal: 0n, checkpoint: acc, rewards: 0n };
      positions.set(op.wallet_id, { shares: p.shares + shares, principal: p.principal + amount, checkpoint: acc, rewards: p.rewards + erc.earnedRewards(p.shares, acc, p.checkpoint) });
    }
    expect([v.total_assets, v.total_shares, v.acc_reward_per_share_ray, v.last_accrued_at.getTime()]).to.deep.equal([
      state.totalAssets.toString(),
      state.totalShares.toString(),
      acc.toString(),
      last!.getTime(),
    ]);
    const rows = await s.db('earn_positions').where({ vault_id: vaultId }).select('wallet_id', 'shares', 'principal', 'reward_checkpoint_ray', 'rewards_accrued');
    expect(rows.reduce((sum, r) => sum + BigInt(r.shares), 0n)).to.equal(BigInt(v.total_shares));
    expect(Object.fromEntries(rows.map((r) => [r.wallet_id, [r.shares, r.principal, r.reward_checkpoint_ray, r.rewards_accrued]]))).to.deep.equal(
      Object.fromEntries([...positions].map(([w, p]) => [w, [p.shares.toString(), p.principal.toString(), p.checkpoint.toString(), p.rewards.toString()]])),
    );
    const inVault = (
      await s
        .db('journal_entries')
        .where({ account: `external:earn:vault:${vaultId}` })
        .select('amount')
    ).reduce((sum, j) => sum + BigInt(j.amount), 0n);
    expect(inVault).to.equal(stored.reduce((sum, o) => sum + BigInt(o.amount), 0n));
    await assertBooksBalance(
      s.db,
      agents.map((a) => a.walletId),
    );
  });
});
