// Delivery through a real HTTPS receiver on loopback: fan-out, signatures, rotation, every outcome class, caps.
import { expect } from 'chai';
import { createServer } from 'node:net';
import { gzipSync } from 'node:zlib';
import { RETRY_HORIZON_MS } from '../../src/webhooks/backoff.js';
import { createWebhookTestContext, waitUntil, type WebhookTestContext } from './helpers/context.js';
import { createTestPki, startReceiver, type Receiver, type ReceivedRequest } from './helpers/receiver.js';
import { independentVerify, signaturesIn } from './helpers/verify.js';
import type { ServerResponse } from 'node:http';
import type { WebhookCaller } from '../../src/services/webhook.service.js';
import { testEnv } from '../setup.js';

describe('webhook delivery', function () {
  this.timeout(30_000);
  let ctx: WebhookTestContext;
  let receiver: Receiver;
  const routes = new Map<string, (req: ReceivedRequest, res: ServerResponse) => void>();

  before(async () => {
    const pki = await createTestPki();
    receiver = await startReceiver(pki);
    receiver.handle((req, res) => {
      const route = routes.get(req.path);
      if (route) return route(req, res);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    ctx = await createWebhookTestContext(pki.ca);
  });

  after(async () => {
    await receiver.close();
    await ctx.close();
  });

  const requestsTo = (path: string) => receiver.requests.filter((r) => r.path === path);

  async function endpoint(caller: WebhookCaller, path: string, eventTypes: string[] = ['payment.executed']) {
    return ctx.service.create(ctx.db, caller, { url: receiver.url(path), event_types: eventTypes });
  }

  describe('fan-out', () => {
    it('creates one delivery per subscribed enabled endpoint of the agent, in the event transaction', async () => {
      const caller = await ctx.newAgent();
      const other = await ctx.newAgent();
      const subscribed = await endpoint(caller, '/fan/a');
      const unsubscribed = await endpoint(caller, '/fan/b', ['conversion.executed']);
      const disabled = await endpoint(caller, '/fan/c');
      await ctx.service.update(ctx.db, caller, disabled.webhook.id, { enabled: false });
      const foreign = await endpoint(other, '/fan/d');
      const event = await ctx.emit(caller);
      expect((await ctx.deliveriesOf(subscribed.webhook.id)).map((d) => d.event_id)).to.deep.equal([event.id]);
      expect(await ctx.deliveriesOf(unsubscribed.webhook.id)).to.have.length(0);
      expect(await ctx.deliveriesOf(disabled.webhook.id)).to.have.length(0);
      expect(await ctx.deliveriesOf(foreign.webhook.id)).to.have.length(0);
      const [row] = await ctx.deliveriesOf(subscribed.webhook.id);
      expect(row!.status).to.equal('pending');
      expect(row!.attempt).to.equal(0);
      expect(row!.first_attempt_at).to.equal(null);
    });

    it('creates no delivery when the event transaction rolls back', async () => {
      const caller = await ctx.newAgent();
      const ep = await endpoint(caller, '/fan/rollback');
      await ctx.db
        .transaction(async (trx) => {
          const { appendEvent } = await import('../../src/db/repositories/event.repository.js');
          await appendEvent(trx, {
            type: 'payment.executed',
            agentId: caller.agentId,
            walletId: caller.walletId,
            operationId: null,
            resource: { type: 'operation', id: 'x' },
            data: {},
            createdAt: ctx.clock.now(),
          });
          throw new Error('rollback');
        })
        .catch(() => undefined);
      expect(await ctx.deliveriesOf(ep.webhook.id)).to.have.length(0);
    });

    it('sends webhook.test only to the tested endpoint, whatever its event types', async () => {
      const caller = await ctx.newAgent();
      const tested = await endpoint(caller, '/fan/test-a', ['conversion.executed']);
      const bystander = await endpoint(caller, '/fan/test-b', ['webhook.test']);
      const { event_id } = await ctx.service.sendTest(ctx.db, caller, tested.webhook.id);
      expect((await ctx.deliveriesOf(tested.webhook.id)).map((d) => d.event_id)).to.deep.equal([event_id]);
      expect(await ctx.deliveriesOf(bystander.webhook.id)).to.have.length(0);
      const event = await ctx.db('events').where({ id: event_id }).first();
      const envelope = JSON.parse(event.payload);
      expect(envelope).to.include({ type: 'webhook.test', operation_id: null, agent_id: caller.agentId, wallet_id: caller.walletId });
      expect(envelope.resource).to.deep.equal({ type: 'webhook_endpoint', id: tested.webhook.id });
      expect(envelope.data.webhook_id).to.equal(tested.webhook.id);
    });
  });

  describe('a delivered attempt', () => {
    it('sends the stored bytes with spec 6.5 headers and a signature an independent verifier accepts', async () => {
      const caller = await ctx.newAgent();
      const { webhook, signing_secret } = await endpoint(caller, '/ok/signed');
      const event = await ctx.emit(caller, 'payment.executed', { zeta: 1, alpha: 'é', nested: { b: 2, a: 1 } });
      expect(await ctx.worker().runOnce()).to.be.at.least(1);
      const [req] = requestsTo('/ok/signed');
      const stored = await ctx.db('events').where({ id: event.id }).first();
      expect(req!.rawBody.toString('utf8')).to.equal(stored.payload);
      expect(req!.method).to.equal('POST');
      expect(req!.headers['user-agent']).to.equal('Service-Webhooks/1.0');
      expect(req!.headers['content-type']).to.equal('application/json');
      expect(req!.headers['accept-encoding']).to.equal('identity');
      expect(req!.headers['service-webhook-id']).to.equal(event.id);
      const ts = req!.headers['service-webhook-timestamp'] as string;
      expect(ts).to.equal(String(Math.floor(ctx.clock.now().getTime() / 1000)));
      expect(signaturesIn(req!.headers['service-webhook-signature'])).to.have.length(1);
      expect(independentVerify(signing_secret, ts, req!.rawBody, req!.headers['service-webhook-signature'])).to.equal(true);

      const [row] = await ctx.deliveriesOf(webhook.id);
      expect(row).to.include({ status: 'delivered', attempt: 1, http_status: 200, error_class: null, response_body: 'ok', next_attempt_at: null });
      expect(row!.latency_ms).to.be.a('number').and.at.least(0);
      expect(row!.terminal_at).to.be.instanceOf(Date);
      expect(row!.claim_token).to.equal(null);
      const ep = await ctx.db('webhook_endpoints').where({ id: webhook.id }).first();
      expect(ep.last_delivered_at).to.be.instanceOf(Date);
      expect(ep.consecutive_failures).to.equal(0);
    });

    it('stores the signing secret sealed, never in plain text', async () => {
      const caller = await ctx.newAgent();
      const { webhook, signing_secret } = await endpoint(caller, '/ok/sealed');
      const row = await ctx.db('webhook_endpoints').where({ id: webhook.id }).first();
      const everyColumn = JSON.stringify(row);
      expect(everyColumn).not.to.include(signing_secret);
      expect(everyColumn).not.to.include(signing_secret.slice(6));
      expect(row.sealed_secret).to.match(/^v1\./);
    });

    it('signs with both secrets for 24 h after a rotation, then with the new one only', async () => {
      const caller = await ctx.newAgent();
      const { webhook, signing_secret: oldSecret } = await endpoint(caller, '/ok/rotate');
      const rotated = await ctx.service.rotateSecret(ctx.db, caller, webhook.id);
      expect(rotated.signing_secret).not.to.equal(oldSecret);
      await ctx.emit(caller);
      await ctx.worker().runOnce();
      const [during] = requestsTo('/ok/rotate');
      const ts = during!.headers['service-webhook-timestamp'] as string;
      const header = during!.headers['service-webhook-signature'] as string;
      expect(signaturesIn(header)).to.have.length(2);
      expect(independentVerify(rotated.signing_secret, ts, during!.rawBody, header.split(',')[0])).to.equal(true);
      expect(independentVerify(oldSecret, ts, during!.rawBody, header.split(',')[1])).to.equal(true);

      ctx.clock.advance(24 * 3600_000 + 1000);
      await ctx.emit(caller);
      await ctx.worker().runOnce();
      const after = requestsTo('/ok/rotate')[1]!;
      const afterHeader = after.headers['service-webhook-signature'] as string;
      expect(signaturesIn(afterHeader)).to.have.length(1);
      expect(independentVerify(rotated.signing_secret, after.headers['service-webhook-timestamp'] as string, after.rawBody, afterHeader)).to.equal(true);
      expect(independentVerify(oldSecret, after.headers['service-webhook-timestamp'] as string, after.rawBody, afterHeader)).to.equal(false);
    });
  });

  describe('outcome classes (spec 3.2)', () => {
    async function attemptOnce(path: string, answer: ((req: ReceivedRequest, res: ServerResponse) => void) | null, overrides = {}) {
      const caller = await ctx.newAgent();
      if (answer) routes.set(path, answer);
      const { webhook } = await endpoint(caller, path);
      await ctx.emit(caller);
      const before = ctx.clock.now();
      await ctx.worker(overrides).runOnce();
      const [row] = await ctx.deliveriesOf(webhook.id);
      return { row: row!, before, webhook };
    }
    const status =
      (code: number, headers: Record<string, string> = {}, body = 'nope') =>
      (_req: ReceivedRequest, res: ServerResponse) => {
        res.writeHead(code, headers);
        res.end(body);
      };

    it('retries a 500 after the first scheduled delay', async () => {
      const { row, before } = await attemptOnce('/c/500', status(500));
      expect(row).to.include({ status: 'retrying', http_status: 500, error_class: 'http_5xx', attempt: 1, response_body: 'nope', terminal_at: null });
      expect(row.next_attempt_at!.getTime() - before.getTime()).to.equal(10_000);
      expect(row.deadline_at!.getTime() - row.first_attempt_at!.getTime()).to.equal(RETRY_HORIZON_MS);
    });

    it('retries a 408', async () => {
      const { row } = await attemptOnce('/c/408', status(408));
      expect(row).to.include({ status: 'retrying', error_class: 'http_408' });
    });

    it('honours Retry-After on 429 and 503', async () => {
      const a = await attemptOnce('/c/429', status(429, { 'retry-after': '120' }));
      expect(a.row).to.include({ status: 'retrying', error_class: 'http_429', http_status: 429 });
      expect(a.row.next_attempt_at!.getTime() - a.before.getTime()).to.equal(120_000);
      const b = await attemptOnce('/c/503', status(503, { 'retry-after': new Date(ctx.clock.now().getTime() + 600_000).toUTCString() }));
      expect(b.row).to.include({ status: 'retrying', error_class: 'http_5xx' });
      expect(b.row.next_attempt_at!.getTime() - b.before.getTime()).to.equal(600_000);
    });

    it('caps a hostile Retry-After at one hour instead of the 72 h deadline', async () => {
      const { row, before } = await attemptOnce('/c/429-hostile', status(429, { 'retry-after': '999999999' }));
      expect(row).to.include({ status: 'retrying', error_class: 'http_429' });
      expect(row.next_attempt_at!.getTime() - before.getTime()).to.equal(3_600_000);
    });

    it('wakes the loop when a retry falls due rather than at the next poll', async function () {
      this.timeout(40_000);
      const caller = await ctx.newAgent();
      const arrivals: number[] = [];
      routes.set('/c/wake', (_req, res) => {
        arrivals.push(Date.now());
        res.writeHead(arrivals.length === 1 ? 503 : 200);
        res.end(arrivals.length === 1 ? 'busy' : 'ok');
      });
      await endpoint(caller, '/c/wake');
      await ctx.emit(caller);
      // The schedule's first delay is exactly 10 s here (random 0.5 = no jitter); the loop's idle
      // poll is a minute, so only waking at the due time delivers the retry in time.
      const offset = ctx.clock.now().getTime() - Date.now();
      const realTimeClock = { now: () => new Date(Date.now() + offset) };
      const controller = new AbortController();
      const running = ctx.worker({ clock: realTimeClock, idleMs: 60_000 }).loop.run(controller.signal);
      const deadline = Date.now() + 25_000;
      while (arrivals.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      controller.abort();
      await running;
      expect(arrivals, 'attempts received').to.have.length(2);
      expect(arrivals[1]! - arrivals[0]!).to.be.within(9_900, 13_000);
    });

    it('fails a 404 terminally', async () => {
      const { row } = await attemptOnce('/c/404', status(404));
      expect(row).to.include({ status: 'failed', error_class: 'http_4xx', http_status: 404, next_attempt_at: null });
      expect(row.terminal_at).to.be.instanceOf(Date);
    });

    it('fails a 3xx terminally and never fetches its Location', async () => {
      const { row } = await attemptOnce('/c/302', status(302, { location: receiver.url('/c/302-target') }));
      expect(row).to.include({ status: 'failed', error_class: 'http_3xx', http_status: 302 });
      expect(requestsTo('/c/302-target')).to.have.length(0);
    });

    it('fails a TLS certificate failure terminally', async () => {
      const { row } = await attemptOnce('/c/tls', null, { ca: undefined });
      expect(row).to.include({ status: 'failed', error_class: 'tls_error', http_status: null });
      expect(requestsTo('/c/tls')).to.have.length(0);
    });

    it('retries a refused connection', async () => {
      const caller = await ctx.newAgent();
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const port = (closed.address() as { port: number }).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const { webhook } = await ctx.service.create(ctx.db, caller, { url: `https://127.0.0.1:${port}/x`, event_types: ['payment.executed'] });
      await ctx.emit(caller);
      await ctx.worker().runOnce();
      const [row] = await ctx.deliveriesOf(webhook.id);
      expect(row).to.include({ status: 'retrying', error_class: 'connect_error', http_status: null });
    });

    it('gives up on a slow receiver at the attempt deadline and retries', async () => {
      const held: ServerResponse[] = [];
      const { row } = await attemptOnce('/c/slow', (_req, res) => void held.push(res), { attemptTimeoutMs: 300 });
      routes.delete('/c/slow');
      for (const res of held) res.destroy();
      expect(row).to.include({ status: 'retrying', error_class: 'timeout', http_status: null });
      expect(row.latency_ms).to.be.at.least(290);
    });

    it('times out a body trickled past the deadline even after 2xx headers', async () => {
      const held: ServerResponse[] = [];
      const { row } = await attemptOnce(
        '/c/trickle',
        (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('a');
          held.push(res);
        },
        { attemptTimeoutMs: 300 },
      );
      routes.delete('/c/trickle');
      for (const res of held) res.destroy();
      expect(row).to.include({ status: 'retrying', error_class: 'timeout', http_status: 200 });
    });

    it('reads at most 4 KB of the response', async () => {
      const { row } = await attemptOnce('/c/big', status(200, { 'content-type': 'text/plain' }, 'x'.repeat(1024 * 1024)));
      expect(row.status).to.equal('delivered');
      expect(row.response_body).to.equal('x'.repeat(4096));
    });

    it('does not inflate a gzip bomb', async () => {
      const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024));
      const { row } = await attemptOnce('/c/gzip', status(200, { 'content-encoding': 'gzip', 'content-type': 'application/json' }, bomb as unknown as string));
      expect(row.status).to.equal('delivered');
      expect(Buffer.byteLength(row.response_body!, 'utf8')).to.be.at.most(4096 * 3);
      expect(row.response_body!.length).to.be.at.most(4096);
      expect(row.response_body!).not.to.include('\u0000');
    });

    it('fails a payload over 256 KB terminally without sending it', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await endpoint(caller, '/c/huge');
      await ctx.emit(caller, 'payment.executed', { blob: 'y'.repeat(300 * 1024) });
      await ctx.worker().runOnce();
      const [row] = await ctx.deliveriesOf(webhook.id);
      expect(row).to.include({ status: 'failed', error_class: 'payload_too_large' });
      expect(requestsTo('/c/huge')).to.have.length(0);
    });

    it('refuses at delivery a name that was public at create and is private now (url_rejected)', async () => {
      const caller = await ctx.newAgent();
      ctx.dns['rebind.example.com'] = [{ address: '93.184.216.34', family: 4 }];
      const { webhook } = await ctx.service.create(ctx.db, caller, { url: `https://rebind.example.com:${receiver.port}/c/rebind`, event_types: ['payment.executed'] });
      ctx.dns['rebind.example.com'] = [{ address: '127.0.0.1', family: 4 }];
      await ctx.emit(caller);
      await ctx.worker().runOnce();
      const [row] = await ctx.deliveriesOf(webhook.id);
      expect(row).to.include({ status: 'failed', error_class: 'url_rejected', http_status: null });
      expect(requestsTo('/c/rebind')).to.have.length(0);
    });

    it('retries when the name stops resolving (dns_error)', async () => {
      const caller = await ctx.newAgent();
      ctx.dns['flaky.example.com'] = [{ address: '93.184.216.34', family: 4 }];
      const { webhook } = await ctx.service.create(ctx.db, caller, { url: 'https://flaky.example.com/x', event_types: ['payment.executed'] });
      delete ctx.dns['flaky.example.com'];
      await ctx.emit(caller);
      await ctx.worker().runOnce();
      const [row] = await ctx.deliveriesOf(webhook.id);
      expect(row).to.include({ status: 'retrying', error_class: 'dns_error' });
    });
  });

  describe('per-endpoint in-flight cap', () => {
    it('delivers to a healthy endpoint while a hanging one holds only its capped slots', async () => {
      const caller = await ctx.newAgent();
      const held: ServerResponse[] = [];
      routes.set('/cap/hang', (_req, res) => void held.push(res));
      const hanging = await endpoint(caller, '/cap/hang');
      const healthy = await endpoint(caller, '/cap/ok');
      for (let i = 0; i < 10; i++) await ctx.emit(caller);
      const worker = ctx.worker({ concurrency: 8, perEndpointInFlight: 2, attemptTimeoutMs: 10_000 });
      const controller = new AbortController();
      const running = worker.loop.run(controller.signal);
      try {
        await waitUntil('healthy deliveries', async () => (await ctx.deliveriesOf(healthy.webhook.id)).every((d) => d.status === 'delivered'));
        const hangingRows = await ctx.deliveriesOf(hanging.webhook.id);
        expect(hangingRows.filter((d) => d.status === 'in_flight')).to.have.length(2);
        expect(hangingRows.filter((d) => d.status === 'pending')).to.have.length(8);
        expect(requestsTo('/cap/hang')).to.have.length(2);
      } finally {
        controller.abort();
        routes.delete('/cap/hang');
        for (const res of held) res.destroy();
        await running;
      }
    });
  });

  describe('slow endpoints (no head-of-line blocking)', () => {
    /** Leaves only these endpoints' deliveries waiting, whatever earlier tests left behind. */
    const retireAllBut = (endpointIds: string[]) =>
      ctx.db('webhook_deliveries').whereNotIn('endpoint_id', endpointIds).whereIn('status', ['pending', 'retrying', 'in_flight']).update({ status: 'failed' });

    /** Runs the loop around `body`; then the hanging routes answer at once and what they held is cut off. */
    async function withLoop(overrides: Parameters<WebhookTestContext['worker']>[0], body: () => Promise<void>, held: ServerResponse[], hangingPaths: string[]) {
      const controller = new AbortController();
      const running = ctx.worker(overrides).loop.run(controller.signal);
      try {
        await body();
      } finally {
        controller.abort();
        for (const path of hangingPaths) routes.delete(path);
        for (const res of held) res.destroy();
        await running;
      }
    }

    it('delivers to another endpoint while slow endpoints hold every slot of the global cap', async () => {
      const caller = await ctx.newAgent();
      const held: ServerResponse[] = [];
      for (const path of ['/hol/slow-a', '/hol/slow-b']) routes.set(path, (_req, res) => void held.push(res));
      const slowA = await endpoint(caller, '/hol/slow-a');
      const slowB = await endpoint(caller, '/hol/slow-b');
      for (let i = 0; i < 3; i++) await ctx.emit(caller);
      ctx.clock.advance(1000); // the slow endpoints' deliveries come first in the claim
      const healthy = await endpoint(caller, '/hol/healthy');
      await ctx.emit(caller);
      await retireAllBut([slowA.webhook.id, slowB.webhook.id, healthy.webhook.id]);
      // Two slow endpoints x a cap of 2 fill the global cap of 4; only the slow lane frees it.
      await withLoop(
        { concurrency: 4, perEndpointInFlight: 2, slowAfterMs: 300, attemptTimeoutMs: 20_000 },
        async () => {
          await waitUntil('the healthy delivery', async () => (await ctx.deliveriesOf(healthy.webhook.id)).every((d) => d.status === 'delivered'), 5_000);
          expect(held).to.have.length(4);
          expect((await ctx.deliveriesOf(slowA.webhook.id)).filter((d) => d.status === 'in_flight')).to.have.length(2);
        },
        held,
        ['/hol/slow-a', '/hol/slow-b'],
      );
    });

    it('keeps a separate connection pool per endpoint, so requests hanging on one do not queue another on the same host', async () => {
      const caller = await ctx.newAgent();
      const held: ServerResponse[] = [];
      routes.set('/pool/hang', (_req, res) => void held.push(res));
      const hanging = await endpoint(caller, '/pool/hang');
      for (let i = 0; i < 34; i++) await ctx.emit(caller); // more than one pool's 32 sockets
      ctx.clock.advance(1000);
      const healthy = await endpoint(caller, '/pool/ok');
      await ctx.emit(caller);
      await retireAllBut([hanging.webhook.id, healthy.webhook.id]);
      await withLoop(
        { concurrency: 64, perEndpointInFlight: 40, attemptTimeoutMs: 20_000 },
        async () => {
          await waitUntil('the healthy delivery', async () => (await ctx.deliveriesOf(healthy.webhook.id)).every((d) => d.status === 'delivered'), 5_000);
          await waitUntil('32 hanging requests', async () => held.length >= 32, 5_000);
        },
        held,
        ['/pool/hang'],
      );
    });
  });

  describe('LISTEN/NOTIFY', () => {
    it('wakes the idle loop when an event is committed, long before the poll interval', async () => {
      const caller = await ctx.newAgent();
      const { webhook } = await endpoint(caller, '/notify');
      const controller = new AbortController();
      const running = ctx.worker({ databaseUrl: testEnv.databaseUrl, idleMs: 60_000 }).loop.run(controller.signal);
      try {
        await waitUntil('the LISTEN connection', async () => {
          const { rows } = await ctx.db.raw("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN webhook_deliveries'");
          return rows.length > 0;
        });
        await ctx.db('webhook_deliveries').whereIn('status', ['pending', 'retrying', 'in_flight']).update({ status: 'failed' });
        await ctx.emit(caller);
        await waitUntil('the first delivery', async () => (await ctx.deliveriesOf(webhook.id)).some((d) => d.status === 'delivered'));
        await new Promise((r) => setTimeout(r, 300)); // the loop is asleep now, for up to 60 s
        await ctx.emit(caller);
        await waitUntil('the second delivery', async () => (await ctx.deliveriesOf(webhook.id)).filter((d) => d.status === 'delivered').length === 2, 5_000);
      } finally {
        controller.abort();
        await running;
      }
    });
  });

  describe('72 hours of retryable failures', () => {
    it('exhausts through the worker loop, disables the endpoint, fails its waiting deliveries and tells the other endpoints', async () => {
      const caller = await ctx.newAgent();
      routes.set('/exhaust/fail', (_req, res) => {
        res.writeHead(500);
        res.end('down');
      });
      const failing = await endpoint(caller, '/exhaust/fail');
      const watcher = await endpoint(caller, '/exhaust/watch', ['agent.webhook_disabled']);
      const first = await ctx.emit(caller);
      const worker = ctx.worker();
      const controller = new AbortController();
      const running = worker.loop.run(controller.signal);
      const start = ctx.clock.now().getTime();
      let late: string | null = null;
      try {
        let advancedFor = 0;
        await waitUntil(
          'exhaustion',
          async () => {
            const row = await ctx.db('webhook_deliveries').where({ event_id: first.id, endpoint_id: failing.webhook.id }).first();
            if (row.status === 'failed') return true;
            if (row.status === 'retrying' && row.attempt > advancedFor) {
              advancedFor = row.attempt;
              if (!late && row.next_attempt_at.getTime() - start > 60 * 3600_000) {
                late = (await ctx.emit(caller)).id; // created ~60 h in: waiting when the endpoint is disabled
                await waitUntil('late delivery attempted', async () => (await ctx.db('webhook_deliveries').where({ event_id: late }).first())?.status === 'retrying');
              }
              ctx.clock.set(row.next_attempt_at);
            }
            return false;
          },
          20_000,
        );
        const exhausted = await ctx.db('webhook_deliveries').where({ event_id: first.id }).first();
        expect(exhausted).to.include({ status: 'failed', error_class: 'retries_exhausted', http_status: 500 });
        expect(exhausted.attempt).to.be.within(10, 14);
        expect(exhausted.last_attempt_at.getTime() - exhausted.first_attempt_at.getTime()).to.equal(RETRY_HORIZON_MS);
        expect(requestsTo('/exhaust/fail').length).to.be.at.least(exhausted.attempt);

        const ep = await ctx.db('webhook_endpoints').where({ id: failing.webhook.id }).first();
        expect(ep).to.include({ enabled: false, disabled_reason: 'sustained_failures' });
        expect(ep.consecutive_failures).to.be.at.least(exhausted.attempt);
        expect(ep.last_failure_at).to.be.instanceOf(Date);

        expect(late).to.be.a('string');
        // The late delivery may be mid-attempt when the endpoint is disabled; the worker then records it failed.
        const lateRow = await waitUntil('late delivery failed', async () => {
          const row = await ctx.db('webhook_deliveries').where({ event_id: late!, endpoint_id: failing.webhook.id }).first();
          return row?.status === 'failed' ? row : undefined;
        });
        expect(lateRow).to.include({ status: 'failed', error_class: 'endpoint_disabled' });

        const notice = await waitUntil('agent.webhook_disabled delivery', async () => requestsTo('/exhaust/watch').find((r) => JSON.parse(r.rawBody.toString()).type === 'agent.webhook_disabled'));
        const envelope = JSON.parse(notice.rawBody.toString());
        expect(envelope).to.include({ operation_id: null, agent_id: caller.agentId });
        expect(envelope.resource).to.deep.equal({ type: 'webhook_endpoint', id: failing.webhook.id });
        expect(envelope.data).to.include({ webhook_id: failing.webhook.id, disabled_reason: 'sustained_failures' });
        expect(await ctx.db('webhook_deliveries').where({ endpoint_id: failing.webhook.id, event_type: 'agent.webhook_disabled' })).to.have.length(0);
        expect(watcher.webhook.id).to.be.a('string');
      } finally {
        controller.abort();
        await running;
      }

      // The agent cannot undo it; the owner can.
      const refusals = await Promise.allSettled([ctx.service.update(ctx.db, caller, failing.webhook.id, { enabled: true }), ctx.service.rotateSecret(ctx.db, caller, failing.webhook.id)]);
      for (const r of refusals) {
        expect(r.status).to.equal('rejected');
        expect((r as PromiseRejectedResult).reason).to.include({ code: 'owner_only_action', status: 403 });
      }
      const described = await ctx.service.update(ctx.db, caller, failing.webhook.id, { description: 'still editable' });
      expect(described).to.include({ enabled: false, disabled_reason: 'sustained_failures', description: 'still editable' });
      const enabled = await ctx.service.enableByOwner(ctx.db, failing.webhook.id);
      expect(enabled).to.include({ enabled: true, disabled_reason: null, consecutive_failures: 0 });
      const rotated = await ctx.service.rotateSecret(ctx.db, caller, failing.webhook.id);
      expect(rotated.signing_secret).to.match(/^whsec_/);
    });
  });
});

