import { expect } from 'chai';
import type { Handler, HandlerMap } from '../../src/http/types.js';
import { appendEvent } from '../../src/db/repositories/event.repository.js';
import { ApiError } from '../../src/lib/errors.js';
import { newId } from '../../src/lib/ids.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

const RATE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-window-seconds'];

// A stand-in write handler: it records an event per execution (so executions can be counted)
// and answers a document-conforming write response. It exercises the generic machinery only.
let delayMs = 0;
let failNext = false;
const createPayment: Handler<'createPayment'> = async (c, ctx) => {
  if (failNext) {
    failNext = false;
    throw new Error('simulated crash');
  }
  if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
  const body = c.body;
  if (body.to === 'refuse') throw new ApiError('insufficient_funds', 'The wallet cannot cover this payment.');
  const event = await appendEvent(ctx.db, {
    type: 'payment.executed',
    agentId: ctx.principal.agentId,
    walletId: ctx.principal.walletId,
    operationId: newId(),
    resource: { type: 'payment', id: newId() },
    data: { probe: true },
    createdAt: ctx.clock.now(),
  });
  return {
    status: 200,
    body: { ok: true, operation_id: event.operation_id!, status: 'accepted', resource: event.resource, fee_usd: '0', human_message: 'Payment accepted.' },
  };
};

