// Crash safety: SIGKILL delivery workers mid-flight 10 times; every event arrives, never two attempts at once.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerResponse } from 'node:http';
import { testEnv } from '../setup.js';
import { createWebhookTestContext, TEST_MASTER_KEY, waitUntil, type WebhookTestContext } from './helpers/context.js';
import { createTestPki, startReceiver, type Receiver } from './helpers/receiver.js';
import { independentVerify } from './helpers/verify.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/worker-process.ts', import.meta.url));

describe('webhook worker crash safety', function () {
  this.timeout(120_000);
  let ctx: WebhookTestContext;
  let receiver: Receiver;
  let caFile: string;
  const children = new Set<ChildProcess>();

  before(async () => {
    const pki = await createTestPki();
    receiver = await startReceiver(pki);
    caFile = join(mkdtempSync(join(tmpdir(), 'wh-ca-')), 'ca.pem');
    writeFileSync(caFile, pki.ca);
    ctx = await createWebhookTestContext(pki.ca);
  });

  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await receiver.close();
    await ctx.close();
  });

  function startWorker(): Promise<ChildProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: {
        ...process.env,
        DATABASE_URL: testEnv.databaseUrl,
        MASTER_KEY: TEST_MASTER_KEY,
        WEBHOOK_LEASE_MS: '1500',
        WEBHOOK_ATTEMPT_TIMEOUT_MS: '1000',
        WEBHOOK_TEST_CA_FILE: caFile,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.add(child);
    child.on('exit', () => children.delete(child));
    return new Promise((resolve, reject) => {
      child.stdout!.once('data', () => resolve(child));
      child.once('exit', (code) => reject(new Error(`worker exited early (${code})`)));
    });
  }

  it('delivers every event at least once and never attempts one delivery twice at once across 10 SIGKILLs', async () => {
    const caller = await ctx.newAgent();
    const paths = ['/kill/0', '/kill/1', '/kill/2'];
    const secrets = new Map<string, string>();
    for (const path of paths) {
      const { webhook, signing_secret } = await ctx.service.create(ctx.db, caller, { url: receiver.url(path), event_types: ['payment.executed'] });
      secrets.set(path, signing_secret);
      expect(webhook.enabled).to.equal(true);
    }
    const open = new Map<string, number>();
    let overlaps = 0;
    let badSignatures = 0;
    const received = new Map<string, number>();
    receiver.handle((req, res: ServerResponse) => {
      const key = `${req.path}|${req.headers['service-webhook-id']}`;
      if (!independentVerify(secrets.get(req.path) ?? '', req.headers['service-webhook-timestamp'] as string, req.rawBody, req.headers['service-webhook-signature'])) badSignatures++;
      if ((open.get(key) ?? 0) > 0) overlaps++;
      open.set(key, (open.get(key) ?? 0) + 1);
      received.set(key, (received.get(key) ?? 0) + 1);
      res.on('close', () => open.set(key, open.get(key)! - 1));
      setTimeout(() => {
        if (!res.destroyed) {
          res.writeHead(200);
          res.end('ok');
        }
      }, 150);
    });

    const events: string[] = [];
    for (let i = 0; i < 100; i++) events.push((await ctx.emit(caller)).id);

    const live = [await startWorker(), await startWorker()];
    let kills = 0;
    while (kills < 10) {
      await new Promise((r) => setTimeout(r, 250 + Math.floor(Math.random() * 250)));
      const victim = live.shift()!;
      victim.kill('SIGKILL');
      kills++;
      live.push(await startWorker());
    }
    const endpointIds = (await ctx.db('webhook_endpoints').where({ agent_id: caller.agentId }).select('id')).map((r) => r.id as string);
    await waitUntil(
      'all deliveries delivered',
      async () => {
        const row = await ctx.db('webhook_deliveries').whereIn('endpoint_id', endpointIds).whereNot({ status: 'delivered' }).count<{ n: number }[]>({ n: '*' }).first();
        return Number(row!.n) === 0;
      },
      60_000,
    );
    for (const child of live) child.kill('SIGTERM');
    await Promise.all(live.map((child) => new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)))));

    expect(kills).to.equal(10);
    for (const path of paths) for (const id of events) expect(received.get(`${path}|${id}`) ?? 0, `${path} ${id}`).to.be.at.least(1);
    expect(overlaps).to.equal(0);
    expect(badSignatures).to.equal(0);
    const rows = await ctx.db('webhook_deliveries').whereIn('endpoint_id', endpointIds);
    expect(rows).to.have.length(300);
    expect(rows.every((r) => r.status === 'delivered' && r.claim_token === null)).to.equal(true);
    const resent = [...received.values()].filter((n) => n > 1).length;
    // Kills landed mid-attempt: some deliveries were re-sent after their lease expired (at least once, not lost).
    expect(resent).to.be.at.least(1);
  });
});
