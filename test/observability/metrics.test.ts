// GET /metrics: a real scrape of the Prometheus listener after real requests, parsed series by series.
import { expect } from 'chai';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startMetricsServer } from '../../src/observability/metrics.js';
import { createDemoAgent, newKey, startTestServer, type TestServer } from '../helpers/server.js';
import { createTestPki, startReceiver, type Receiver } from '../webhooks/helpers/receiver.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the text exposition format (comments skipped; label values without escaped quotes suffice here). */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

const matching = (samples: Sample[], name: string, labels: Record<string, string> = {}) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
const total = (samples: Sample[], name: string, labels: Record<string, string> = {}) => matching(samples, name, labels).reduce((sum, s) => sum + s.value, 0);

describe('GET /metrics', () => {
  let server: TestServer;
  let metricsServer: Server;
  let metricsUrl: string;
  let receiver: Receiver;

  before(async function () {
    this.timeout(30_000);
    receiver = await startReceiver(await createTestPki());
    server = await startTestServer({ worker: true, env: { METRICS_PORT: '0', UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true', WEBHOOK_ATTEMPT_TIMEOUT_MS: '1000', WEBHOOK_LEASE_MS: '5000' } });
    metricsServer = await startMetricsServer(server.built.metrics.registry!, 0, '127.0.0.1');
    metricsUrl = `http://127.0.0.1:${(metricsServer.address() as AddressInfo).port}/metrics`;
  });
  after(async () => {
    metricsServer?.close();
    await server?.close();
    await receiver?.close();
  });

  const scrape = async () => {
    const res = await fetch(metricsUrl);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };

  it('counts requests and their latency by operationId and status', async () => {
    const agent = await server.createAgent();
    for (let i = 0; i < 3; i++) expect((await server.request('GET', '/v1/agent/self', { agent })).status).to.equal(200);
    expect((await server.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': agent.agentId, 'x-api-key': 'agk_wrong' } })).status).to.equal(401);
    expect((await server.request('GET', '/healthz')).status).to.equal(200);
    const samples = await scrape();
    expect(total(samples, 'agentapi_http_requests_total', { operation: 'getSelf', status: '200' })).to.equal(3);
    expect(total(samples, 'agentapi_http_requests_total', { operation: 'getSelf', status: '401' })).to.equal(1);
    expect(total(samples, 'agentapi_http_requests_total', { operation: 'getHealth', status: '200' })).to.equal(1);
    expect(total(samples, 'agentapi_http_request_duration_seconds_count', { operation: 'getSelf', status: '200' })).to.equal(3);
    const inf = matching(samples, 'agentapi_http_request_duration_seconds_bucket', { operation: 'getSelf', status: '200', le: '+Inf' });
    expect(inf.map((s) => s.value)).to.deep.equal([3]);
    expect(total(samples, 'agentapi_http_request_duration_seconds_sum', { operation: 'getSelf', status: '200' })).to.be.greaterThan(0);
  });

  it('counts operations entering a status after their commit, matching the table (a rolled-back write counts nothing)', async function () {
    this.timeout(30_000);
    const agent = await createDemoAgent(server);
    const counted = async () => {
      const samples = await scrape();
      return {
        accepted: total(samples, 'agentapi_operations_total', { type: 'payment', status: 'accepted' }),
        executed: total(samples, 'agentapi_operations_total', { type: 'payment', status: 'executed' }),
      };
    };
    const before = await counted();
    const pay = (amount: string) =>
      server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount } });
    for (let i = 0; i < 3; i++) expect((await pay('1.25')).status).to.equal(200);
    // More than the balance: the hold fails, the insert rolls back with it.
    expect((await pay('999999999')).status).to.not.equal(200);
    for (let i = 0; i < 100; i++) {
      const left = await server.db('operations').where({ agent_id: agent.agentId, type: 'payment' }).whereNot({ status: 'executed' }).count<{ n: string }[]>('* as n');
      if (Number(left[0]!.n) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const rows = await server.db('operations').where({ agent_id: agent.agentId, type: 'payment' }).select('status');
    const after = await counted();
    expect(rows.map((r: { status: string }) => r.status)).to.deep.equal(['executed', 'executed', 'executed']);
    expect(after.accepted - before.accepted).to.equal(3);
    expect(after.executed - before.executed).to.equal(3);
  });

  it('counts rate-limit refusals by class', async () => {
    const agent = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'read', limit: 2, burst: 2, windowSeconds: 60 });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await server.request('GET', '/v1/agent/self', { agent })).status);
    expect(statuses).to.deep.equal([200, 200, 429, 429]);
    expect(total(await scrape(), 'agentapi_rate_limit_refusals_total', { class: 'read' })).to.equal(2);
  });

  it('counts idempotency replays and key-reuse conflicts', async () => {
    const agent = await server.createAgent();
    const key = newKey();
    const body = { url: 'https://example.com/hook', event_types: ['payment.executed'] };
    const first = await server.request('POST', '/v1/agent/webhooks', { agent, body, idempotencyKey: key });
    expect(first.status).to.equal(200);
    const replay = await server.request('POST', '/v1/agent/webhooks', { agent, body, idempotencyKey: key });
    expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
    const conflict = await server.request('POST', '/v1/agent/webhooks', { agent, body: { ...body, description: 'other' }, idempotencyKey: key });
    expect(conflict.status).to.equal(409);
    const samples = await scrape();
    expect(total(samples, 'agentapi_idempotency_total', { outcome: 'replayed' })).to.equal(1);
    expect(total(samples, 'agentapi_idempotency_total', { outcome: 'key_reuse_mismatch' })).to.equal(1);
  });

  it('reports webhook attempts, the pool, Redis and the process', async function () {
    this.timeout(20_000);
    const agent = await server.createAgent();
    const created = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url: receiver.url(), event_types: ['payment.executed'] }, idempotencyKey: newKey() });
    expect(created.status).to.equal(200);
    const webhookId = created.body.webhook.id as string;
    expect((await server.request('POST', `/v1/agent/webhooks/${webhookId}/test`, { agent, idempotencyKey: newKey() })).status).to.be.oneOf([200, 201, 202]);
    // The in-process worker attempts it (the receiver's CA is not trusted here, so the outcome may be a TLS failure): any attempt counts.
    let samples = await scrape();
    const deadline = Date.now() + 15_000;
    while (total(samples, 'agentapi_webhook_delivery_attempts_total') < 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      samples = await scrape();
    }
    expect(total(samples, 'agentapi_webhook_delivery_attempts_total')).to.be.at.least(1);
    const outcomes = matching(samples, 'agentapi_webhook_delivery_attempts_total').map((s) => s.labels.outcome);
    expect(outcomes.every((o) => ['delivered', 'retrying', 'failed'].includes(o!))).to.equal(true);

    expect(total(samples, 'agentapi_redis_up')).to.equal(1);
    expect(
      matching(samples, 'agentapi_db_pool_connections')
        .map((s) => s.labels.state)
        .sort(),
    ).to.deep.equal(['free', 'used', 'waiting']);
    expect(
      matching(samples, 'agentapi_db_timeouts_total')
        .map((s) => s.labels.kind)
        .sort(),
    ).to.deep.equal(['acquire', 'statement']);
    expect(matching(samples, 'process_cpu_user_seconds_total')).to.have.length(1);
    expect(matching(samples, 'nodejs_eventloop_lag_seconds')).to.have.length(1);
  });

  it('is absent when METRICS_PORT is unset: no registry, no middleware', async () => {
    const plain = await startTestServer();
    try {
      expect(plain.built.metrics.registry).to.equal(null);
    } finally {
      await plain.close();
    }
  });

  describe('table gauges (no worker running, so nothing settles the probe)', () => {
    it('reports operations by type and status, settlement lag and the delivery queue per endpoint state', async () => {
      const fresh = await startTestServer({ env: { METRICS_PORT: '0' } });
      const agent = await fresh.createAgent();
      try {
        await fresh.db('operations').insert({
          id: crypto.randomUUID(),
          agent_id: agent.agentId,
          wallet_id: agent.walletId,
          type: 'payment',
          status: 'accepted',
          resource_type: 'payment',
          resource_id: crypto.randomUUID(),
          human_message: 'metrics probe',
          settle_after: new Date(Date.now() - 3_600_000),
          created_at: new Date(),
          updated_at: new Date(),
        });
        const samples = parseExposition(await fresh.built.metrics.registry!.metrics());
        expect(total(samples, 'agentapi_settlement_lag_seconds')).to.be.at.least(3000);
        expect(
          matching(samples, 'agentapi_webhook_oldest_due_age_seconds')
            .map((s) => s.labels.endpoint_state)
            .sort(),
        ).to.deep.equal(['disabled', 'enabled']);
      } finally {
        await fresh.db('operations').where({ human_message: 'metrics probe' }).delete();
        await fresh.close();
      }
    });
  });
});
