// The SDK as an integrator gets it: packed with plain `npm pack` (its prepack builds), installed offline into an empty project, then run
// against the live server (HTTP on a port, worker settling payments): the issue 13 acceptance flow, the CLI flow
// (sdk/test/cli-smoke.sh), webhook verification, and a browser bundle with no node: imports, loaded in Chromium.
import { expect } from 'chai';
import express from 'express';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { computeSignature } from '../../src/webhooks/signing.js';
import { repoRoot } from '../helpers/process.js';
import { createDemoAgent, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

type Sdk = typeof import('../../sdk/src/index.js');
type SdkNode = typeof import('../../sdk/src/node.js');

const sdkDir = join(repoRoot, 'sdk');
const PAY_TO = '0x000000000000000000000000000000000000dEaD';

function run(command: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function mustRun(command: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  const r = await run(command, args, opts);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** A fetch that records every request's method, URL and headers (and can drop the first answer of a route). */
function recordingFetch() {
  const calls: { method: string; url: string; headers: Record<string, string> }[] = [];
  let dropNext: string | null = null;
  const fn: typeof fetch = async (input, init) => {
    const url = String(input);
    const headers = Object.fromEntries(Object.entries((init?.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
    calls.push({ method: init?.method ?? 'GET', url, headers });
    const res = await fetch(input, init);
    if (dropNext && url.endsWith(dropNext)) {
      dropNext = null;
      await res.text();
      throw new TypeError('fetch failed (answer dropped by the test)');
    }
    return res;
  };
  return { fn, calls, dropAnswerOnce: (pathSuffix: string) => (dropNext = pathSuffix) };
}

/** Compile-time checks (never run): the route key types the input, the response and the error narrowing. */
export function typeChecks(c: InstanceType<Sdk['AgentClient']>, sdk: Sdk, e: unknown): void {
  // @ts-expect-error `to` is required by the document
  void c.payments.create({ asset: 'USDC', amount: '1' });
  // @ts-expect-error no such route
  void c.request('GET /v1/agent/nowhere');
  // @ts-expect-error not a list route
  void c.paginate('GET /v1/agent/self');
  // @ts-expect-error not an error code of the document
  void sdk.isAgentApiError(e, 'no_such_code');
  void c.request('GET /v1/agent/operations/{id}', { id: 'x' }).then((r) => {
    // @ts-expect-error the success body has `operation`, not `operations`
    void r.operations;
  });
}

describe('SDK package (packed tarball) against the live server', function () {
  this.timeout(240_000);
  let tmp: string;
  let sdk: Sdk;
  let sdkNode: SdkNode;
  let server: TestServer;
  let agent: TestAgent;

  before(async function () {
    this.timeout(240_000);
    tmp = mkdtempSync(join(tmpdir(), 'agent-api-sdk-'));
    // Plain `npm pack`, with no build before it (and no dist/ left from one): the package's prepack builds.
    rmSync(join(sdkDir, 'dist'), { recursive: true, force: true });
    await mustRun('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: sdkDir });
    const tarball = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
    expect(tarball, 'npm pack wrote a tarball').to.be.a('string');
    const project = join(tmp, 'project');
    await mustRun('mkdir', ['-p', project], { cwd: tmp });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module' }));
    await mustRun('npm', ['install', '--offline', '--no-audit', '--no-fund', join(tmp, tarball!)], { cwd: project });
    // Resolved through the package's `exports`, as a consumer's import would be.
    writeFileSync(join(project, 'entry.mjs'), "export * as sdk from '@agent-api/sdk';\nexport * as sdkNode from '@agent-api/sdk/node';\n");
    ({ sdk, sdkNode } = (await import(pathToFileURL(join(project, 'entry.mjs')).href)) as { sdk: Sdk; sdkNode: SdkNode });
    server = await startTestServer({ worker: true });
    agent = await createDemoAgent(server);
  });
  after(async () => {
    await server?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const client = (a: TestAgent, options: ConstructorParameters<Sdk['AgentClient']>[1] = {}) => new sdk.AgentClient({ baseUrl: server.baseUrl, agentId: a.agentId, apiKey: a.apiKey }, options);

  it('installs with its declarations, a bin and no runtime dependencies', () => {
    const installed = join(tmp, 'project', 'node_modules', '@agent-api', 'sdk');
    for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/node.js', 'dist/node.d.ts', 'dist/cli.js', 'README.md']) expect(existsSync(join(installed, f)), f).to.equal(true);
    expect(existsSync(join(tmp, 'project', 'node_modules', '.bin', 'agent-api'))).to.equal(true);
    expect(readdirSync(join(tmp, 'project', 'node_modules')).filter((d) => !d.startsWith('.'))).to.deep.equal(['@agent-api']);
  });

  it('types a consumer through the installed declarations (tsc, NodeNext)', async () => {
    const project = join(tmp, 'project');
    writeFileSync(
      join(project, 'consumer.ts'),
      [
        "import { AgentClient, isAgentApiError } from '@agent-api/sdk';",
        "import { createWebhookHandler } from '@agent-api/sdk/node';",
        "const client = new AgentClient({ baseUrl: 'http://x', bearerToken: 't' }, { timeoutMs: 1000 });",
        'export async function pay(): Promise<string> {',
        '  try {',
        "    const w = await client.payments.create({ to: '0x1', asset: 'USDC', amount: '1' });",
        '    return w.operation_id;',
        '  } catch (e) {',
        "    if (isAgentApiError(e, 'insufficient_funds')) return e.code;",
        '    throw e;',
        '  }',
        '}',
        '// @ts-expect-error `asset` is required',
        "export const bad = () => client.payments.create({ to: '0x1', amount: '1' });",
        "export const handler = createWebhookHandler({ secret: 's', onEvent: (event) => event.type });",
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          lib: ['ES2022', 'DOM'],
          types: ['node'],
          typeRoots: [join(repoRoot, 'node_modules', '@types')],
        },
        files: ['consumer.ts'],
      }),
    );
    const r = await run(join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], { cwd: project });
    expect(r.code, r.stdout + r.stderr).to.equal(0);
  });

  it('reads self and balances', async () => {
    const c = client(agent);
    const self = await c.self.get();
    expect(self.ok).to.equal(true);
    expect(self.agent.id).to.equal(agent.agentId);
    const balances = await c.request('GET /v1/agent/balances', { limit: 100 });
    expect(balances.items.find((b) => b.asset_symbol === 'USDC')).to.include({ available: '1000' });
  });

  it('creates a payment with an automatic key, reuses the key on a retry after a lost answer, and replays it', async () => {
    const rec = recordingFetch();
    const c = client(agent, { fetch: rec.fn, retryBaseMs: 10 });
    rec.dropAnswerOnce('/v1/agent/payments');
    const created = await c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '1.5' });
    expect(created).to.include({ ok: true, status: 'accepted' });
    const posts = rec.calls.filter((r) => r.method === 'POST');
    expect(posts).to.have.length(2);
    const key = posts[0]!.headers['idempotency-key'];
    expect(key).to.match(/^sdk_[0-9a-f]{32}$/);
    expect(posts[1]!.headers['idempotency-key']).to.equal(key);
    const replay = await c.request('POST /v1/agent/payments', { to: PAY_TO, asset: 'USDC', amount: '1.5' }, { idempotencyKey: key });
    expect(replay.operation_id).to.equal(created.operation_id);
    const payments = await c.payments.list({ limit: 100 });
    expect(payments.items.filter((o) => o.id === created.operation_id)).to.have.length(1);
    expect(payments.items).to.have.length(1);
    const other = await c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '1.5' });
    expect(other.operation_id).to.not.equal(created.operation_id);
  });

  it('waitForOperation follows a payment to executed', async () => {
    const c = client(agent);
    const created = await c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '2' });
    const op = await c.waitForOperation(created.operation_id, { timeoutMs: 30_000, intervalMs: 50 });
    expect(op).to.include({ id: created.operation_id, status: 'executed', amount: '2' });
    const pending = await c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '0.01' });
    try {
      await c.waitForOperation(pending.operation_id, { terminal: ['cancelled'], timeoutMs: 300, intervalMs: 50 });
      expect.fail('waitForOperation should time out');
    } catch (e) {
      expect(e).to.be.instanceOf(sdk.WaitTimeoutError);
    }
  });

  it('paginate walks 120 operations page by page, lazily', async () => {
    const other = await createDemoAgent(server);
    const c = client(other);
    const ids: string[] = [];
    for (let batch = 0; batch < 12; batch++) {
      const made = await Promise.all(Array.from({ length: 10 }, () => c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '0.01' })));
      ids.push(...made.map((m) => m.operation_id));
    }
    const rec = recordingFetch();
    const counted = client(other, { fetch: rec.fn });
    const seen: string[] = [];
    for await (const op of counted.paginate('GET /v1/agent/operations', { limit: 50, type: 'payment' })) seen.push(op.id);
    expect(seen).to.have.length(120);
    expect(new Set(seen)).to.deep.equal(new Set(ids));
    expect(rec.calls.map((r) => new URL(r.url).searchParams.has('cursor'))).to.deep.equal([false, true, true]);
    const lazy = recordingFetch();
    let n = 0;
    for await (const _ of client(other, { fetch: lazy.fn }).paginate('GET /v1/agent/operations', { limit: 50 })) if (++n === 10) break;
    expect(lazy.calls).to.have.length(1);
  });

  it('throws AgentApiError that isAgentApiError narrows by code', async () => {
    const c = client(agent);
    try {
      await c.payments.create({ to: PAY_TO, asset: 'USDC', amount: '100000000' });
      expect.fail('the payment should be refused');
    } catch (e) {
      expect(sdk.isAgentApiError(e, 'not_found')).to.equal(false);
      if (!sdk.isAgentApiError(e, 'insufficient_funds')) throw e;
      const code: 'insufficient_funds' = e.code;
      expect(code).to.equal('insufficient_funds');
      expect(e.status).to.equal(422);
      expect(e.requestId).to.be.a('string').and.equal(e.headers['x-request-id']);
      expect(e.message).to.be.a('string').that.is.not.empty;
    }
    try {
      await c.operations.get({ id: '00000000-0000-4000-8000-000000000000' });
      expect.fail('unknown operation');
    } catch (e) {
      expect(sdk.isAgentApiError(e, 'not_found', 'validation_failed')).to.equal(true);
    }
  });

  it('retries a 429 after its Retry-After (with jitter) and then succeeds', async () => {
    const limited = await server.createAgent({});
    await server.services.agents.setRateLimit(server.db, limited.agentId, { class: 'read', limit: 1, burst: 1, windowSeconds: 2 });
    const noRetry = client(limited, { maxRetries: 0 });
    await noRetry.self.get();
    try {
      await noRetry.self.get();
      expect.fail('the second read should be limited');
    } catch (e) {
      if (!sdk.isAgentApiError(e, 'rate_limited')) throw e;
      expect(e.status).to.equal(429);
      expect(Number(e.headers['retry-after'])).to.be.greaterThan(0);
      expect(e.details).to.have.property('limit_count', 1);
    }
    const retries: { delayMs: number; code: string; retryAfterMs: number }[] = [];
    const patient = client(limited, {
      onRetry: (r) =>
        retries.push({ delayMs: r.delayMs, code: (r.error as { code?: string }).code ?? '', retryAfterMs: Number((r.error as { headers?: Record<string, string> }).headers?.['retry-after']) * 1000 }),
    });
    const started = Date.now();
    const self = await patient.self.get();
    expect(self.agent.id).to.equal(limited.agentId);
    expect(retries).to.have.length.greaterThan(0);
    expect(retries[0]!.code).to.equal('rate_limited');
    // Waited at least Retry-After, plus some jitter.
    expect(retries[0]!.retryAfterMs).to.be.greaterThan(0);
    expect(retries[0]!.delayMs).to.be.greaterThan(retries[0]!.retryAfterMs);
    expect(Date.now() - started).to.be.at.least(retries[0]!.delayMs);
  });

  it('verifies webhook signatures (rotation header included) and serves them through the node:http helper', async () => {
    const payload = JSON.stringify({
      id: '11111111-1111-4111-8111-111111111111',
      type: 'webhook.test',
      created_at: new Date().toISOString(),
      agent_id: agent.agentId,
      wallet_id: agent.walletId,
      operation_id: null,
      resource: { type: 'webhook', id: '22222222-2222-4222-8222-222222222222' },
      data: { message: 'hi' },
    });
    const ts = Math.floor(Date.now() / 1000);
    const headers = { 'Service-Webhook-Timestamp': String(ts), 'Service-Webhook-Signature': `v1=${computeSignature('whsec_new', ts, payload)},v1=${computeSignature('whsec_old', ts, payload)}` };
    const event = await sdk.verifyWebhookSignature({ payload, headers, secret: 'whsec_old' });
    expect(event.type).to.equal('webhook.test');
    for (const [input, reason] of [
      [{ payload: payload + ' ', headers, secret: 'whsec_new' }, 'signature_mismatch'],
      [{ payload, headers, secret: 'whsec_other' }, 'signature_mismatch'],
      [{ payload, headers, secret: 'whsec_new', nowSeconds: ts + 3600 }, 'timestamp_out_of_tolerance'],
      [{ payload, headers: {}, secret: 'whsec_new' }, 'missing_headers'],
    ] as const) {
      try {
        await sdk.verifyWebhookSignature(input);
        expect.fail(`accepted ${reason}`);
      } catch (e) {
        expect(e).to.be.instanceOf(sdkNode.WebhookVerificationError);
        expect((e as { reason: string }).reason).to.equal(reason);
      }
    }
    const received: string[] = [];
    const receiver: Server = createServer(sdkNode.createWebhookHandler({ secret: 'whsec_new', onEvent: (e) => void received.push(e.id) }));
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
      expect((await fetch(url, { method: 'POST', headers, body: payload })).status).to.equal(204);
      expect((await fetch(url, { method: 'POST', headers, body: payload.replace('hi', 'ho') })).status).to.equal(400);
      expect(received).to.deep.equal(['11111111-1111-4111-8111-111111111111']);
    } finally {
      receiver.close();
    }
    // The same handler as an Express route, mounted before any body parser.
    const app = express();
    app.post('/hooks', sdkNode.createWebhookHandler({ secret: ['whsec_x', 'whsec_new'], onEvent: (e) => void received.push(`express:${e.id}`) }));
    const viaExpress = app.listen(0, '127.0.0.1');
    await once(viaExpress, 'listening');
    try {
      const url = `http://127.0.0.1:${(viaExpress.address() as AddressInfo).port}/hooks`;
      expect((await fetch(url, { method: 'POST', headers, body: payload })).status).to.equal(204);
      expect((await fetch(url, { method: 'POST', headers: { ...headers, 'Service-Webhook-Timestamp': String(ts - 1) }, body: payload })).status).to.equal(400);
      expect(received).to.include('express:11111111-1111-4111-8111-111111111111');
    } finally {
      viaExpress.close();
    }
  });

  it('runs the CLI flow (sdk/test/cli-smoke.sh) with the installed binary, on the oldest supported Node when the machine has it', async () => {
    const cliAgent = await createDemoAgent(server);
    const limited = await server.createAgent({});
    await server.services.agents.setRateLimit(server.db, limited.agentId, { class: 'read', limit: 1, burst: 1, windowSeconds: 2 });
    // The tests run on Node 24; the machine's own `node` (20 here) proves the `engines` floor when it is there.
    const systemNode = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => existsSync(p) && Number(/^v(\d+)/.exec(spawnSync(p, ['-v'], { encoding: 'utf8' }).stdout)?.[1]) >= 20);
    const PATH = systemNode ? `${dirname(systemNode)}:${process.env.PATH}` : process.env.PATH;
    const r = await run('bash', [join(sdkDir, 'test', 'cli-smoke.sh')], {
      cwd: tmp,
      env: {
        ...process.env,
        PATH,
        AGENT_API_BASE_URL: server.baseUrl,
        AGENT_API_AGENT_ID: cliAgent.agentId,
        AGENT_API_KEY: cliAgent.apiKey,
        AGENT_API_BIN: join(tmp, 'project', 'node_modules', '.bin', 'agent-api'),
        PAY_TO,
        LIMITED_AGENT_ID: limited.agentId,
        LIMITED_API_KEY: limited.apiKey,
      },
    });
    expect(r.code, `${r.stdout}\n${r.stderr}`).to.equal(0);
    expect(r.stdout).to.contain('cli smoke: ok');
    const major = Number(/cli smoke: node v(\d+)/.exec(r.stdout)?.[1]);
    expect(major).to.be.at.least(20);
    if (systemNode) expect(r.stdout).to.contain(`cli smoke: node ${spawnSync(systemNode, ['-v'], { encoding: 'utf8' }).stdout.trim()}`);
  });

  it('bundles for the browser without node: modules, and the bundle verifies a webhook and calls the API in Chromium', async () => {
    const { build } = await import('esbuild');
    const project = join(tmp, 'project');
    writeFileSync(join(project, 'browser.mjs'), "import * as sdk from '@agent-api/sdk';\nwindow.sdk = sdk;\n");
    const result = await build({
      entryPoints: [join(project, 'browser.mjs')],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      metafile: true,
      absWorkingDir: project,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((i) => i.startsWith('node:') || /(^|\/)node\.js$/.test(i))).to.deep.equal([]);
    const code = result.outputFiles[0]!.text;
    expect(code).to.not.match(/from\s*["']node:|require\(["']node:/);
    if (!existsSync('/usr/bin/chromium')) return; // .ci/run installs it; the bundle checks above stand without it
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      // A page of the server's origin: a secure context (loopback), so Web Crypto is there, and same-origin calls.
      await page.goto(`${server.baseUrl}/healthz`);
      await page.addScriptTag({ content: code, type: 'module' });
      await page.waitForFunction(() => 'sdk' in globalThis);
      const ts = Math.floor(Date.now() / 1000);
      const payload = JSON.stringify({ id: 'e', type: 'webhook.test' });
      const out = await page.evaluate(
        async ({ baseUrl, agentId, apiKey, payload, ts, signature }) => {
          const s = (globalThis as unknown as { sdk: Sdk }).sdk;
          const event = await s.verifyWebhookSignature({ payload, headers: { 'service-webhook-timestamp': String(ts), 'service-webhook-signature': signature }, secret: 'whsec_b' });
          const self = await new s.AgentClient({ baseUrl, agentId, apiKey }).self.get();
          return { type: event.type, agent: self.agent.id, key: s.createIdempotencyKey('web') };
        },
        { baseUrl: server.baseUrl, agentId: agent.agentId, apiKey: agent.apiKey, payload, ts, signature: `v1=${computeSignature('whsec_b', ts, payload)}` },
      );
      expect(out.type).to.equal('webhook.test');
      expect(out.agent).to.equal(agent.agentId);
      expect(out.key).to.match(/^web_[0-9a-f]{32}$/);
    } finally {
      await browser.close();
    }
  });
});
