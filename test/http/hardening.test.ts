// Edge hardening of /v1/agent (issue 10): NUL characters refused at the edge, over-long URLs enveloped.
import { expect } from 'chai';
import { createDemoAgent, newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

describe('input edge', () => {
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer({ env: { TRUST_PROXY: 'true' } });
    agent = await createDemoAgent(server, 1000);
  });
  after(() => server.close());

  const expectNulRefused = (res: Awaited<ReturnType<TestServer['request']>>, location: string, path: string) => {
    expect(res.status, res.text).to.equal(400);
    expect(res.body.error.code).to.equal('validation_failed');
    expect(res.body.error.details.errors).to.deep.include({ location, path, message: 'must not contain the NUL character (U+0000)' });
    expect(res.headers.get('x-request-id')).to.be.a('string');
    expect(res.headers.get('x-ratelimit-limit')).to.be.a('string');
  };

  describe('NUL characters', () => {
    it('answers 400 validation_failed naming the body field when a webhook description holds U+0000', async () => {
      const res = await server.request('POST', '/v1/agent/webhooks', {
        agent,
        idempotencyKey: newKey(),
        body: { url: 'https://example.com/hook', event_types: ['payment.executed'], description: 'a\u0000b' },
      });
      expectNulRefused(res, 'body', '/description');
    });

    it('answers 400 validation_failed naming the body field when a recipient to holds U+0000', async () => {
      const res = await server.request('POST', '/v1/agent/recipients/resolve', { agent, body: { to: 'a\u0000b' } });
      expectNulRefused(res, 'body', '/to');
    });

    it('names nested fields, array items and keys by JSON pointer when U+0000 is deep in the body', async () => {
      const res = await server.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { memo: ['ok', 'x\u0000'], 'k\u0000': 1 } } });
      expect(res.status, res.text).to.equal(400);
      const paths = res.body.error.details.errors.map((e: { path: string }) => e.path);
      expect(paths).to.include.members(['/body/memo/1', '/body/k\u0000']);
    });

    it('answers 400 validation_failed naming the query parameter when it holds U+0000', async () => {
      const res = await server.request('GET', '/v1/agent/activity?type=a%00b', { agent });
      expectNulRefused(res, 'query', 'type');
    });

    it('answers 400 validation_failed naming the path parameter when it holds U+0000', async () => {
      const res = await server.request('GET', '/v1/agent/webhooks/a%00b', { agent });
      expectNulRefused(res, 'path', 'id');
    });

    it('refuses U+0000 in the query of a public route too', async () => {
      const res = await server.request('GET', '/v1/agent/openapi.json?x=%00');
      expect(res.status, res.text).to.equal(400);
      expect(res.body.error.details.errors).to.deep.equal([{ location: 'query', path: 'x', message: 'must not contain the NUL character (U+0000)' }]);
    });
  });

  describe('NUL characters outside /v1/agent', () => {
    it('answers the OAuth error, not 500, when OAuth parameters hold U+0000', async () => {
      // Registrations are throttled per address (shared by every test server): use an address of our own.
      const address = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
      const register = await server.request('POST', '/oauth/reg', { body: { redirect_uris: ['https://example.com/cb'], client_name: 'a\u0000b' }, headers: { 'x-forwarded-for': address } });
      expect([register.status, register.body?.error], register.text).to.deep.equal([400, 'invalid_client_metadata']);
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      const token = await server.request('POST', '/oauth/token', { rawBody: 'grant_type=authorization_code&code=x&client_id=a%00b', headers: form });
      expect(token.status, token.text).to.be.within(400, 499);
      const revoke = await server.request('POST', '/oauth/token/revocation', { rawBody: 'token=t&client_id=a%00b', headers: form });
      expect(revoke.status, revoke.text).to.be.within(400, 499);
      const authorize = await server.request('GET', '/oauth/auth?client_id=a%00b&response_type=code');
      expect(authorize.status, authorize.text).to.be.within(400, 499);
    });
  });

  describe('over-long URLs and headers', () => {
    const emoji = '\u{1F600}'.repeat(3000);
    const expectEnvelope = (res: Awaited<ReturnType<TestServer['request']>>, status: number) => {
      expect(res.status, res.text).to.equal(status);
      expect(res.body.ok).to.equal(false);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.headers.get('x-request-id')).to.be.a('string').and.not.equal('');
    };

    it('answers 414 validation_failed in the envelope with X-Request-Id and rate-limit headers when the URL is over 8 KB', async () => {
      const res = await server.request('GET', `/v1/agent/self?q=${encodeURIComponent(emoji)}`, { agent });
      expectEnvelope(res, 414);
      expect(res.headers.get('x-ratelimit-limit')).to.be.a('string');
      expect(res.headers.get('x-ratelimit-remaining')).to.be.a('string');
    });

    it('answers 414 rather than 401 when a caller without credentials sends an over-long URL', async () => {
      const res = await server.request('GET', `/v1/agent/self?q=${encodeURIComponent(emoji)}`);
      expectEnvelope(res, 414);
    });

    it('answers 431 validation_failed with rate-limit headers when the headers are over 16 KB', async () => {
      const res = await server.request('GET', '/v1/agent/self', { agent, headers: { 'x-padding': 'a'.repeat(20_000) } });
      expectEnvelope(res, 431);
      expect(res.headers.get('x-ratelimit-limit')).to.be.a('string');
    });

    it('answers 431 in the envelope with X-Request-Id when the request head is over what the server parses', async () => {
      const res = await server.request('GET', `/v1/agent/self?q=${'a'.repeat(70_000)}`, { agent });
      expectEnvelope(res, 431);
    });
  });
});
