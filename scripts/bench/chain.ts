// Benchmark (issue 24 acceptance 7, issue 31 target 3): payments settled per second through the agent accounts'
// lanes on Anvil, beside a baseline measured in the same run against the same node: one key signing plain ERC-20
// transfers and sending them with sendRawTransaction as fast as the node takes them.
//
// The service runs as `npm start` does in evm mode: the app over HTTP and its worker loops in the same process, agents
// whose wallets are AgentAccounts (deployed by their owner's policy, funded on chain and credited by the deposit
// watcher). Payments go in through POST /v1/agent/payments for a fixed window after a warm-up; a payment counts as
// settled once `executed` (its relayed `relayLane` call mined with CHAIN_CONFIRMATIONS). The window is run once per
// confirmation count asked for (same database, same agents, a new app), then the raw loop runs for the same window.
// Where the time goes comes from the rows (accepted -> signed -> broadcast -> confirmed -> executed), the node calls
// the process made (timed by wrapping fetch) and the queries on `chain_nonces` (timed by knex's query events).
//
// Anvil automines each transaction; a block clock beside it mines an empty block every --block-ms (all phases, the
// baseline included) so confirmations accrue once traffic stops, as on a chain with a block time. The producers keep
// at most --backlog payments open (accepted or submitted): beyond that acceptance only grows a queue the drain must
// empty, and the figure of interest is the settled rate.
// Usage: npm run bench:chain -- [--agents 4] [--seconds 10] [--warmup 2] [--in-flight 4] [--backlog 50] [--confirmations 1,3] [--block-ms 250]
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { encodeFunctionData, getAddress, parseUnits, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createApp, type BuiltApp } from '../../src/app.js';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { Address } from '../../src/chain/port.js';
import { loadConfig } from '../../src/config.js';
import { createWorker } from '../../src/worker.js';
import { startAnvil, type AnvilNode } from '../../test/helpers/anvil.js';
import { close, listen, scratchDatabase } from './support.js';

const { values } = parseArgs({
  options: {
    agents: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    'in-flight': { type: 'string', default: '4' },
    backlog: { type: 'string', default: '50' },
    confirmations: { type: 'string', default: '1,3' },
    'block-ms': { type: 'string', default: '250' },
  },
});
const AGENTS = Number(values.agents);
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);
const IN_FLIGHT = Number(values['in-flight']);
const BACKLOG = Number(values.backlog);
const CONFIRMATIONS = values.confirmations!.split(',').map(Number);
const BLOCK_MS = Number(values['block-ms']);
const PAYEE = '0x000000000000000000000000000000000000bEEF';
const MASTER_KEY = `bench-${randomBytes(24).toString('hex')}`;

/** JSON-RPC calls to the node, by method: how many and how long (ms), while `rpcProfile.on`. */
const rpcProfile = { on: false, calls: new Map<string, { n: number; ms: number }>() };
function profileNodeCalls(rpcUrl: string) {
  const inner = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!rpcProfile.on || !url.startsWith(rpcUrl) || typeof init?.body !== 'string') return inner(input, init);
    const parsed = JSON.parse(init.body) as { method: string } | { method: string }[];
    const method = Array.isArray(parsed) ? `batch(${parsed.map((p) => p.method).join(',')})` : parsed.method;
    if (method.startsWith('anvil_')) return inner(input, init); // the bench's block clock, not the service
    const t0 = performance.now();
    try {
      return await inner(input, init);
    } finally {
      const m = rpcProfile.calls.get(method) ?? { n: 0, ms: 0 };
      m.n += 1;
      m.ms += performance.now() - t0;
      rpcProfile.calls.set(method, m);
    }
  };
}

/** Queries touching `chain_nonces` (the nonce allocation, a row lock held until the submit transaction commits). */
function profileNonceQueries(built: BuiltApp) {
  const started = new Map<string, number>();
  const totals = { n: 0, ms: 0 };
  built.db.on('query', (q: { __knexQueryUid: string; sql: string }) => {
    if (rpcProfile.on && q.sql.includes('chain_nonces')) started.set(q.__knexQueryUid, performance.now());
  });
  built.db.on('query-response', (_r: unknown, q: { __knexQueryUid: string }) => {
    const t0 = started.get(q.__knexQueryUid);
    if (t0 === undefined) return;
    started.delete(q.__knexQueryUid);
    totals.n += 1;
    totals.ms += performance.now() - t0;
  });
  return totals;
}

interface BenchAgent {
  agentId: string;
  walletId: string;
  address: Address;
  headers: Record<string, string>;
}