describe('webhook delivery claims', () => {
  let ctx: WebhookTestContext;
  before(async () => {
    ctx = await createWebhookTestContext();
  });
  after(() => ctx.close());

  it('reclaims an expired lease and fences the stale holder out', async () => {
    const { completeClaimedDelivery } = await import('../../src/db/repositories/delivery.repository.js');
    const { recordAndClaimDeliveries } = await import('../../src/db/repositories/sql/claim-deliveries.js');
    const caller = await ctx.newAgent();
    const { webhook } = await ctx.service.create(ctx.db, caller, { url: 'https://hooks.example.com/lease', event_types: ['payment.executed'] });
    await ctx.emit(caller);
    // Leave only this endpoint's delivery due, whatever earlier tests left behind.
    await ctx.db('webhook_deliveries').whereNot({ endpoint_id: webhook.id }).whereIn('status', ['pending', 'retrying', 'in_flight']).update({ status: 'failed' });
    const claim = async (token: string) =>
      (await recordAndClaimDeliveries(ctx.db, { now: ctx.clock.now(), leaseUntil: new Date(ctx.clock.now().getTime() + 30_000), token, batch: 10, perEndpointCap: 4, deadlineMs: RETRY_HORIZON_MS }))
        .claimed;
    const first = await claim('00000000-0000-4000-8000-00000000000a');
    expect(first.map((d) => d.endpoint_id)).to.deep.equal([webhook.id]);
    expect(await claim('00000000-0000-4000-8000-00000000000b')).to.have.length(0); // leased
    ctx.clock.advance(30_001);
    const second = await claim('00000000-0000-4000-8000-00000000000c');
    expect(second.map((d) => d.id)).to.deep.equal([first[0]!.id]);
    expect(second[0]!.attempt).to.equal(2);
    const stale = await completeClaimedDelivery(ctx.db, first[0]!.id, '00000000-0000-4000-8000-00000000000a', { status: 'delivered', updated_at: ctx.clock.now() });
    expect(stale).to.equal(undefined);
    const current = await completeClaimedDelivery(ctx.db, first[0]!.id, '00000000-0000-4000-8000-00000000000c', { status: 'delivered', updated_at: ctx.clock.now() });
    expect(current!.status).to.equal('delivered');
  });

  it('holds the per-endpoint cap across concurrent claimers and frees the slots of the attempts a claim records', async () => {
    const { recordAndClaimDeliveries } = await import('../../src/db/repositories/sql/claim-deliveries.js');
    const caller = await ctx.newAgent();
    const { webhook } = await ctx.service.create(ctx.db, caller, { url: 'https://hooks.example.com/cap', event_types: ['payment.executed'] });
    for (let i = 0; i < 12; i++) await ctx.emit(caller);
    await ctx.db('webhook_deliveries').whereNot({ endpoint_id: webhook.id }).whereIn('status', ['pending', 'retrying', 'in_flight']).update({ status: 'failed' });
    const options = (token: string) => ({ now: ctx.clock.now(), leaseUntil: new Date(ctx.clock.now().getTime() + 30_000), token, batch: 10, perEndpointCap: 4, deadlineMs: RETRY_HORIZON_MS });
    const tokens = Array.from({ length: 6 }, (_, i) => `00000000-0000-4000-8000-00000000010${i}`);
    // The six queue on the claim lock held here, then run back to back as it is released: a claim
    // counting slots from a snapshot taken before it got the lock would overshoot.
    const holder = await ctx.db.transaction();
    await holder.raw('SELECT pg_advisory_xact_lock(7411003)');
    const claims = tokens.map(async (token) => (await recordAndClaimDeliveries(ctx.db, options(token))).claimed);
    await new Promise((r) => setTimeout(r, 200));
    await holder.commit();
    const concurrent = await Promise.all(claims);
    const held = concurrent.flat();
    expect(held).to.have.length(4); // six claimers at once, four slots
    const delivered = held.map((d) => ({ id: d.id, token: d.claim_token!, httpStatus: 200, latencyMs: 3, responseBody: 'ok' }));
    // One stale attempt (a token that does not hold it) is fenced out and frees nothing.
    delivered[0] = { ...delivered[0]!, token: '00000000-0000-4000-8000-0000000001ff' };
    const next = await recordAndClaimDeliveries(ctx.db, options('00000000-0000-4000-8000-000000000110'), { attempts: delivered, at: ctx.clock.now() });
    expect(next.recorded.sort()).to.deep.equal(
      held
        .slice(1)
        .map((d) => d.id)
        .sort(),
    );
    expect(next.claimed).to.have.length(3);
    expect(next.claimed.every((d) => d.payload.length > 0 && d.endpoint.url === 'https://hooks.example.com/cap')).to.equal(true);
    const counts = await ctx.db('webhook_deliveries').where({ endpoint_id: webhook.id }).select('status').count<{ status: string; count: string }[]>('* as count').groupBy('status');
    expect(Object.fromEntries(counts.map((c) => [c.status, Number(c.count)]))).to.deep.equal({ delivered: 3, in_flight: 4, pending: 5 });
  });
});
