// The shared test server with ledger-ready agents (policy, funds) and a settlement helper.
import type { Knex } from 'knex';
import { createClient } from 'redis';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import type { LedgerArea } from '../../src/services/ledger/area.js';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import { startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { testEnv } from '../setup.js';

export interface LedgerServer extends TestServer {
  ledger: LedgerArea;
  clock: FakeClock;
  agent(opts?: { policy?: Record<string, unknown> | 'all' | null; fund?: Record<string, string> }): Promise<TestAgent>;
  settle(): Promise<void>;
}

export async function startLedgerServer(env: Record<string, string> = {}): Promise<LedgerServer> {
  const clock = createFakeClock('2026-03-02T10:00:00.000Z');
  const server = await startTestServer({ clock, env });
  const { ledger } = server.services;
  return Object.assign(server, {
    ledger,
    clock,
    agent: (opts: { policy?: Record<string, unknown> | 'all' | null; fund?: Record<string, string> } = {}) =>
      server.createAgent({ policy: opts.policy === undefined ? 'all' : opts.policy, fund: opts.fund }),
    async settle() {
      for (let i = 0; i < 50; i++) if ((await runSettlementTick({ db: server.db, ledger })) === 0) return;
    },
  });
}

/** md5 of every public table's rows (the outbox included): equal before and after means nothing changed. */
export async function checksumTables(db: Knex): Promise<Record<string, string>> {
  const tables = (await db.raw(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)).rows as { tablename: string }[];
  const out: Record<string, string> = {};
  for (const { tablename } of tables) {
    const row = (await db.raw(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS sum, count(*)::int AS n FROM "${tablename}" t`)).rows[0];
    out[tablename] = `${row.n}:${row.sum}`;
  }
  return out;
}

/** Every Redis key under the server's prefix with its content, except those matching `exclude`. */
export async function snapshotRedis(prefix: string, exclude: RegExp): Promise<Record<string, string>> {
  const client = createClient({ url: testEnv.redisUrl });
  await client.connect();
  try {
    const out: Record<string, string> = {};
    for await (const batch of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      for (const key of ([] as string[]).concat(batch as unknown as string[])) {
        if (exclude.test(key)) continue;
        const type = await client.type(key);
        let value: unknown;
        if (type === 'zset') value = await client.zRangeWithScores(key, 0, -1);
        else if (type === 'hash') value = await client.hGetAll(key);
        else if (type === 'string') value = await client.get(key);
        else value = type;
        out[key] = JSON.stringify(value);
      }
    }
    return out;
  } finally {
    await client.quit();
  }
}