const paymentBody = { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1.5' };

describe('request pipeline', () => {
  let server: TestServer;
  let agent: TestAgent;
  // Wall time plus an offset the tests move forward (a wait for Retry-After is a jump, not a sleep).
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  before(async () => {
    server = await startTestServer({ clock, handlers: { createPayment } });
    agent = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'write', limit: 1000, burst: 1000, windowSeconds: 60 });
    await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'read', limit: 1000, burst: 1000, windowSeconds: 60 });
  });
  after(() => server.close());

  const executions = async (agentId: string) => Number((await server.db('events').where({ agent_id: agentId, type: 'payment.executed' }).count('* as n'))[0]!.n);

  describe('envelope and headers', () => {
    it('echoes a sane X-Request-Id and makes one up otherwise', async () => {
      const echoed = await server.request('GET', '/v1/agent/self', { agent, headers: { 'x-request-id': 'req-123' } });
      expect(echoed.headers.get('x-request-id')).to.equal('req-123');
      const made = await server.request('GET', '/v1/agent/self', { agent, headers: { 'x-request-id': 'bad id with spaces' } });
      expect(made.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    });

    it('carries rate-limit headers on success and on every error class after authentication', async () => {
      const cases: [string, string, number, Record<string, unknown>?][] = [
        ['GET', '/v1/agent/self', 200],
        ['GET', '/v1/agent/nope', 404],
        ['PUT', '/v1/agent/self', 405],
        ['GET', '/v1/agent/assets?limit=0', 400],
      ];
      for (const [method, path, status] of cases) {
        const res = await server.request(method, path, { agent });
        expect(res.status, `${method} ${path}: ${res.text}`).to.equal(status);
        for (const h of RATE_HEADERS) expect(res.headers.get(h), `${h} on ${status}`).to.be.a('string');
        expect(res.headers.get('x-request-id')).to.be.a('string');
        if (status >= 400) {
          expect(res.body.ok).to.equal(false);
          expect(res.body.error.code).to.be.a('string');
          expect(res.body.error.message).to.be.a('string');
        }
      }
      const reset = (await server.request('GET', '/v1/agent/self', { agent })).headers.get('x-ratelimit-reset')!;
      expect(new Date(reset).toISOString()).to.equal(reset);
    });

    it('answers 404 not_found, 405 method_not_allowed with the envelope', async () => {
      const notFound = await server.request('GET', '/v1/agent/does-not-exist', { agent });
      expect(notFound.body.error.code).to.equal('not_found');
      const wrongMethod = await server.request('DELETE', '/v1/agent/self', { agent });
      expect(wrongMethod.status).to.equal(405);
      expect(wrongMethod.body.error.code).to.equal('method_not_allowed');
    });

    it('answers 400 validation_failed listing each failing field', async () => {
      const res = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { asset: 'usdc', amount: 'ten', surprise: 1 } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      const errors = res.body.error.details.errors as { location: string; path: string }[];
      expect(errors.length).to.be.at.least(2);
      expect(errors.every((e) => e.location === 'body' && e.path.startsWith('/'))).to.equal(true);
    });

    it('answers 400 for malformed JSON and 413 for bodies over 64 KB', async () => {
      const malformed = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), rawBody: '{"to": ' });
      expect(malformed.status).to.equal(400);
      expect(malformed.body.error.code).to.equal('validation_failed');
      const big = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), rawBody: JSON.stringify({ ...paymentBody, note: 'x'.repeat(70 * 1024) }) });
      expect(big.status).to.equal(413);
      expect(big.body.error.code).to.equal('payload_too_large');
      for (const h of RATE_HEADERS) expect(big.headers.get(h)).to.be.a('string');
    });

    it('enforces limit bounds 1..100 on lists', async () => {
      for (const limit of ['0', '101', '-1', 'abc']) {
        const res = await server.request('GET', `/v1/agent/webhooks?limit=${limit}`, { agent });
        expect(res.status, `limit=${limit}`).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
      }
    });

    it('requires the Idempotency-Key header where the document says so, naming it', async () => {
      const res = await server.request('POST', '/v1/agent/payments', { agent, body: paymentBody });
      expect(res.status).to.equal(400);
      expect(JSON.stringify(res.body.error)).to.match(/idempotency-key/i);
      const blank = await server.request('POST', '/v1/agent/payments', { agent, body: paymentBody, idempotencyKey: '   ' });
      expect(blank.status).to.equal(400);
      const long = await server.request('POST', '/v1/agent/payments', { agent, body: paymentBody, idempotencyKey: 'k'.repeat(201) });
      expect(long.status).to.equal(400);
    });

    it('serves the bundled document publicly with an ETag and 304 on revalidation', async () => {
      const res = await server.request('GET', '/v1/agent/openapi.json');
      expect(res.status).to.equal(200);
      expect(res.body.openapi).to.match(/^3\.1/);
      expect(JSON.stringify(res.body)).not.to.include('"$ref":"../');
      const etag = res.headers.get('etag')!;
      expect(etag).to.match(/^".+"$/);
      const again = await server.request('GET', '/v1/agent/openapi.json', { headers: { 'if-none-match': etag } });
      expect(again.status).to.equal(304);
      for (const h of RATE_HEADERS) expect(res.headers.get(h)).to.be.a('string');
    });

    it('answers 501 not_implemented from one place for an operation without a handler', async () => {
      const partial = await startTestServer({ handlers: { listAssets: undefined } as unknown as Partial<HandlerMap> });
      try {
        const a = await partial.createAgent();
        const res = await partial.request('GET', '/v1/agent/assets', { agent: a });
        expect(res.status).to.equal(501);
        expect(res.body.error.code).to.equal('not_implemented');
        for (const h of RATE_HEADERS) expect(res.headers.get(h)).to.be.a('string');
        expect(partial.built.router.implemented.has('listAssets')).to.equal(false);
      } finally {
        await partial.close();
      }
    });

    it('has a handler for every /v1/agent operation of the document', () => {
      const missing = server.built.router.ops.filter((op) => op.path.startsWith('/v1/agent') && !server.built.router.implemented.has(op.operationId));
      expect(missing.map((op) => op.operationId)).to.deep.equal([]);
      // 67 + listEvents, getEvent, retryWebhookDelivery (event recovery), listWebhookDeliveryAttempts (issue 30).
      expect(server.built.router.ops.filter((op) => op.path.startsWith('/v1/agent')).length).to.equal(71);
    });

    it('has a handler for every /v1/owner and /v1/admin operation of the document', () => {
      const ownerSide = server.built.router.ops.filter((op) => /^\/v1\/(owner|admin)\//.test(op.path));
      expect(ownerSide.length).to.be.greaterThan(40);
      expect(ownerSide.filter((op) => !server.built.router.implemented.has(op.operationId)).map((op) => op.operationId)).to.deep.equal([]);
    });
  });

  describe('idempotency over HTTP', () => {
    it('replays the stored response with X-Idempotency-Replayed and executes once', async () => {
      const a = await server.createAgent();
      const key = newKey();
      const first = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody });
      const second = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody });
      expect(first.status).to.equal(200);
      expect(second.status).to.equal(200);
      expect(second.body).to.deep.equal(first.body);
      expect(second.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(first.headers.get('x-idempotency-replayed')).to.equal(null);
      for (const h of RATE_HEADERS) expect(second.headers.get(h)).to.be.a('string');
      expect(await executions(a.agentId)).to.equal(1);
    });

    it('refuses the same key with another body or on another route', async () => {
      const a = await server.createAgent();
      const key = newKey();
      await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody });
      const otherBody = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: { ...paymentBody, amount: '2' } });
      expect(otherBody.status).to.equal(409);
      expect(otherBody.body.error.code).to.equal('idempotency_key_reuse_mismatch');
      const otherRoute = await server.request('POST', '/v1/agent/one-off-payments', { agent: a, idempotencyKey: key, body: { to: paymentBody.to, asset: 'USDC', amount: '1.5' } });
      expect(otherRoute.status).to.equal(409);
      expect(otherRoute.body.error.code).to.equal('idempotency_key_reuse_mismatch');
    });

    it('answers idempotency_request_in_progress while the original runs, and executes once in a 50-way race', async () => {
      const a = await server.createAgent();
      await server.services.agents.setRateLimit(server.db, a.agentId, { class: 'write', limit: 1000, burst: 1000, windowSeconds: 60 });
      delayMs = 300;
      try {
        const key = newKey();
        const results = await Promise.all(Array.from({ length: 50 }, () => server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody })));
        const statuses = results.map((r) => r.status);
        expect(statuses.filter((s) => s === 200).length).to.be.at.least(1);
        expect(
          statuses.every((s) => s === 200 || s === 409),
          statuses.join(','),
        ).to.equal(true);
        const conflicts = results.filter((r) => r.status === 409);
        expect(conflicts.length).to.be.at.least(1);
        for (const r of conflicts) expect(r.body.error.code).to.equal('idempotency_request_in_progress');
        expect(await executions(a.agentId)).to.equal(1);
      } finally {
        delayMs = 0;
      }
    });

    it('stores a 4xx refusal and replays it; stores nothing for a 5xx', async () => {
      const a = await server.createAgent();
      const key = newKey();
      const refused = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: { ...paymentBody, to: 'refuse' } });
      expect(refused.status).to.equal(422);
      const replayed = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: { ...paymentBody, to: 'refuse' } });
      expect(replayed.status).to.equal(422);
      expect(replayed.headers.get('x-idempotency-replayed')).to.equal('true');

      const crashKey = newKey();
      failNext = true;
      const crashed = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: crashKey, body: paymentBody });
      expect(crashed.status).to.equal(500);
      expect(crashed.body.error.code).to.equal('internal_error');
      expect(crashed.body.error.message).not.to.include('simulated crash');
      const retried = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: crashKey, body: paymentBody });
      expect(retried.status).to.equal(200);
      expect(retried.headers.get('x-idempotency-replayed')).to.equal(null);
    });

    it('creates no record for a 429, so the same key succeeds after the wait', async () => {
      const a = await server.createAgent();
      // One token a minute: the wait is a jump of the clock, so a slow machine cannot refill the bucket mid-test.
      await server.services.agents.setRateLimit(server.db, a.agentId, { class: 'write', limit: 1, burst: 1, windowSeconds: 60 });
      await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: newKey(), body: paymentBody });
      const key = newKey();
      const limited = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody });
      expect(limited.status).to.equal(429);
      expect(await server.db('idempotency_keys').where({ agent_id: a.agentId, key }).first()).to.equal(undefined);
      offsetMs += Number(limited.headers.get('retry-after')) * 1000;
      const ok = await server.request('POST', '/v1/agent/payments', { agent: a, idempotencyKey: key, body: paymentBody });
      expect(ok.status).to.equal(200);
    });
  });

  describe('rate limits over HTTP', () => {
    it('answers exactly at the boundary with 429, Retry-After and details', async () => {
      const a = await server.createAgent();
      await server.services.agents.setRateLimit(server.db, a.agentId, { class: 'read', limit: 5, burst: 3, windowSeconds: 60 });
      const statuses = [];
      let last;
      for (let i = 0; i < 4; i++) {
        last = await server.request('GET', '/v1/agent/self', { agent: a });
        statuses.push(last.status);
      }
      expect(statuses).to.deep.equal([200, 200, 200, 429]);
      expect(last!.body.error.code).to.equal('rate_limited');
      expect(last!.body.error.details).to.deep.equal({ limit_count: 5, attempted_count: 4 });
      expect(Number(last!.headers.get('retry-after'))).to.be.at.least(1);
      expect(last!.headers.get('x-ratelimit-remaining')).to.equal('0');
      expect(last!.headers.get('x-ratelimit-limit')).to.equal('5');
    });

    it('shows live state per class at /self/usage', async () => {
      const a = await server.createAgent();
      await server.request('GET', '/v1/agent/self', { agent: a });
      const res = await server.request('GET', '/v1/agent/self/usage', { agent: a });
      expect(res.status).to.equal(200);
      expect(res.body.classes.read).to.include({ limit: 600, burst: 100, window_seconds: 60 });
      expect(res.body.classes.read.remaining).to.equal(98);
      expect(res.body.classes.write.remaining).to.equal(20);
      expect(Object.keys(res.body.classes)).to.have.members(['read', 'write', 'simulate', 'webhook_management', 'bulk_write']);
    });

    it('limits failed authentications per client address', async () => {
      const probe = await startTestServer();
      try {
        const bad = { 'x-agent-id': newId(), 'x-api-key': 'agk_wrong' };
        let last;
        for (let i = 0; i < 60; i++) {
          last = await probe.request('GET', '/v1/agent/self', { headers: bad });
          expect(last.status).to.equal(401);
        }
        for (const h of RATE_HEADERS) expect(last!.headers.get(h)).to.be.a('string');
        const limited = await probe.request('GET', '/v1/agent/self', { headers: bad });
        expect(limited.status).to.equal(429);
        expect(limited.body.error.code).to.equal('rate_limited');
        expect(Number(limited.headers.get('retry-after'))).to.be.at.least(1);
      } finally {
        await probe.close();
      }
    });
  });

  describe('response validation', () => {
    it('turns a response that breaks the document into a 500 in tests', async () => {
      const broken = await startTestServer({ handlers: { getSelf: async () => ({ status: 200, body: { ok: true, agent: { id: 42 } } }) as never } });
      try {
        const a = await broken.createAgent();
        const res = await broken.request('GET', '/v1/agent/self', { agent: a });
        expect(res.status).to.equal(500);
        expect(res.body.error.code).to.equal('internal_error');
        expect(res.body.error.details.response_validation).to.be.an('array').that.is.not.empty;
      } finally {
        await broken.close();
      }
    });
  });
});

