// Footprint benchmark (issue 12, P4): the compiled service (`node dist/src/server.js`, what `npm start` runs) as a
// child process, in Postgres mode (NODE_ENV=production, a scratch database, Redis) and on the embedded default
// (PGlite in a temporary DATA_DIR). Each mode is started twice: the first start migrates and makes an agent, the
// second is timed from spawn to the first 200 from /healthz (the embedded target is for a second start; in
// Postgres mode migrations belong to `npm run migrate`). Once the process is idle (the background validator
// warm-up has finished), autocannon applies 50 connections to GET /v1/agent/balances and GET /v1/agent/self with
// the agent's API key while the API process's VmRSS (/proc/<pid>/status) is sampled; the peak is the figure.
//
// Usage: npm run --silent bench:footprint   (make bench-footprint)  [--seconds 5] [--connections 50]
// Uses DATABASE_URL when set, else a scratch database on TEST_PG_ADMIN_URL (dropped at the end); REDIS_URL or the
// local Redis under a prefix of its own. Builds dist/ first when it is older than the sources. Not part of CI.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { autocannon, report, row, scratchDatabase, type BenchRow } from './support.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg('seconds', 5);
const CONNECTIONS = arg('connections', 50);
const root = fileURLToPath(new URL('../../', import.meta.url));
const MB = 1024 * 1024;
/** Exactly what `npm start` runs (`MALLOC_ARENA_MAX=2 exec node <flags> dist/src/server.js`), on this process's pinned Node. */
const [, START_ASSIGNMENTS, START_COMMAND] = /^((?:[A-Z_]+=\S+ )*)exec node (.+)$/.exec(
  (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start!,
)!;
const START_ENV = Object.fromEntries(
  START_ASSIGNMENTS!
    .split(' ')
    .filter(Boolean)
    .map((a) => a.split('=') as [string, string]),
);
const START_ARGS = START_COMMAND!.split(' ');

interface Credentials {
  agentId: string;
  apiKey: string;
}

interface Started {
  child: ChildProcess;
  baseUrl: string;
  /** Spawn to the first 200 from /healthz. */
  healthzMs: number;
  output(): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Spawns `node dist/src/server.js` with exactly `env` (plus PATH/HOME and the start script's assignments) and waits for /healthz to answer 200. */
async function start(env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const began = performance.now();
  const child = spawn(process.execPath, START_ARGS, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...START_ENV, HOST: '127.0.0.1', PORT: String(port), BASE_URL: baseUrl, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = once(child, 'exit');
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} before /healthz answered:\n${output}`);
    if (performance.now() - began > 120_000) throw new Error(`/healthz did not answer within 120 s:\n${output}`);
    const ok = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(10_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    await sleep(20);
  }
  const healthzMs = performance.now() - began;
  return {
    child,
    baseUrl,
    healthzMs,
    output: () => output,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** VmRSS of a live process in bytes. */
function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** CPU time (user + system, clock ticks) a process has used. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** Waits until the process used under 10 % of a core over half a second (the validator warm-up is over), at most 60 s. */
async function untilIdle(pid: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = cpuTicks(pid);
  while (Date.now() < deadline) {
    await sleep(500);
    const now = cpuTicks(pid);
    if (now - last < 5) return; // 100 ticks a second: 5 ticks in 0.5 s is 10 %
    last = now;
  }
}

/** Peak VmRSS of the server while autocannon loads the two read routes. */
async function rssUnderLoad(server: Started, who: Credentials): Promise<{ peak: number; idle: number; rps: number; non2xx: number }> {
  const pid = server.child.pid!;
  await untilIdle(pid);
  const idle = rssOf(pid);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 100);
  const result = await autocannon({
    url: server.baseUrl,
    headers: { 'x-agent-id': who.agentId, 'x-api-key': who.apiKey },
    connections: CONNECTIONS,
    duration: SECONDS,
    workers: 1,
    requests: [{ path: '/v1/agent/balances' }, { path: '/v1/agent/self' }],
  });
  clearInterval(sampler);
  peak = Math.max(peak, rssOf(pid));
  return { peak, idle, rps: result.requests.average, non2xx: result.non2xx };
}

async function adminCall(baseUrl: string, adminToken: string, method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** An owner and an agent through the admin API (Postgres mode has no demo agent). */
async function createAgent(baseUrl: string, adminToken: string): Promise<Credentials> {
  const owner = await adminCall(baseUrl, adminToken, 'POST', '/v1/admin/owners', { email: `footprint-${randomBytes(4).toString('hex')}@example.com`, name: null });
  const agent = await adminCall(baseUrl, adminToken, 'POST', '/v1/owner/agents', { owner_id: owner.owner_id, name: 'footprint bench', starts_at: null, ends_at: null });
  return { agentId: String(agent.agent_id), apiKey: String(agent.api_key) };
}

/** The load is the service's work, not 429s: the agent's read budget is raised far above what 50 connections send. */
async function raiseReadLimit(baseUrl: string, adminToken: string, agentId: string): Promise<void> {
  await adminCall(baseUrl, adminToken, 'PUT', `/v1/owner/agents/${agentId}/rate-limits/read`, { limit: 1_000_000, burst: 100_000, window_seconds: 60 });
}

interface ModeFigures {
  healthzMs: number;
  peak: number;
  idle: number;
  rps: number;
  non2xx: number;
}

async function postgresMode(): Promise<ModeFigures> {
  const db = await scratchDatabase('agent_api_bench_footprint');
  const adminToken = randomBytes(24).toString('hex');
  const env = {
    NODE_ENV: 'production',
    DATABASE_URL: db.url,
    REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `bench-footprint-${randomBytes(4).toString('hex')}:`,
    MASTER_KEY: randomBytes(24).toString('hex'),
    ADMIN_TOKEN: adminToken,
    // Required in production; nothing is mailed during the benchmark.
    SMTP_URL: 'smtp://127.0.0.1:2525',
  };
  try {
    const first = await start(env);
    let who: Credentials;
    try {
      who = await createAgent(first.baseUrl, adminToken);
      await raiseReadLimit(first.baseUrl, adminToken, who.agentId);
    } finally {
      await first.stop();
    }
    const second = await start(env);
    try {
      return { healthzMs: second.healthzMs, ...(await rssUnderLoad(second, who)) };
    } finally {
      await second.stop();
    }
  } finally {
    await db.drop();
  }
}

async function embeddedMode(): Promise<ModeFigures> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agent-api-footprint-'));
  const env = { DATA_DIR: dataDir };
  try {
    const first = await start(env);
    const m = /demo agent: x-agent-id=(\S+) x-api-key=(\S+)/.exec(first.output());
    try {
      if (!m) throw new Error(`the first embedded start printed no demo agent:\n${first.output()}`);
      await raiseReadLimit(first.baseUrl, readFileSync(join(dataDir, 'admin-token'), 'utf8').trim(), m[1]!);
    } finally {
      await first.stop();
    }
    const second = await start(env);
    try {
      return { healthzMs: second.healthzMs, ...(await rssUnderLoad(second, { agentId: m[1]!, apiKey: m[2]! })) };
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  execFileSync('bash', ['scripts/build.sh', '--if-stale'], { cwd: root, stdio: 'inherit' });
  const pg = await postgresMode();
  const embedded = await embeddedMode();
  for (const [name, f] of [
    ['Postgres', pg],
    ['embedded', embedded],
  ] as const) {
    process.stdout.write(
      `${name}: healthz ${f.healthzMs.toFixed(0)} ms after spawn; RSS idle ${(f.idle / MB).toFixed(0)} MB, peak under load ${(f.peak / MB).toFixed(0)} MB; ${f.rps.toFixed(0)} req/s, ${f.non2xx} non-2xx\n`,
    );
  }
  const rows: BenchRow[] = [
    row({ bench: 'footprint', what: 'API RSS under load, Postgres mode', today: pg.peak / MB, unit: 'MB', target: '≤ 150 MB', met: pg.peak / MB <= 150 }),
    row({ bench: 'footprint', what: 'API RSS under load, embedded', today: embedded.peak / MB, unit: 'MB', target: '≤ 350 MB', met: embedded.peak / MB <= 350 }),
    row({ bench: 'footprint', what: '/healthz after start, Postgres mode', today: pg.healthzMs / 1000, unit: 's', target: '≤ 2 s', met: pg.healthzMs <= 2000 }),
    row({ bench: 'footprint', what: '/healthz after second start, embedded', today: embedded.healthzMs / 1000, unit: 's', target: '≤ 5 s', met: embedded.healthzMs <= 5000 }),
  ];
  report(rows);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
