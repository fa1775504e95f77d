// Policy replay benchmark (issue 28, acceptance 4): a replay of 10,000 operations answers within 2 s. Seeds one agent
// with 10,000 operations over the last 89 days (payments to 20 payees, a tenth refused by the live policy, a few
// failed in settlement, each with the policy facts a live write records), then times the replay of a stricter
// candidate (per-transaction, daily, count and lifetime caps, an allow-list) through the service and through
// `POST /v1/owner/agents/{id}/policy/replay`. Baseline in the same run: reading the same history alone (what the
// replay must read). Prints the medians of 5 runs; asserts nothing.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { readPolicyHistory } from '../../src/db/repositories/policy-history.repository.js';
import { close, listen, report, row, scratchDatabase } from './support.js';

const OPERATIONS = 10_000;
const DAYS = 89;
const RUNS = 5;
const TARGET_MS = 2000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

async function main() {
  const scratch = await scratchDatabase('agent_api_bench_replay');
  const adminToken = randomBytes(24).toString('hex');
  const config = loadConfig({
    NODE_ENV: 'production',
    BASE_URL: 'http://127.0.0.1:3000',
    DATABASE_URL: scratch.url,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `agentapi-bench:${randomBytes(4).toString('hex')}:`,
    MASTER_KEY: randomBytes(32).toString('hex'),
    ADMIN_TOKEN: adminToken,
    SMTP_URL: 'smtp://127.0.0.1:2525',
    AUTO_MIGRATE: 'true',
    LOG_LEVEL: 'warn',
    RUN_WORKER: 'false',
  });
  const built = await createApp(config);
  const server = createServer(built.app);
  try {
    const base = await listen(server);
    const { services, db } = built;
    const { owner_id } = await services.agents.createOwner(db, { email: `bench-${randomBytes(4).toString('hex')}@example.com` });
    const agent = await services.agents.createAgent(db, { ownerId: owner_id, name: 'replay bench' });
    await services.ledger.policy.set(db, agent.agent_id, { operation_types: ['payment'], allowed_assets: ['USDC'], per_tx_usd: '90', period: 'day' });
    const wallet = await db('wallets').where({ agent_id: agent.agent_id }).first('id');
    const now = Date.now();
    const from = now - DAYS * 86_400_000;
    // One statement: operation i at an even spacing over the days, USD 1 to 100 (a tenth over the live cap of 90,
    // refused), payee i % 20, every 97th failed in settlement an hour later.
    await db.raw(
      `INSERT INTO operations (id, agent_id, wallet_id, type, status, resource_type, resource_id, asset_symbol, amount, amount_usd_e8, fee_usd_e8,
         counts_toward_limits, human_message, error_code, error_message, to_address, details, created_at, updated_at, failed_at, policy_facts)
       SELECT id, ?::uuid, ?, 'payment', status, 'payment', id, 'USDC', usd::numeric * 1000000, usd::numeric * 100000000, 0, status <> 'policy_rejected', 'bench payment',
         CASE WHEN status = 'policy_rejected' THEN 'limit_exceeded' WHEN status = 'execution_failed' THEN 'settlement_failed' END, NULL,
         payee, jsonb_build_object('recipient_id', NULL), at, at, CASE WHEN status = 'execution_failed' THEN at + interval '1 hour' END,
         jsonb_build_object('v', 1, 'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'type', 'payment', 'asset', 'USDC',
           'usd_e8', (usd::numeric * 100000000)::text, 'counts', true, 'recipient', jsonb_build_object('ids', '[]'::jsonb, 'address', payee),
           'protocol', NULL, 'slippage_bps', NULL, 'ltv_bps', NULL, 'allowed', status <> 'policy_rejected',
           'code', CASE WHEN status = 'policy_rejected' THEN 'limit_exceeded' END, 'key', CASE WHEN status = 'policy_rejected' THEN 'per_tx_usd' END)
       FROM (SELECT gen_random_uuid() AS id, i,
               to_timestamp((? + i * ?::float8) / 1000.0) AS at,
               (i * 37 % 100) + 1 AS usd,
               '0x' || lpad(to_hex(i % 20 + 1), 40, '0') AS payee,
               CASE WHEN (i * 37 % 100) + 1 > 90 THEN 'policy_rejected' WHEN i % 97 = 0 THEN 'execution_failed' ELSE 'executed' END AS status
             FROM generate_series(0, ? - 1) AS i) s
       ORDER BY i`,
      [agent.agent_id, wallet.id, from, (DAYS * 86_400_000) / OPERATIONS, OPERATIONS],
    );
    const candidate = {
      operation_types: ['payment'],
      allowed_assets: ['USDC'],
      per_tx_usd: '80',
      per_period_usd: '4000',
      max_txs_per_period: 100,
      lifetime_usd: '400000',
      period: 'day',
      allowed_recipients: Array.from({ length: 15 }, (_, i) => `0x${(i + 1).toString(16).padStart(40, '0')}`),
    };
    const since = new Date(from - 60_000);
    const check = await services.ledger.policy.replay(db, agent.agent_id, { policy: candidate, since });
    if (check.counts.operations !== OPERATIONS) throw new Error(`replayed ${check.counts.operations} operations, seeded ${OPERATIONS}`);
    const read: number[] = [];
    const service: number[] = [];
    const http: number[] = [];
    const url = `${base}/v1/owner/agents/${agent.agent_id}/policy/replay`;
    const body = JSON.stringify({ policy: candidate, since: since.toISOString() });
    for (let i = 0; i < RUNS; i++) {
      read.push(await timed(() => readPolicyHistory(db, agent.agent_id, since)));
      service.push(await timed(() => services.ledger.policy.replay(db, agent.agent_id, { policy: candidate, since })));
      http.push(
        await timed(async () => {
          const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body });
          if (res.status !== 200) throw new Error(`replay answered ${res.status}: ${await res.text()}`);
          await res.arrayBuffer();
        }),
      );
    }
    process.stdout.write(`replay of ${OPERATIONS} operations: ${check.counts.unchanged} unchanged, ${check.counts.newly_refused} newly refused, ${check.counts.newly_allowed} newly allowed\n`);
    report([
      row({
        bench: 'replay',
        what: `replay ${OPERATIONS} operations (service)`,
        today: median(service),
        unit: 'ms',
        baseline: median(read),
        baselineName: 'history read alone',
        target: `≤ ${TARGET_MS} ms`,
        met: median(service) <= TARGET_MS,
      }),
      row({
        bench: 'replay',
        what: `POST …/policy/replay, ${OPERATIONS} operations`,
        today: median(http),
        unit: 'ms',
        baseline: median(read),
        baselineName: 'history read alone',
        target: `≤ ${TARGET_MS} ms`,
        met: median(http) <= TARGET_MS,
      }),
    ]);
  } finally {
    await close(server);
    await built.close();
    await scratch.drop();
  }
}

await main();
