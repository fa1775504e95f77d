// Scale-out run under faults (issue 15), as operators deploy it: three API processes and two workers (compiled
// JavaScript) on one fresh Postgres database, reached through a TCP proxy this script can cut, and a Redis server of
// its own; a loopback TLS webhook receiver; 200 agents of mixed traffic. Every 30 s one API process and one worker are
// SIGKILLed and restarted; Redis is stopped for 10 s once; Postgres is cut for 10 s once. After the drain, a quiet window
// of writes checks that agentapi_operations_total summed over the 5 processes equals the table (scripts/soak-counters.ts).
// MCP clients send every request to the next API process in turn and resume their event streams on another process
// when one is killed (scripts/soak-mcp.ts): sessions live in Redis, so no routing is sticky.
// At the end it prints and checks the invariants and exits 1 when one fails.
//
// Bounded: SOAK_SECONDS of load (default 150, at most 200), the whole run under 5 minutes (a hard timer tears everything
// down), loopback only. The shared Postgres and Redis are never stopped: the database is a fresh one (dropped at the
// end) and the Redis server is this script's own. Run with `make soak` (`npm run soak`), never by `npm test`.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { buildCore } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createKnex, migrateLatest } from '../src/db/knex.js';
import { parseAmount } from '../src/lib/money.js';
import { EMITTED_EVENT_TYPES } from '../src/webhooks/event-types.js';
import { createTestPki } from '../test/webhooks/helpers/receiver.js';
import { ALL_SCOPES } from '../src/auth/principal.js';
import { systemClock } from '../src/lib/clock.js';
import { mintAccessToken } from '../test/mcp/helpers.js';
import type { TestServer } from '../test/helpers/server.js';
import { compareOperationCounters, countOperationRows, scrapeProcess, type CounterComparison } from './soak-counters.js';
import { createMcpSoak } from './soak-mcp.js';

const SOAK_SECONDS = Math.min(200, Math.max(20, Number(process.env.SOAK_SECONDS ?? 150)));
const AGENTS = Math.min(200, Math.max(10, Number(process.env.SOAK_AGENTS ?? 200)));
const HARD_LIMIT_MS = 295_000;
const CONCURRENCY = 16;
/** MCP clients (issue 30 item 7), each with a session and a stream, and the loops sending their tool calls. */
const MCP_CLIENTS = 6;
const MCP_RUNNERS = 2;
const KILL_EVERY_MS = 30_000;
const OUTAGE_MS = 10_000;
/** After an outage ends, 503s are still expected this long (Redis reconnect backoff, pool re-dial). */
const RECOVERY_MS = 5_000;
/** The counter window after the faults (scripts/soak-counters.ts): this long of writes, then a drain of at most COUNTER_DRAIN_MS. */
const COUNTER_LOAD_MS = 8_000;
const COUNTER_DRAIN_MS = 20_000;
const REQUEST_TIMEOUT_MS = 30_000;
const PROBE_BURST = 8;
const PROBE_CLASSES = ['read', 'write', 'webhook_management', 'simulate'] as const;
const MAX_REQUESTS = 200_000;
const ADMIN_URL = process.env.SOAK_PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const PG_TARGET = new URL(ADMIN_URL);
const MASTER_KEY = 'soak-master-key-0123456789abcdef0123456789';
const ARTIFACTS = join(process.cwd(), 'test-artifacts', 'soak');

const started = Date.now();
const elapsed = () => Date.now() - started;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (msg: string) => process.stdout.write(`[soak ${(elapsed() / 1000).toFixed(1).padStart(5)}s] ${msg}\n`);

type RateClass = (typeof PROBE_CLASSES)[number];
interface Sample {
  at: number;
  cls: RateClass;
  op: string;
  api: number;
  status: number | null;
  error: string | null;
  ms: number;
  body?: Record<string, unknown>;
  retryAfter?: string | null;
}

// ---- helpers: ports, processes, Redis, the Postgres proxy, the receiver ---------------------------------------------

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

interface Managed {
  name: string;
  child: ChildProcess | null;
  up: boolean;
  logFile: WriteStream;
}