function env(node: AnvilNode, databaseUrl: string, confirmations: number): Record<string, string> {
  return {
    NODE_ENV: 'development',
    BASE_URL: 'http://127.0.0.1:3000',
    DATABASE_URL: databaseUrl,
    AUTO_MIGRATE: 'true',
    RUN_WORKER: 'false',
    LOG_LEVEL: 'silent',
    MASTER_KEY,
    VALIDATE_RESPONSES: 'false',
    SMTP_URL: 'smtp://127.0.0.1:2525',
    CHAIN_RPC_URL: node.rpcUrl,
    CHAIN_POLL_MS: '50',
    CHAIN_CONFIRMATIONS: String(confirmations),
  };
}

/** Agents whose wallets are AgentAccounts (the allow-all policy deploys them), funded on chain and credited by the watcher. */
async function createAgents(built: BuiltApp, node: AnvilNode, count: number): Promise<BenchAgent[]> {
  const { services, db } = built;
  const token = getAddress((await db('assets').where({ symbol: 'USDC' }).first()).contract_address) as Address;
  const { owner_id } = await services.agents.createOwner(db, { email: `bench-chain-${randomBytes(4).toString('hex')}@example.com` });
  const out: BenchAgent[] = [];
  for (let i = 0; i < count; i++) {
    const a = await services.agents.createAgent(db, { ownerId: owner_id, name: `chain bench ${i}` });
    await services.ledger.policy.allowAll(db, a.agent_id);
    await services.agents.setRateLimit(db, a.agent_id, { class: 'write', limit: 1_000_000_000, burst: 1_000_000_000, windowSeconds: 60 });
    const wallet = await db('wallets').where({ id: a.wallet_id }).first();
    const address = getAddress(wallet.address) as Address;
    if (!(await node.client.getCode({ address }))) throw new Error(`agent ${i}: wallet ${address} is not a deployed AgentAccount`);
    await mintToken(node.devWallet(0), node.client, token, address, parseUnits('1000000', 6));
    out.push({ agentId: a.agent_id, walletId: a.wallet_id, address, headers: { 'x-agent-id': a.agent_id, 'x-api-key': a.api_key, 'content-type': 'application/json' } });
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    const balances = await Promise.all(out.map((a) => services.ledger.ledger.balance(db, a.walletId, 'USDC')));
    if (balances.every((b) => b.available >= parseUnits('1000000', 6))) return out;
    if (Date.now() > deadline) throw new Error('the on-chain funding was not credited within 30 s');
    if ((await services.inbound!.deposits.tick()) === 0) await new Promise((r) => setTimeout(r, 50));
  }
}

const openCount = async (built: BuiltApp) => Number((await built.db('operations').whereIn('status', ['accepted', 'submitted']).count<{ n: string }[]>('* as n'))[0]!.n);

/** POSTs payments from `IN_FLIGHT` producers for `seconds`, keeping at most BACKLOG open; answers how many were accepted. */
async function fire(base: string, built: BuiltApp, agents: BenchAgent[], seconds: number): Promise<{ accepted: number; refused: number; throttledMs: number }> {
  const end = performance.now() + seconds * 1000;
  let open = await openCount(built);
  let throttledMs = 0;
  const poller = setInterval(() => void openCount(built).then((n) => (open = n)), 100);
  let accepted = 0;
  let refused = 0;
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (performance.now() < end) {
          if (open >= BACKLOG) {
            throttledMs += 20 / IN_FLIGHT;
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          const agent = agents[next++ % agents.length]!;
          const res = await fetch(`${base}/v1/agent/payments`, {
            method: 'POST',
            headers: { ...agent.headers, 'idempotency-key': randomUUID() },
            body: JSON.stringify({ to: PAYEE, asset: 'USDC', amount: '0.01' }),
          });
          const body = (await res.json()) as { status?: string; error?: { message: string } };
          if (res.status === 200 && body.status === 'accepted') {
            accepted += 1;
            open += 1;
          } else {
            refused += 1;
            if (refused === 1) process.stderr.write(`payment refused: ${res.status} ${JSON.stringify(body)}\n`);
          }
        }
      }),
    );
  } finally {
    clearInterval(poller);
  }
  return { accepted, refused, throttledMs };
}

