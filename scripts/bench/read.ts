// Read-path benchmark: authenticated GET /v1/agent/self through the whole pipeline (API-key check in
// Postgres, Redis rate limit, openapi-backend routing, envelope), beside a bare Express 5 JSON route and
// a bare node:http JSON route measured in the same run on the same machine (the baselines).
//
// Usage: npm run --silent bench:read   (make bench-read)  [--seconds 10] [--connections 10]
// Uses DATABASE_URL when set, else a scratch database on TEST_PG_ADMIN_URL (default
// postgres://postgres@127.0.0.1:5432/postgres) that is dropped at the end; REDIS_URL or the local Redis.
// The load generator runs in a worker thread (autocannon `workers: 1`) so it does not share the event
// loop with the server under test. The app runs with production settings (no response validation) and
// LOG_LEVEL=warn so per-request log lines do not land in the table. Not part of CI.
import express from 'express';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';

// autocannon ships no type declarations (and @types/autocannon is not installed): type what is used.
interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (opts: { url: string; headers: Record<string, string>; connections: number; duration: number; workers?: number }) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 10);
const WARMUP_SECONDS = 2;

interface Figures {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Stops accepting and closes the keep-alive connections as they go idle. */
async function close(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  server.closeIdleConnections();
  await closed;
  clearInterval(sweep);
}

async function measure(name: string, url: string, headers: Record<string, string> = {}): Promise<Figures> {
  const run = (duration: number) => autocannon({ url, headers, connections: CONNECTIONS, duration, workers: 1 });
  await run(WARMUP_SECONDS);
  const result = await run(SECONDS);
  return { name, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

async function main() {
  const adminUrl = process.env.TEST_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `agent_api_bench_${randomBytes(4).toString('hex')}`;
  let databaseUrl = process.env.DATABASE_URL || '';
  const scratch = !databaseUrl;
  if (scratch) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  }
  const results: Figures[] = [];
  try {
    const config = loadConfig({
      NODE_ENV: 'production',
      BASE_URL: 'http://127.0.0.1:3000',
      DATABASE_URL: databaseUrl,
      REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
      REDIS_PREFIX: `agentapi-bench:${randomBytes(4).toString('hex')}:`,
      MASTER_KEY: randomBytes(32).toString('hex'),
      LOG_LEVEL: 'warn',
      RUN_WORKER: 'false',
    });
    const built = await createApp(config);
    try {
      const { owner_id } = await built.services.agents.createOwner(built.db, { email: `bench-${randomBytes(4).toString('hex')}@example.com` });
      const agent = await built.services.agents.createAgent(built.db, { ownerId: owner_id, name: 'bench agent' });
      await built.services.agents.setRateLimit(built.db, agent.agent_id, { class: 'read', limit: 1_000_000_000, burst: 1_000_000_000, windowSeconds: 60 });
      const appServer = createServer(built.app);
      appServer.keepAliveTimeout = 5_000;
      const appUrl = await listen(appServer);
      const headers = { 'x-agent-id': agent.agent_id, 'x-api-key': agent.api_key };
      const check = await fetch(`${appUrl}/v1/agent/self`, { headers });
      if (check.status !== 200) throw new Error(`GET /v1/agent/self answered ${check.status}: ${await check.text()}`);
      results.push(await measure('agent api GET /v1/agent/self', `${appUrl}/v1/agent/self`, headers));
      await close(appServer);
      // Requests autocannon abandoned at its deadline keep running after their sockets close: let them
      // finish before the pool closes (a query on a destroyed pool waits out the 60 s acquire timeout).
      // Idle means tarn's counters stay at zero for 500 ms (a request may sit between two queries); at most 10 s.
      const pool = (built.db.client as { pool?: { numUsed(): number; numPendingAcquires(): number } }).pool;
      for (let i = 0, idle = 0; pool && i < 500 && idle < 25; i++) {
        idle = pool.numUsed() + pool.numPendingAcquires() === 0 ? idle + 1 : 0;
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await built.close();
    }

    // The same shape of answer from the bare frameworks.
    const sample = { ok: true, agent: { id: '00000000-0000-4000-8000-000000000000', name: 'bench agent', enabled: true } };
    const bareExpress = express();
    bareExpress.disable('x-powered-by');
    bareExpress.get('/self', (_req, res) => {
      res.json(sample);
    });
    const expressServer = createServer(bareExpress);
    results.push(await measure('bare express 5 JSON route', `${await listen(expressServer)}/self`));
    await close(expressServer);

    const nodeServer = createServer((_req, res) => {
      const body = JSON.stringify(sample);
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    results.push(await measure('bare node:http JSON route', `${await listen(nodeServer)}/self`));
    await close(nodeServer);
  } finally {
    if (scratch) {
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  }

  const node = results[2]!;
  const expressFig = results[1]!;
  const pad = (s: string, n: number) => s.padEnd(n);
  const num = (n: number, d = 0) => n.toFixed(d).padStart(10);
  process.stdout.write(`read benchmark: ${SECONDS} s each, ${CONNECTIONS} connections, Node ${process.version}\n\n`);
  process.stdout.write(`${pad('target', 32)}${'req/s'.padStart(10)}${'p50 ms'.padStart(10)}${'p99 ms'.padStart(10)}${'vs node'.padStart(10)}${'vs expr'.padStart(10)}${'non-2xx'.padStart(10)}${'errors'.padStart(10)}\n`);
  for (const r of results) {
    process.stdout.write(
      `${pad(r.name, 32)}${num(r.rps)}${num(r.p50, 2)}${num(r.p99, 2)}${num(r.rps / node.rps, 2)}${num(r.rps / expressFig.rps, 2)}${num(r.non2xx)}${num(r.errors)}\n`,
    );
  }
  if (results.some((r) => r.non2xx > 0 || r.errors > 0)) {
    process.stderr.write('some requests failed: the figures are not comparable\n');
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
