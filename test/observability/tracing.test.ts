// OpenTelemetry: the real server process exports OTLP/HTTP JSON to a loopback collector of the test's own;
// request spans carry the operationId, database and Redis calls are their children, and log lines carry both ids.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { createTracing } from '../../src/observability/tracing.js';
import { startServerProcess, type ServerProcess } from '../helpers/process.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';
import { createWebhookTestContext } from '../webhooks/helpers/context.js';
import { createTestPki, startReceiver } from '../webhooks/helpers/receiver.js';

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Record<string, string | number | boolean>;
}

/** A minimal OTLP/HTTP JSON collector: every span of every POST /v1/traces. */
async function startCollector(): Promise<{ url: string; spans: ExportedSpan[]; server: Server }> {
  const spans: ExportedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
      if (req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const body = JSON.parse(raw.toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }> };
        for (const rs of body.resourceSpans) {
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              const attributes: ExportedSpan['attributes'] = {};
              for (const a of (s.attributes ?? []) as Array<{ key: string; value: Record<string, string | number | boolean> }>) attributes[a.key] = Object.values(a.value)[0]!;
              spans.push({ traceId: String(s.traceId), spanId: String(s.spanId), parentSpanId: s.parentSpanId ? String(s.parentSpanId) : undefined, name: String(s.name), attributes });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server };
}

describe('OpenTelemetry traces', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let seed: TestServer;
  let proc: ServerProcess;

  before(async function () {
    this.timeout(60_000);
    collector = await startCollector();
    seed = await startTestServer();
    const env = testConfigEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, LOG_LEVEL: 'info', RUN_WORKER: 'false', VALIDATE_RESPONSES: 'false' });
    proc = await startServerProcess(env);
  });
  after(async function () {
    this.timeout(30_000);
    await proc?.stop();
    await seed?.close();
    collector?.server.close();
  });

  it('exports one server span per request named by operationId, with database and Redis child spans, and logs requestId beside traceId', async function () {
    this.timeout(30_000);
    const agent = await seed.createAgent();
    const requestId = `trace-test-${Date.now()}`;
    const res = await fetch(`${proc.baseUrl}/v1/agent/self`, { headers: { ...agent.headers, 'x-request-id': requestId } });
    expect(res.status).to.equal(200);

    const deadline = Date.now() + 15_000;
    let root: ExportedSpan | undefined;
    while (Date.now() < deadline) {
      root = collector.spans.find((s) => s.attributes['agentapi.request_id'] === requestId);
      if (root && collector.spans.some((s) => s.parentSpanId === root!.spanId && s.name.startsWith('redis'))) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(root, 'the request span arrived').to.not.equal(undefined);
    expect(root!.name).to.equal('getSelf');
    expect(root!.attributes['agentapi.operation_id']).to.equal('getSelf');
    expect(root!.attributes['http.response.status_code']).to.equal(200);
    expect(root!.parentSpanId ?? '').to.equal('');

    const children = collector.spans.filter((s) => s.parentSpanId === root!.spanId);
    const db = children.filter((s) => s.attributes['db.system.name'] === 'postgresql');
    const redis = children.filter((s) => s.attributes['db.system.name'] === 'redis');
    expect(db.length, 'database child spans').to.be.at.least(1);
    expect(db.every((s) => s.traceId === root!.traceId && typeof s.attributes['db.query.text'] === 'string')).to.equal(true);
    expect(redis.length, 'redis child spans').to.be.at.least(1);

    const line = proc.stdoutLines.map((l) => (l.startsWith('{') ? (JSON.parse(l) as Record<string, unknown>) : null)).find((l) => l?.requestId === requestId && l.msg === 'request');
    expect(line, 'the request log line').to.not.equal(undefined);
    expect(line!.traceId).to.equal(root!.traceId);
  });

  it('costs nothing when OTEL_EXPORTER_OTLP_ENDPOINT is unset: no tracing object, no ids in logs', () => {
    expect(seed.built.tracing.enabled).to.equal(false);
    expect(seed.built.tracing.currentIds()).to.equal(undefined);
  });
});

describe('OpenTelemetry traces of the delivery worker', () => {
  it('exports a root span per delivery with the outbound webhook POST as its child, and the claim with its queries', async function () {
    this.timeout(30_000);
    const collector = await startCollector();
    const pki = await createTestPki();
    const receiver = await startReceiver(pki);
    const ctx = await createWebhookTestContext(pki.ca);
    const tracing = createTracing({ endpoint: collector.url, serviceName: 'worker-test', scheduledDelayMs: 50 });
    tracing.watchKnex(ctx.db);
    try {
      const caller = await ctx.newAgent();
      await ctx.service.create(ctx.db, caller, { url: receiver.url('/traced'), event_types: ['payment.executed'] });
      await ctx.emit(caller);
      // Other files' leftover due deliveries may be claimed too; ours is the one our receiver answers 200.
      expect(await ctx.worker({ tracing }).runOnce()).to.be.at.least(1);
      await receiver.waitForRequests(1);
      await tracing.flush();
      const deadline = Date.now() + 10_000;
      const ours = (s: ExportedSpan) => s.name === 'webhook POST' && s.attributes['http.response.status_code'] === 200;
      while (!collector.spans.some(ours) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const post = collector.spans.find(ours);
      expect(post, 'the webhook POST span').to.not.equal(undefined);
      expect(post!.attributes['http.response.status_code']).to.equal(200);
      const root = collector.spans.find((s) => s.spanId === post!.parentSpanId);
      expect(root?.name).to.equal('webhook delivery');
      // The claim (which also records delivered attempts, many at once) is a span of its own with the queries.
      const claims = collector.spans.filter((s) => s.name === 'webhook claim');
      expect(claims.length).to.be.at.least(1);
      expect(collector.spans.filter((s) => claims.some((c) => c.spanId === s.parentSpanId) && s.attributes['db.system.name'] === 'postgresql').length).to.be.at.least(1);
    } finally {
      await tracing.shutdown();
      await ctx.close();
      await receiver.close();
      collector.server.close();
    }
  });
});