async function drain(built: BuiltApp, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while ((await openCount(built)) > 0) {
    if (Date.now() > deadline) throw new Error(`payments still open ${timeoutMs / 1000} s after the window`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
const ms = (n: number) => `${n.toFixed(0).padStart(5)} ms`;

interface LaneResult {
  confirmations: number;
  accepted: number;
  settled: number;
  failed: number;
  acceptedPerSecond: number;
  settledPerSecond: number;
  lines: string[];
}

/** One window through the lanes at `confirmations`: a new app on the same database and agents (created on the first). */
async function laneWindow(node: AnvilNode, databaseUrl: string, confirmations: number, agents: BenchAgent[] | null): Promise<{ result: LaneResult; agents: BenchAgent[]; token: Address }> {
  const built = await createApp(loadConfig(env(node, databaseUrl, confirmations), () => {}));
  const server = createServer(built.app);
  const worker = createWorker({ loops: built.loops, log: built.log });
  const nonceQueries = profileNonceQueries(built);
  try {
    const base = await listen(server);
    const who = agents ?? (await createAgents(built, node, AGENTS));
    worker.start();
    await fire(base, built, who, WARMUP);
    await drain(built, 60_000);

    rpcProfile.calls.clear();
    rpcProfile.on = true;
    const started = new Date();
    const t0 = performance.now();
    const load = await fire(base, built, who, SECONDS);
    const stopped = new Date();
    await drain(built, 60_000);
    rpcProfile.on = false;
    const busySeconds = (performance.now() - t0) / 1000;

    const ops = built.db('operations').where('operations.created_at', '>=', started).where('operations.created_at', '<', stopped).where({ 'operations.type': 'payment' });
    const rows = (await ops
      .clone()
      .leftJoin('chain_transactions as t', function () {
        this.on('t.operation_id', '=', 'operations.id').andOn('t.attempt', '=', built.db.raw('0'));
      })
      .select(
        'operations.status',
        built.db.raw('extract(epoch FROM operations.executed_at) * 1000 AS executed'),
        built.db.raw('extract(epoch FROM t.created_at - operations.created_at) * 1000 AS to_signed'),
        built.db.raw('extract(epoch FROM t.broadcast_at - t.created_at) * 1000 AS to_broadcast'),
        built.db.raw('extract(epoch FROM t.mined_at - t.broadcast_at) * 1000 AS to_confirmed'),
        built.db.raw('extract(epoch FROM operations.executed_at - t.mined_at) * 1000 AS to_executed'),
        built.db.raw('extract(epoch FROM operations.executed_at - operations.created_at) * 1000 AS total'),
      )) as Record<string, string | null>[];
    const executed = rows.filter((r) => r.status === 'executed');
    const lastExecuted = Math.max(...executed.map((r) => Number(r.executed)));
    const settleSeconds = (lastExecuted - started.getTime()) / 1000;
    const inWindow = executed.filter((r) => Number(r.executed) <= stopped.getTime()).length;
    const drainSeconds = (lastExecuted - stopped.getTime()) / 1000;
    const stage = (key: string) => executed.map((r) => Number(r[key])).sort((a, b) => a - b);
    const lines: string[] = [];
    lines.push(
      `  settled inside the window ${inWindow} = ${(inWindow / SECONDS).toFixed(1)} /s (HTTP load in the same process); the ${executed.length - inWindow} left at its end in ${drainSeconds.toFixed(1)} s = ${((executed.length - inWindow) / Math.max(drainSeconds, 0.001)).toFixed(1)} /s (worker alone)`,
    );
    lines.push(
      `  stages per payment (median / p90): ${['to_signed', 'to_broadcast', 'to_confirmed', 'to_executed', 'total'].map((k) => `${k.replace('to_', '')} ${ms(pct(stage(k), 50))} / ${ms(pct(stage(k), 90))}`).join(' | ')}`,
    );
    lines.push(`    (signed: waiting in the accepted queue + submit; broadcast: pump after commit; confirmed: receipt polling + ${confirmations} confirmation(s); executed: capture)`);
    const settled = Math.max(1, executed.length);
    const calls = [...rpcProfile.calls.entries()].sort((a, b) => b[1].ms - a[1].ms);
    const rpcMs = calls.reduce((s, [, c]) => s + c.ms, 0);
    lines.push(
      `  node calls per settled payment: ${calls
        .slice(0, 8)
        .map(([m, c]) => `${m} ${(c.n / settled).toFixed(1)}x ${(c.ms / c.n).toFixed(1)} ms`)
        .join(', ')}`,
    );
    lines.push(
      `  worker time per settled payment: ${(rpcMs / settled).toFixed(1)} ms in node calls, ${(nonceQueries.ms / settled).toFixed(2)} ms in ${(nonceQueries.n / settled).toFixed(1)} chain_nonces queries; ` +
        `${busySeconds.toFixed(1)} s busy for ${executed.length} payments = ${((busySeconds * 1000) / settled).toFixed(1)} ms each; producers throttled ${(load.throttledMs / 1000).toFixed(1)} s of ${SECONDS} s at the backlog cap`,
    );
    return {
      agents: who,
      token: getAddress((await built.db('assets').where({ symbol: 'USDC' }).first()).contract_address) as Address,
      result: {
        confirmations,
        accepted: load.accepted,
        settled: executed.length,
        failed: rows.length - executed.length,
        acceptedPerSecond: load.accepted / SECONDS,
        settledPerSecond: executed.length / settleSeconds,
        lines,
      },
    };
  } finally {
    rpcProfile.on = false;
    await worker.stop();
    await close(server);
    await built.close();
  }
}

/** The baseline: one key signs ERC-20 transfers and sends each with sendRawTransaction as soon as the last is taken. */
async function rawLoop(node: AnvilNode, token: Address): Promise<{ sent: number; perSecond: number; mined: number; minedPerSecond: number; sendMs: number }> {
  const sender = privateKeyToAccount(ANVIL_DEV_KEYS[3]!);
  await mintToken(node.devWallet(0), node.client, token, sender.address, parseUnits('1000000', 6));
  let nonce = await node.client.getTransactionCount({ address: sender.address, blockTag: 'pending' });
  const fees = await node.client.estimateFeesPerGas();
  const data = encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [PAYEE, 10_000n] });
  const first = nonce;
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  let last: Hex = '0x';
  let sendMs = 0;
  while (performance.now() < end) {
    const raw = await sender.signTransaction({
      chainId: node.client.chain!.id,
      type: 'eip1559',
      to: token,
      data,
      nonce: nonce++,
      gas: 80_000n,
      maxFeePerGas: fees.maxFeePerGas * 2n,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const s = performance.now();
    last = await node.client.sendRawTransaction({ serializedTransaction: raw });
    sendMs += performance.now() - s;
  }
  const sent = nonce - first;
  const sentSeconds = (performance.now() - t0) / 1000;
  const receipt = await node.client.waitForTransactionReceipt({ hash: last, pollingInterval: 10 });
  if (receipt.status !== 'success') throw new Error(`the baseline's last transfer reverted (${last})`);
  const minedSeconds = (performance.now() - t0) / 1000;
  return { sent, perSecond: sent / sentSeconds, mined: sent, minedPerSecond: sent / minedSeconds, sendMs: sendMs / sent };
}

async function main() {
  const runStarted = performance.now();
  const node = await startAnvil();
  profileNodeCalls(node.rpcUrl);
  const clockTimer = setInterval(() => void node.mine(1).catch(() => {}), BLOCK_MS);
  const scratch = await scratchDatabase('agent_api_bench_chain');
  try {
    const results: LaneResult[] = [];
    let agents: BenchAgent[] | null = null;
    let token: Address | null = null;
    for (const c of CONFIRMATIONS) {
      const run = await laneWindow(node, scratch.url, c, agents);
      agents = run.agents;
      token = run.token;
      results.push(run.result);
    }
    const raw = await rawLoop(node, token!);

    const out = process.stdout;
    out.write(
      `chain bench: Anvil automine + an empty block every ${BLOCK_MS} ms, ${AGENTS} agent accounts, ${IN_FLIGHT} producers over HTTP, backlog cap ${BACKLOG}, ${WARMUP} s warm-up, ${SECONDS} s window, CHAIN_POLL_MS=50\n`,
    );
    const line = (name: string, figure: string) => out.write(`${name.padEnd(58)} ${figure}\n`);
    for (const r of results) {
      line(`lane, CHAIN_CONFIRMATIONS=${r.confirmations}: accepted`, `${r.accepted} = ${r.acceptedPerSecond.toFixed(1)} /s`);
      line(
        `lane, CHAIN_CONFIRMATIONS=${r.confirmations}: settled (executed)`,
        `${r.settled} = ${r.settledPerSecond.toFixed(1)} /s   (${(r.settledPerSecond / raw.minedPerSecond).toFixed(3)} of baseline; not executed: ${r.failed})`,
      );
      for (const l of r.lines) out.write(`${l}\n`);
    }
    line(
      'baseline: raw sendRawTransaction loop (ERC-20 transfer)',
      `${raw.sent} sent = ${raw.perSecond.toFixed(1)} /s, mined = ${raw.minedPerSecond.toFixed(1)} /s (${raw.sendMs.toFixed(2)} ms per send)`,
    );
    out.write(`run: ${((performance.now() - runStarted) / 1000).toFixed(0)} s\n`);
  } finally {
    clearInterval(clockTimer);
    await scratch.drop();
    await node.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
