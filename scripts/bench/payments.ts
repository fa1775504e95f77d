// Benchmark: accepted payments per second over HTTP (many agents, an Idempotency-Key each, a real policy with caps)
// beside a baseline measured in the same run: a raw single-insert transaction loop against the same Postgres.
// Usage: npm exec -- tsx scripts/bench/payments.ts [--seconds 10] [--agents 20] [--concurrency 32]
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, agents: { type: 'string', default: '20' }, concurrency: { type: 'string', default: '32' } } });
const seconds = Number(values.seconds);
const agentCount = Number(values.agents);
const concurrency = Number(values.concurrency);
const adminUrl = process.env.BENCH_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `agent_api_bench_${randomBytes(4).toString('hex')}`;
const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);

async function admin(sql: string) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Runs `task` from `concurrency` workers until the deadline; returns completed counts by outcome. */
async function drive(task: () => Promise<boolean>): Promise<{ ok: number; failed: number; elapsed: number }> {
  let ok = 0;
  let failed = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        if (await task()) ok++;
        else failed++;
      }
    }),
  );
  return { ok, failed, elapsed: (performance.now() - started) / 1000 };
}

async function main() {
  await admin(`CREATE DATABASE ${dbName}`);
  const config = loadConfig({ NODE_ENV: 'development', DATABASE_URL: databaseUrl, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379', REDIS_PREFIX: `bench:${dbName}:`, AUTO_MIGRATE: 'true', RUN_WORKER: 'false', LOG_LEVEL: 'silent', MASTER_KEY: 'bench-master-key-0123456789abcdef0123456789', VALIDATE_RESPONSES: 'false' }, () => {});
  const built = await createApp(config);
  const ledger = built.services.ledger;
  const server = createServer(built.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const { owner_id } = await built.services.agents.createOwner(built.db, { email: 'bench@example.com' });
    const agents: Record<string, string>[] = [];
    for (let i = 0; i < agentCount; i++) {
      const a = await built.services.agents.createAgent(built.db, { ownerId: owner_id, name: `bench ${i}` });
      const wallet = await built.db('wallets').where({ id: a.wallet_id }).first();
      if (!wallet.address) await ledger.assignWalletKey(built.db, { agentId: a.agent_id, walletId: a.wallet_id, ownerId: owner_id });
      await ledger.policy.set(built.db, a.agent_id, { operation_types: ['payment'], allowed_assets: ['USDC'], per_tx_usd: '100', per_period_usd: '100000000', period: 'day', max_txs_per_period: 100_000_000 });
      await ledger.account.fund(built.db, a.agent_id, { asset: 'USDC', amount: '100000000' });
      await built.services.agents.setRateLimit(built.db, a.agent_id, { class: 'write', limit: 10_000_000, burst: 10_000_000, windowSeconds: 60 });
      agents.push({ 'x-agent-id': a.agent_id, 'x-api-key': a.api_key, 'content-type': 'application/json' });
    }
    const body = JSON.stringify({ to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' });
    let n = 0;
    const api = await drive(async () => {
      const headers = { ...agents[n++ % agents.length]!, 'idempotency-key': randomUUID() };
      const res = await fetch(`${base}/v1/agent/payments`, { method: 'POST', headers, body });
      await res.arrayBuffer();
      return res.status === 200;
    });

    const pool = new pg.Pool({ connectionString: databaseUrl, max: concurrency });
    await pool.query('CREATE TABLE bench_raw (id uuid PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())');
    const raw = await drive(async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO bench_raw (id, payload) VALUES ($1, $2)', [randomUUID(), body]);
        await client.query('COMMIT');
        return true;
      } catch {
        await client.query('ROLLBACK').catch(() => {});
        return false;
      } finally {
        client.release();
      }
    });
    await pool.end();

    const apiRate = api.ok / api.elapsed;
    const rawRate = raw.ok / raw.elapsed;
    const line = (name: string, rate: number, r: { ok: number; failed: number }) => `${name.padEnd(46)} ${rate.toFixed(1).padStart(9)} /s   (${r.ok} ok, ${r.failed} refused or failed)`;
    process.stdout.write(
      [
        `payments bench: ${seconds}s per phase, ${agentCount} agents, concurrency ${concurrency}, Postgres ${new URL(databaseUrl).host}`,
        line('accepted payments (HTTP, idempotency, policy)', apiRate, api),
        line('baseline: raw single-insert transactions', rawRate, raw),
        `ratio: ${(apiRate / rawRate).toFixed(3)} of the raw insert rate`,
      ].join('\n') + '\n',
    );
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await built.close();
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${String(err instanceof Error ? err.stack : err)}\n`);
    process.exit(1);
  },
);