function spawnLogged(m: Managed, cmd: string, args: string[], env: Record<string, string>, readyLine?: RegExp): Promise<void> {
  const child = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  m.child = child;
  child.stdout!.pipe(m.logFile, { end: false });
  child.stderr!.pipe(m.logFile, { end: false });
  if (!readyLine) {
    m.up = true;
    return Promise.resolve();
  }
  return new Promise<void>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${m.name} not ready within 30 s`)), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      if (m.up) return;
      seen += chunk.toString('utf8');
      if (readyLine.test(seen)) {
        clearTimeout(timer);
        m.up = true;
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      m.up = false;
      if (!readyLine.test(seen)) reject(new Error(`${m.name} exited (${code}) before it was ready; see ${ARTIFACTS}`));
    });
  });
}

async function kill(m: Managed, signal: NodeJS.Signals): Promise<void> {
  const child = m.child;
  m.up = false;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      socket.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
  });
}

/** A TCP proxy to Postgres that can drop every connection and refuse new ones (a network cut, fast failures). */
function startPgProxy(port: number) {
  let cut = false;
  const pairs = new Set<[Socket, Socket]>();
  const server = createNetServer((client) => {
    if (cut) return void client.destroy();
    const upstream = connect(Number(PG_TARGET.port || 5432), PG_TARGET.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return {
    listen: () => new Promise<void>((r) => server.listen(port, '127.0.0.1', r)),
    cut() {
      cut = true;
      for (const [a, b] of [...pairs]) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
    restore() {
      cut = false;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Loopback HTTPS receiver: records which event ids arrived at which endpoint path (the dedupe key is the event id). */
async function startReceiver(pki: { key: string; cert: string }) {
  const received = new Map<string, Set<string>>();
  let requests = 0;
  const server = createHttpsServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      const id = String(req.headers['service-webhook-id'] ?? '');
      const path = req.url ?? '';
      if (!received.has(path)) received.set(path, new Set());
      received.get(path)!.add(id);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, received, requests: () => requests, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
const randomAddress = () => `0x${randomBytes(20).toString('hex')}`;
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

// ---- the run ---------------------------------------------------------------------------------------------------------

interface SoakAgent {
  agentId: string;
  walletId: string;
  headers: Record<string, string>;
  webhookId: string;
}

async function main(): Promise<number> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const dbName = `agent_api_soak_${randomBytes(4).toString('hex')}`;
  const directUrl = ADMIN_URL.replace(/\/[^/]*$/, `/${dbName}`);
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err: unknown) => log(`cleanup: ${String(err)}`));
    cleanups.length = 0;
  };
  const hardStop = setTimeout(() => {
    log(`HARD LIMIT ${HARD_LIMIT_MS / 1000} s reached: tearing down`);
    void cleanup().finally(() => process.exit(2));
  }, HARD_LIMIT_MS);
  hardStop.unref();
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));

  try {
    // Database: fresh, migrated directly (not through the proxy), dropped at the end whatever happens.
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    cleanups.push(async () => {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await c.end();
    });
    const migrator = await createKnex({ databaseUrl: directUrl, dataDir: '', poolMax: 2 });
    await migrateLatest(migrator);
    await migrator.destroy();

    // Redis of our own, on a free loopback port.
    const redisPort = await freePort();
    const redis: Managed = { name: 'redis', child: null, up: false, logFile: createWriteStream(join(ARTIFACTS, 'redis.log')) };
    const startRedis = async () => {
      await spawnLogged(redis, 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {});
      for (let i = 0; i < 50 && !(await redisPing(redisPort)); i++) await sleep(100);
    };
    await startRedis();
    cleanups.push(() => kill(redis, 'SIGTERM'));

    const proxyPort = await freePort();
    const proxy = startPgProxy(proxyPort);
    await proxy.listen();
    cleanups.push(() => proxy.close());
    const proxiedUrl = `postgres://${PG_TARGET.username || 'postgres'}${PG_TARGET.password ? `:${PG_TARGET.password}` : ''}@127.0.0.1:${proxyPort}/${dbName}`;

    const pki = await createTestPki();
    const caFile = join(tmpdir(), `soak-ca-${randomBytes(4).toString('hex')}.pem`);
    writeFileSync(caFile, pki.ca);
    const receiver = await startReceiver(pki);
    cleanups.push(() => receiver.close());

    const env: Record<string, string> = {
      NODE_ENV: 'development',
      DATABASE_URL: proxiedUrl,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      REDIS_PREFIX: 'soak:',
      MASTER_KEY,
      AUTO_MIGRATE: 'false',
      // Five processes on the machine's shared Postgres (max_connections 100, other test runs beside us): stay small.
      DATABASE_POOL_MAX: '5',
      LOG_LEVEL: 'warn',
      UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true',
      VALIDATE_RESPONSES: 'false',
      WEBHOOK_LEASE_MS: '5000',
      WEBHOOK_ATTEMPT_TIMEOUT_MS: '3000',
      SHUTDOWN_GRACE_MS: '3000',
      NODE_EXTRA_CA_CERTS: caFile,
      MCP_EVENT_POLL_MS: '200',
    };
    // One deployment: the three API processes share one BASE_URL (the audience of the MCP clients' tokens).
    const apiPorts = await Promise.all([0, 1, 2].map(() => freePort()));
    env.BASE_URL = `http://127.0.0.1:${apiPorts[0]}`;

    // Data: agents, policies, funds, a webhook endpoint each, an earn vault; probe agents for exact rate limits.
    log(`setup: database ${dbName}, redis :${redisPort}, pg proxy :${proxyPort}, receiver :${receiver.port}; ${AGENTS} agents`);
    const core = await buildCore(loadConfig({ ...env, DATABASE_URL: directUrl, RUN_WORKER: 'false', LOG_LEVEL: 'silent' }, () => {}));
    const { services, db } = core;
    const owner = await services.agents.createOwner(db, { email: `soak-${dbName}@example.com` });
    const vault = await services.defi.earn.addVault(db, { name: 'soak vault', protocol: 'morpho', asset: 'USDC', apyBps: 500, capacity: null, rewardAsset: null });
    const usdc = await services.ledger.ledger.requireAsset(db, 'USDC');
    const eventTypes = EMITTED_EVENT_TYPES.filter((t) => t !== 'webhook.test');
    const makeAgent = async (name: string): Promise<SoakAgent> => {
      const created = await services.agents.createAgent(db, { ownerId: owner.owner_id, name });
      await services.ledger.policy.allowAll(db, created.agent_id);
      await services.ledger.ledger.deposit(db, { walletId: created.wallet_id, asset: 'USDC', amount: parseAmount('100000', usdc.decimals) });
      const caller = { agentId: created.agent_id, walletId: created.wallet_id };
      const { webhook } = await services.webhooks.create(db, caller, { url: `https://127.0.0.1:${receiver.port}/hook/${created.agent_id}`, event_types: [...eventTypes] });
      return { agentId: created.agent_id, walletId: created.wallet_id, headers: { 'x-agent-id': created.agent_id, 'x-api-key': created.api_key }, webhookId: webhook.id };
    };
    const agents: SoakAgent[] = [];
    for (let i = 0; i < AGENTS; i += 20) agents.push(...(await Promise.all(Array.from({ length: Math.min(20, AGENTS - i) }, (_, j) => makeAgent(`soak ${i + j}`)))));
    const probeAgents: SoakAgent[] = [];
    for (let i = 0; i < 4; i++) {
      const a = await makeAgent(`soak probe ${i}`);
      // Refill of 100 per hour: during a burst of a second or two the bucket grants exactly `burst`.
      for (const cls of PROBE_CLASSES) await services.agents.setRateLimit(db, a.agentId, { class: cls, limit: 100, burst: PROBE_BURST, windowSeconds: 3600 });
      probeAgents.push(a);
    }
    // MCP clients: agents of their own (their events are theirs alone), each with an access token for /mcp.
    const mcpClients: Array<{ agentId: string; token: string }> = [];
    for (let i = 0; i < MCP_CLIENTS; i++) {
      const a = await makeAgent(`soak mcp ${i}`);
      await services.agents.setRateLimit(db, a.agentId, { class: 'write', limit: 100_000, burst: 1000, windowSeconds: 3600 });
      await services.agents.setRateLimit(db, a.agentId, { class: 'read', limit: 100_000, burst: 1000, windowSeconds: 3600 });
      const server = { config: core.config, db, clock: systemClock } as unknown as TestServer;
      mcpClients.push({ agentId: a.agentId, token: await mintAccessToken(server, { agentId: a.agentId, ownerId: owner.owner_id } as never, { scopes: [...ALL_SCOPES], lifetimeSeconds: 3600 }) });
    }
    await core.close();

    // Processes: three APIs, two workers, compiled JavaScript on this Node.
    const apis: Managed[] = apiPorts.map((_, i) => ({ name: `api-${i + 1}`, child: null, up: false, logFile: createWriteStream(join(ARTIFACTS, `api-${i + 1}.log`)) }));
    const workers: Managed[] = [0, 1].map((i) => ({ name: `worker-${i + 1}`, child: null, up: false, logFile: createWriteStream(join(ARTIFACTS, `worker-${i + 1}.log`)) }));
    const metricsPorts = await Promise.all([0, 1, 2, 3, 4].map(() => freePort()));
    const startApi = (i: number) =>
      spawnLogged(apis[i]!, process.execPath, ['dist/src/server.js'], { ...env, RUN_WORKER: 'false', PORT: String(apiPorts[i]), METRICS_PORT: String(metricsPorts[i]) }, /listening on http/);
    const startWorker = (i: number) => spawnLogged(workers[i]!, process.execPath, ['dist/scripts/worker.js'], { ...env, METRICS_PORT: String(metricsPorts[3 + i]) });
    await Promise.all([0, 1, 2].map(startApi));
    await Promise.all([0, 1].map(startWorker));
    for (const m of [...apis, ...workers]) cleanups.push(() => kill(m, 'SIGKILL'));
    log(`started ${apis.length} API processes (:${apiPorts.join(', :')}) and ${workers.length} workers; load for ${SOAK_SECONDS} s`);

    // ---- the request layer -------------------------------------------------------------------------------------------
    const samples: Sample[] = [];
    let loadEnd = Number.POSITIVE_INFINITY;
    let rr = 0;
    const liveApi = (): number => {
      for (let k = 0; k < 3; k++) {
        const i = rr++ % 3;
        if (apis[i]!.up) return i;
      }
      return rr % 3;
    };
    async function send(cls: RateClass, op: string, method: string, path: string, agent: SoakAgent, body?: unknown, key?: string, api = liveApi()): Promise<Sample> {
      const t0 = performance.now();
      const sample: Sample = { at: elapsed(), cls, op, api, status: null, error: null, ms: 0 };
      try {
        const headers: Record<string, string> = { ...agent.headers };
        if (body !== undefined) headers['content-type'] = 'application/json';
        if (key) headers['idempotency-key'] = key;
        const res = await fetch(`http://127.0.0.1:${apiPorts[api]}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        const text = await res.text();
        sample.status = res.status;
        sample.retryAfter = res.headers.get('retry-after');
        try {
          sample.body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          sample.body = { raw: text.slice(0, 200) };
        }
      } catch (err) {
        sample.error = (err as { cause?: { code?: string }; name?: string }).cause?.code ?? (err as Error).name ?? 'error';
      }
      sample.ms = performance.now() - t0;
      if (samples.length < MAX_REQUESTS) samples.push(sample);
      return sample;
    }
    /** A client's retry: connection failures go to another process; a 503 waits its Retry-After (≤ 2 s); writes keep their key. */
    async function call(cls: RateClass, op: string, method: string, path: string, agent: SoakAgent, body?: unknown, key?: string): Promise<Sample> {
      let s = await send(cls, op, method, path, agent, body, key);
      for (let attempt = 1; attempt < 4 && Date.now() < Math.min(loadEnd + 10_000, started + HARD_LIMIT_MS - 60_000); attempt++) {
        if (s.error !== null) await sleep(100);
        else if (s.status === 503) await sleep(Math.min(2000, Number(s.retryAfter ?? 1) * 1000));
        else break;
        s = await send(cls, op, method, path, agent, body, key);
      }
      return s;
    }

    // [weight, action, whether it writes operations]
    const actions: Array<[number, (a: SoakAgent) => Promise<unknown>, boolean?]> = [
      [12, (a) => call('read', 'getSelf', 'GET', '/v1/agent/self', a)],
      [10, (a) => call('read', 'listBalances', 'GET', '/v1/agent/balances', a)],
      [8, (a) => call('read', 'listOperations', 'GET', '/v1/agent/operations?limit=10', a)],
      [6, (a) => call('read', 'getAccount', 'GET', '/v1/agent/account', a)],
      [14, (a) => call('write', 'createPayment', 'POST', '/v1/agent/payments', a, { to: randomAddress(), asset: 'USDC', amount: '0.01' }, randomUUID()), true],
      [
        6,
        async (a) => {
          const q = await call('simulate', 'createConversionQuote', 'POST', '/v1/agent/conversions/quote', a, { from_asset: 'USDC', to_asset: 'EURC', amount: '1' }, randomUUID());
          const quoteId = (q.body?.quote as { quote_id?: unknown } | undefined)?.quote_id;
          if (q.status === 200 && typeof quoteId === 'string') await call('write', 'createConversion', 'POST', '/v1/agent/conversions', a, { quote_id: quoteId }, randomUUID());
        },
        true,
      ],
      [6, (a) => call('write', 'createEarnDeposit', 'POST', '/v1/agent/earn/deposit', a, { asset: 'USDC', vault_id: vault.vault_id, amount: '1' }, randomUUID()), true],
      [3, (a) => call('webhook_management', 'listWebhooks', 'GET', '/v1/agent/webhooks', a)],
      [3, (a) => call('webhook_management', 'getWebhook', 'GET', `/v1/agent/webhooks/${a.webhookId}`, a)],
      [2, (a) => call('webhook_management', 'listWebhookDeliveries', 'GET', `/v1/agent/webhooks/${a.webhookId}/deliveries?limit=5`, a)],
    ];
    const totalWeight = actions.reduce((n, [w]) => n + w, 0);
    const pickAction = () => {
      let r = Math.random() * totalWeight;
      for (const [w, fn] of actions) if ((r -= w) < 0) return fn;
      return actions[0]![1];
    };

    // Warm-up: each process compiles a route's validators on first use (and all of them after listen); let that
    // settle before the clock starts, so latency and probes measure the steady state (bounded to 30 s).
    const warmUntil = Date.now() + 30_000;
    for (let round = 0; Date.now() < warmUntil; round++) {
      const t0 = performance.now();
      const warmRound = Promise.all(
        [0, 1, 2].map(async (api) => {
          for (const [, fn] of actions) await fn(agents[(api + round) % agents.length]!);
        }),
      );
      await Promise.race([warmRound, sleep(Math.max(0, warmUntil - Date.now()))]);
      if (performance.now() - t0 < 1500 && round > 0) break;
    }
    samples.length = 0;
    log('warm: starting the clock');

    // ---- the fault schedule ------------------------------------------------------------------------------------------
    const loadStart = Date.now();
    // A slow setup shortens the load rather than the drain, the counter window and the checks (105 s kept for them).
    const seconds = Math.max(20, Math.min(SOAK_SECONDS, Math.floor((started + HARD_LIMIT_MS - 105_000 - loadStart) / 1000)));
    if (seconds < SOAK_SECONDS) log(`setup was slow: load shortened to ${seconds} s`);
    loadEnd = loadStart + seconds * 1000;
    const redisStopAt = Math.round(seconds * 0.35) * 1000;
    const pgCutAt = Math.round(seconds * 0.65) * 1000;
    const killTimes: number[] = [];
    for (let t = KILL_EVERY_MS; t < seconds * 1000; t += KILL_EVERY_MS) killTimes.push(t);
    const outages: Array<{ what: string; from: number; to: number }> = [];
    const kills: Array<{ api: number; worker: number; at: number; upAt: number }> = [];
    // Probes where nothing else happens: ≥ 5 s from a kill, outside outages and their recovery.
    const quiet = (t: number) => killTimes.every((k) => t < k - 8000 || t > k + 5000) && [redisStopAt, pgCutAt].every((o) => t < o - 8000 || t > o + OUTAGE_MS + RECOVERY_MS + 2000);
    const candidates: number[] = [];
    for (let t = 5000; t <= seconds * 1000 - 5000; t += 1000) if (quiet(t)) candidates.push(t);
    const probeTimes = [...new Set([candidates[0], candidates[Math.floor(candidates.length / 2)]].filter((t): t is number => t !== undefined))];

    const probes: Array<{ at: string; cls: RateClass; granted: number; refused: number; other: string[] }> = [];
    /** Bursts of 3 x burst requests per class, all classes at once, spread over the three processes. */
    async function probe(label: string, agent: SoakAgent): Promise<void> {
      const burst = async (cls: RateClass) => {
        const requests = Array.from({ length: PROBE_BURST * 3 }, (_, i) => {
          const api = i % 3;
          if (cls === 'read') return send(cls, 'probe', 'GET', '/v1/agent/self', agent, undefined, undefined, api);
          if (cls === 'write') return send(cls, 'probe', 'POST', '/v1/agent/payments', agent, { to: randomAddress(), asset: 'USDC', amount: '0.01' }, randomUUID(), api);
          if (cls === 'simulate') return send(cls, 'probe', 'POST', '/v1/agent/conversions/quote', agent, { from_asset: 'USDC', to_asset: 'WETH', amount: '1' }, randomUUID(), api);
          return send(cls, 'probe', 'GET', '/v1/agent/webhooks', agent, undefined, undefined, api);
        });
        const results = await Promise.all(requests);
        const refused = results.filter((r) => r.status === 429).length;
        const other = results.filter((r) => r.status === null || r.status >= 500).map((r) => r.error ?? String(r.status));
        probes.push({ at: label, cls, granted: results.length - refused - other.length, refused, other });
      };
      await Promise.all(PROBE_CLASSES.map(burst));
    }

    const timeline = (async () => {
      const events: Array<[number, () => Promise<void>]> = [];
      killTimes.forEach((t, k) =>
        events.push([
          t,
          async () => {
            const a = k % 3;
            const w = k % 2;
            const at = elapsed();
            await Promise.all([kill(apis[a]!, 'SIGKILL'), kill(workers[w]!, 'SIGKILL')]);
            log(`SIGKILL ${apis[a]!.name} and ${workers[w]!.name}; restarting`);
            await Promise.all([startApi(a), startWorker(w)]);
            kills.push({ api: a, worker: w, at, upAt: elapsed() });
          },
        ]),
      );
      events.push([
        redisStopAt,
        async () => {
          const from = elapsed();
          await kill(redis, 'SIGKILL');
          log('Redis stopped for 10 s');
          await sleep(OUTAGE_MS);
          await startRedis();
          outages.push({ what: 'redis', from, to: elapsed() });
          log('Redis back');
        },
      ]);
      events.push([
        pgCutAt,
        async () => {
          const from = elapsed();
          proxy.cut();
          log('Postgres connections cut for 10 s');
          await sleep(OUTAGE_MS);
          proxy.restore();
          outages.push({ what: 'postgres', from, to: elapsed() });
          log('Postgres reachable again');
        },
      ]);
      probeTimes.forEach((t, i) => events.push([t, () => probe(`t=${Math.round(t / 1000)}s`, probeAgents[i]!)]));
      // Each event runs on its own clock, so a slow restart does not delay an outage.
      await Promise.all(
        events.map(async ([t, fn]) => {
          await sleep(Math.max(0, loadStart + t - Date.now()));
          await fn();
        }),
      );
    })();

    const mcp = createMcpSoak({ apiUrl: (i) => `http://127.0.0.1:${apiPorts[i]}`, up: (i) => apis[i]!.up, elapsed, log }, mcpClients);
    await mcp.start();
    const runners = Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < loadEnd && samples.length < MAX_REQUESTS) await pickAction()(pick(agents));
    });
    await Promise.all([...runners, mcp.load(loadEnd, MCP_RUNNERS)]);
    await timeline;
    log(`load done: ${samples.length} requests`);
    // One more probe after every fault has healed, on a fresh agent.
    if (apis.every((a) => a.up) && (await redisPing(redisPort))) await probe('after load', probeAgents[3]!);

    // ---- drain: settlement and deliveries, bounded -------------------------------------------------------------------
    const check = await createKnex({ databaseUrl: directUrl, dataDir: '', poolMax: 2 });
    cleanups.push(() => check.destroy());
    const drainUntil = Math.min(Date.now() + 90_000, started + HARD_LIMIT_MS - 55_000);
    let live = { deliveries: -1, operations: -1 };
    while (Date.now() < drainUntil) {
      try {
        const [d] = await check('webhook_deliveries').whereIn('status', ['pending', 'retrying', 'in_flight']).count<{ count: string }[]>('* as count');
        const [o] = await check('operations').whereIn('status', ['accepted', 'submitted']).count<{ count: string }[]>('* as count');
        live = { deliveries: Number(d!.count), operations: Number(o!.count) };
        if (live.deliveries === 0 && live.operations === 0) break;
      } catch (err) {
        log(`drain probe failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      await sleep(1000);
    }
    log(`drained: ${live.deliveries} deliveries and ${live.operations} operations still live`);
    const executedOf = async (ids: string[]) => {
      const done = new Set<string>();
      for (let i = 0; i < ids.length; i += 1000)
        for (const r of await check('operations')
          .whereIn('id', ids.slice(i, i + 1000))
          .where({ status: 'executed' })
          .select('id'))
          done.add(r.id);
      return done;
    };
    const mcpResult = await mcp.finish(executedOf, 20_000);
    log('MCP streams closed');

    // ---- the counter window: no kills or outages, every process scraped at both ends ---------------------------------
    // Across the SIGKILLs above the counters cannot add up (a killed process takes its unscraped increments with it), so
    // agentapi_operations_total is checked over a window of its own: quiet at the start (nothing live, nothing due), a
    // few seconds of writes through the three APIs, settled by the two workers, quiet again at the end.
    const metricsUrls = metricsPorts.map((p) => `http://127.0.0.1:${p}/metrics`);
    const liveOperations = async () => Number(((await check('operations').whereIn('status', ['accepted', 'submitted']).count({ n: '*' })) as Array<{ n: string }>)[0]!.n);
    let counters: CounterComparison | string;
    try {
      if ((await liveOperations()) > 0) throw new Error('operations still live after the drain: no quiet start');
      const before = { table: await countOperationRows(check), processes: await Promise.all(metricsUrls.map(scrapeProcess)) };
      const writes = actions.filter(([, , write]) => write);
      const windowEnd = Date.now() + COUNTER_LOAD_MS;
      const writers = Array.from({ length: CONCURRENCY }, async () => {
        while (Date.now() < windowEnd) await pick(writes)[1](pick(agents));
      });
      await Promise.all(writers);
      const quietBy = Date.now() + COUNTER_DRAIN_MS;
      while ((await liveOperations()) > 0 && Date.now() < quietBy) await sleep(500);
      if ((await liveOperations()) > 0) throw new Error(`operations still live ${COUNTER_DRAIN_MS / 1000} s after the window: no quiet end`);
      const after = { processes: await Promise.all(metricsUrls.map(scrapeProcess)), table: await countOperationRows(check) };
      counters = compareOperationCounters({ before: before.processes, after: after.processes, tableBefore: before.table, tableAfter: after.table });
    } catch (err) {
      counters = err instanceof Error ? err.message : String(err);
    }
    log('counter window done');

    const scrape = async (port: number) =>
      (
        await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) }).then(
          (r) => r.text(),
          () => '',
        )
      ).split('\n');
    const apiMetrics = await scrape(metricsPorts[0]!);
    const workerMetrics = await scrape(metricsPorts[3]!);
    for (const m of [...apis, ...workers]) await kill(m, 'SIGTERM');

    // ---- checks ------------------------------------------------------------------------------------------------------
    const results: Array<[string, boolean, string]> = [];
    /** Whether a request's lifetime overlaps an outage (or the recovery right after it). */
    const inOutage = (s: Sample) => outages.some((o) => s.at + s.ms >= o.from - 500 && s.at <= o.to + RECOVERY_MS);
    const tally = <T>(list: T[], keyOf: (s: T) => string) => Object.entries(list.reduce<Record<string, number>>((m, s) => ((m[keyOf(s)] = (m[keyOf(s)] ?? 0) + 1), m), {}));
    const byStatus = (list: Sample[]) => tally(list, (s) => `${s.status ?? s.error}${inOutage(s) ? ' in outage' : ' outside outages'}`);
    try {
      const journal = (await check('journal_entries').select('asset_symbol').sum({ total: 'amount' }).count({ n: '*' }).groupBy('asset_symbol')) as Array<{
        asset_symbol: string;
        total: string;
        n: string;
      }>;
      const unbalanced = journal.filter((j) => BigInt(j.total) !== 0n);
      results.push(['journal sums to zero per asset', unbalanced.length === 0, journal.map((j) => `${j.asset_symbol}: ${j.n} entries, sum ${j.total}`).join('; ')]);
      const mismatched = (await check.raw(`
        SELECT b.wallet_id, b.asset_symbol, b.available, b.held, coalesce(ja.total, 0) AS journal_available, coalesce(jh.total, 0) AS journal_held
        FROM balances b
        LEFT JOIN (SELECT wallet_id, asset_symbol, sum(amount) AS total FROM journal_entries WHERE account LIKE '%:available' GROUP BY 1, 2) ja USING (wallet_id, asset_symbol)
        LEFT JOIN (SELECT wallet_id, asset_symbol, sum(amount) AS total FROM journal_entries WHERE account LIKE '%:held' GROUP BY 1, 2) jh USING (wallet_id, asset_symbol)
        WHERE b.available <> coalesce(ja.total, 0) OR b.held <> coalesce(jh.total, 0)`)) as { rows: unknown[] };
      const [{ count: balanceRows }] = (await check('balances').count<{ count: string }[]>('* as count')) as [{ count: string }];
      results.push(['every balance equals its journal', mismatched.rows.length === 0, `${balanceRows} balances, ${mismatched.rows.length} differ`]);

      const accepted = samples.filter((s) => s.cls === 'write' && s.status !== null && s.status < 300);
      const acceptedIds = [...new Set(accepted.map((s) => s.body?.operation_id).filter((id): id is string => typeof id === 'string'))];
      const withoutId = accepted.filter((s) => typeof s.body?.operation_id !== 'string').length;
      let found = 0;
      for (let i = 0; i < acceptedIds.length; i += 1000) {
        const [{ count }] = (await check('operations')
          .whereIn('id', acceptedIds.slice(i, i + 1000))
          .count<{ count: string }[]>('* as count')) as [{ count: string }];
        found += Number(count);
      }
      const opStatuses = (await check('operations').select('type', 'status').count({ n: '*' }).groupBy('type', 'status').orderBy(['type', 'status'])) as Array<{
        type: string;
        status: string;
        n: string;
      }>;
      results.push([
        'no accepted write without its operation',
        withoutId === 0 && found === acceptedIds.length,
        `${accepted.length} accepted write responses, ${acceptedIds.length} operations named, ${found} found, ${withoutId} without an operation_id; ${opStatuses.map((o) => `${o.type}/${o.status}=${o.n}`).join(' ')}`,
      ]);

      const deliveries = (await check('webhook_deliveries as d').join('webhook_endpoints as e', 'e.id', 'd.endpoint_id').select('d.event_id', 'd.status', 'e.url', 'd.attempt')) as Array<{
        event_id: string;
        status: string;
        url: string;
        attempt: number;
      }>;
      const [{ count: eventCount }] = (await check('events').count<{ count: string }[]>('* as count')) as [{ count: string }];
      const notDelivered = deliveries.filter((d) => d.status !== 'delivered' || !receiver.received.get(new URL(d.url).pathname)?.has(d.event_id));
      const retried = deliveries.filter((d) => d.attempt > 1).length;
      results.push([
        'every event delivered at least once',
        notDelivered.length === 0 && deliveries.length > 0,
        `${eventCount} events, ${deliveries.length} deliveries, ${notDelivered.length} not delivered (${[...new Set(notDelivered.map((d) => d.status))].join(', ') || 'none'}); receiver got ${receiver.requests()} POSTs (${receiver.requests() - deliveries.length + notDelivered.length} duplicates), ${retried} deliveries needed more than one attempt`,
      ]);

      const probeProblems = probes.filter((p) => p.granted !== PROBE_BURST || p.other.length > 0);
      results.push([
        'exactly the rate-limit budget granted per agent and class',
        probes.length > 0 && probeProblems.length === 0,
        `${probes.length} bursts of ${PROBE_BURST * 3} across 3 processes with burst ${PROBE_BURST}: ${probes.map((p) => `${p.at} ${p.cls} ${p.granted}/${p.refused}${p.other.length ? ` (${p.other.join(',')})` : ''}`).join('; ')}`,
      ]);

      const fiveXx = samples.filter((s) => s.status !== null && s.status >= 500);
      const documented = (s: Sample) => s.status === 503 && (s.body?.error as { code?: string } | undefined)?.code === 'service_unavailable' && Number(s.retryAfter) >= 1 && inOutage(s);
      const undocumented = fiveXx.filter((s) => !documented(s));
      results.push([
        'no 5xx other than the documented 503s during outages',
        undocumented.length === 0,
        `${fiveXx.length} 5xx: ${
          byStatus(fiveXx)
            .map(([k, n]) => `${k}: ${n}`)
            .join(', ') || 'none'
        }${
          undocumented.length
            ? `; first undocumented: ${undocumented
                .slice(0, 3)
                .map((s) => `${s.op} ${s.status} at ${(s.at / 1000).toFixed(1)}s ${JSON.stringify(s.body?.error ?? s.body).slice(0, 140)}`)
                .join(' | ')}`
            : ''
        }`,
      ]);

      const killed = (s: Sample) => kills.some((k) => k.api === s.api && s.at + s.ms >= k.at - 1000 && s.at <= k.upAt + 1000);
      const errors = samples.filter((s) => s.error !== null);
      const unexplained = errors.filter((s) => !killed(s));
      results.push([
        'every request answered, except by a process being killed',
        unexplained.length === 0,
        `${errors.length} without an HTTP answer (${
          byStatus(errors)
            .map(([k, n]) => `${k}: ${n}`)
            .join(', ') || 'none'
        }); ${unexplained.length} not explained by a kill${
          unexplained.length
            ? ` (${byStatus(unexplained)
                .map(([k, n]) => `${k}: ${n}`)
                .join(', ')})`
            : ''
        }`,
      ]);

      const redisOutage = outages.find((o) => o.what === 'redis');
      const lostOutsideRestart = mcpResult.lostSessions.filter((t) => !redisOutage || t < redisOutage.from);
      results.push([
        'MCP: sessions served by every API process in turn (round robin, no stickiness); none lost but by the Redis restart',
        mcpResult.servedByAllThree > 0 && lostOutsideRestart.length === 0,
        `${mcpResult.clients} clients, ${mcpResult.sessions} sessions, ${mcpResult.servedByAllThree} served by all three processes, ${mcpResult.servedByOne} by one or none; ${mcpResult.lostSessions.length} ended by the Redis restart (empty, no persistence: their clients opened new ones), ${lostOutsideRestart.length} lost otherwise`,
      ]);
      const mcpKilled = (a: { api: number; at: number; ms: number }) => kills.some((k) => k.api === a.api && a.at + a.ms >= k.at - 1000 && a.at <= k.upAt + 1000);
      const mcpOutage = (a: { at: number; ms: number }) => outages.some((o) => a.at + a.ms >= o.from - 500 && a.at <= o.to + RECOVERY_MS);
      const mcpUnanswered = mcp.answers.filter((a) => (a.status === null && !mcpKilled(a)) || (a.status !== null && a.status >= 500 && !(a.status === 503 && mcpOutage(a))));
      results.push([
        'MCP: every request answered, except by a process being killed or a 503 in an outage',
        mcpUnanswered.length === 0,
        `${mcp.answers.length} MCP requests (${tally(mcp.answers, (a) => String(a.status ?? a.error))
          .map(([k, n]) => `${k}=${n}`)
          .join(' ')}; refusals: ${tally(mcp.answers.filter((a) => a.detail) as never[], (a: { status: number; detail: string }) => `${a.status} ${a.detail}`)
          .map(([k, n]) => `${k} x${n}`)
          .join(' | ')}); ${mcpUnanswered.length} not explained${
          mcpUnanswered.length
            ? `: ${mcpUnanswered
                .slice(0, 3)
                .map((a) => `${a.kind} api-${a.api + 1} ${a.status ?? a.error} at ${(a.at / 1000).toFixed(1)}s`)
                .join(', ')}`
            : ''
        }`,
      ]);
      results.push([
        "MCP: every payment a session made that executed reached the session's stream, resumed with Last-Event-ID on other processes",
        mcpResult.missing.length === 0 && mcpResult.executedInLast > 0 && mcpResult.crossResumes > 0,
        `${mcpResult.lastSessions} last sessions paid ${mcpResult.paidInLast}, ${mcpResult.executedInLast} executed, ${mcpResult.missing.length} not notified${mcpResult.missing.length ? ` (${mcpResult.missing.slice(0, 3).join(', ')})` : ''}; ${mcpResult.crossResumes} streams resumed on another process than the one that sent the last event`,
      ]);
      results.push([
        'agentapi_operations_total summed over the 5 processes equals the table, per type and terminal status, over a quiet window',
        typeof counters !== 'string' && counters.ok,
        typeof counters === 'string' ? counters : counters.detail,
      ]);
    } catch (err) {
      // A check that cannot run (the database went away) is a failure to report, not a reason to skip the report.
      results.push(['checks ran to the end', false, err instanceof Error ? err.message : String(err)]);
    }

    // ---- report ------------------------------------------------------------------------------------------------------
    process.stdout.write('\n== soak report ==\n');
    process.stdout.write(
      `load ${seconds} s, ${AGENTS} agents, ${CONCURRENCY} concurrent clients, ${samples.length} requests (${(samples.length / seconds).toFixed(0)}/s); kills at ${kills.map((k) => `${(k.at / 1000).toFixed(0)}s(api-${k.api + 1},worker-${k.worker + 1})`).join(' ')}; outages ${outages.map((o) => `${o.what} ${(o.from / 1000).toFixed(0)}-${(o.to / 1000).toFixed(0)}s`).join(', ')}\n`,
    );
    process.stdout.write(
      `responses: ${tally(samples, (s) => String(s.status ?? s.error))
        .sort()
        .map(([k, n]) => `${k}=${n}`)
        .join(' ')}\n`,
    );
    const refusals = tally(
      samples.filter((s) => s.status !== null && s.status >= 400 && s.status < 500),
      (s) => `${s.op} ${s.status} ${String((s.body?.error as { code?: string } | undefined)?.code ?? '')}`,
    );
    process.stdout.write(
      `4xx by operation: ${
        refusals
          .sort((x, y) => y[1] - x[1])
          .map(([k, n]) => `${k}=${n}`)
          .join(', ') || 'none'
      }\n`,
    );
    process.stdout.write('latency per route class (ms, answered requests outside probes):\n');
    for (const cls of PROBE_CLASSES) {
      const ms = samples
        .filter((s) => s.cls === cls && s.status !== null && s.op !== 'probe')
        .map((s) => s.ms)
        .sort((a, b) => a - b);
      process.stdout.write(`  ${cls.padEnd(20)} n=${String(ms.length).padStart(6)}  p50=${percentile(ms, 50).toFixed(1).padStart(7)}  p99=${percentile(ms, 99).toFixed(1).padStart(8)}\n`);
    }
    const metricLines = (lines: string[], prefixes: string[]) => lines.filter((l) => prefixes.some((p) => l.startsWith(p)));
    process.stdout.write(`api-1 /metrics: ${metricLines(apiMetrics, ['agentapi_redis_up', 'agentapi_db_timeouts_total', 'agentapi_settlement_lag_seconds']).join('; ')}\n`);
    process.stdout.write(`worker-1 /metrics: ${metricLines(workerMetrics, ['agentapi_webhook_delivery_attempts_total', 'agentapi_webhook_oldest_due_age_seconds']).join('; ')}\n`);
    for (const [name, ok, detail] of results) process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}\n`);
    const failed = results.filter(([, ok]) => !ok).length;
    process.stdout.write(`${failed === 0 ? 'soak passed' : `soak FAILED: ${failed} check(s)`} in ${(elapsed() / 1000).toFixed(0)} s; process logs in ${ARTIFACTS}\n`);
    return failed === 0 ? 0 : 1;
  } finally {
    await cleanup();
    clearTimeout(hardStop);
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`soak aborted: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