describe('hostile request edges', () => {
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer();
    agent = await server.createAgent();
  });
  after(() => server.close());

  it('answers 400 validation_failed in the envelope for a malformed percent-escape, never a stack trace', async () => {
    for (const path of ['/v1/agent/operations/%E0%A4%A', '/v1/agent/%E0%A4%A']) {
      const res = await server.request('GET', path, { agent });
      expect(res.status, `${path}: ${res.text}`).to.be.oneOf([400, 404]);
      expect(res.body.ok).to.equal(false);
      expect(res.text).not.to.match(/URIError|at decode|<html/i);
    }
    const outside = await server.request('GET', '/oauth/%E0%A4%A');
    expect(outside.status).to.be.below(500);
    expect(outside.text).not.to.match(/URIError|at decode|<pre>/i);
  });

  it('answers 400 validation_failed for a body that cannot be inflated', async () => {
    const res = await server.request('POST', '/v1/agent/payments', {
      agent,
      idempotencyKey: newKey(),
      rawBody: 'not gzip',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('validation_failed');
  });

  it('refuses prototype keys and non-object bodies as unknown fields or wrong types', async () => {
    const proto = await server.request('POST', '/v1/agent/payments', {
      agent,
      idempotencyKey: newKey(),
      rawBody: '{"__proto__":{"polluted":1},"to":"0x1111111111111111111111111111111111111111","asset":"USDC","amount":"1"}',
    });
    expect(proto.status).to.equal(400);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    const array = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), rawBody: '[1,2]' });
    expect(array.status).to.equal(400);
  });
});
