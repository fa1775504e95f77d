// Negative and security cases of the authorization server, the connect page and the bearer verifier.
import { expect } from 'chai';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from 'jose';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createBearerVerifier } from '../../src/auth/bearer.js';
import { oauthCommands } from '../../src/cli/oauth.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { ApiError } from '../../src/lib/errors.js';
import { sha256Hex } from '../../src/lib/crypto.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { authorizationUrl, authorizeThroughConnect, Browser, csrfOf, pkcePair, registerClient, startMailSink, tokenRequest, uniqueAddress, type MailSink } from './helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/cb';

describe('OAuth security', function () {
  this.timeout(30_000);
  let server: TestServer;
  let mail: MailSink;
  let clock: FakeClock;
  let email: string;
  let ownerId: string;
  let agentId: string;
  let clientId: string;
  let agentResource: string;
  let mcpResource: string;

  before(async () => {
    mail = await startMailSink();
    clock = createFakeClock(new Date());
    server = await startTestServer({ clock, env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    agentResource = `${server.baseUrl}/v1/agent`;
    mcpResource = `${server.baseUrl}/mcp`;
    email = `sec-${Date.now()}@example.com`;
    ownerId = (await server.services.agents.createOwner(server.db, { email })).owner_id;
    agentId = (await server.createAgent({ ownerId, name: 'security agent' })).agentId;
    const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], client_name: 'Security test app' });
    expect(reg.status, JSON.stringify(reg.body)).to.equal(201);
    clientId = reg.body.client_id as string;
  });

  // Most tests sign in as the same owner; the per-e-mail code throttle has its own test.
  beforeEach(async () => {
    await server
      .db('oauth_throttles')
      .where({ key: `code:${sha256Hex(email)}` })
      .delete();
  });

  after(async () => {
    await server?.close();
    await mail?.close();
  });

  function authParams(overrides: Record<string, string | undefined> = {}) {
    const { challenge } = pkcePair();
    return {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      scope: ALL_SCOPES.join(' '),
      resource: agentResource,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'st',
      ...overrides,
    };
  }

  /** Runs the whole consent flow and returns the code and its PKCE verifier. */
  async function obtainCode(opts: { resource?: string; scope?: string } = {}) {
    const { verifier, challenge } = pkcePair();
    const url = authorizationUrl(server.baseUrl, authParams({ code_challenge: challenge, resource: opts.resource ?? agentResource, ...(opts.scope ? { scope: opts.scope } : {}) }));
    const callback = await authorizeThroughConnect(new Browser(), url, mail, { email, agentId });
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');
    return { code: code!, verifier };
  }

  async function obtainTokens(resource = agentResource) {
    const { code, verifier } = await obtainCode({ resource });
    const res = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body as { access_token: string; refresh_token: string };
  }

  const self = (token: string) => server.request('GET', '/v1/agent/self', { headers: { authorization: `Bearer ${token}` } });

  async function authorizeError(params: Record<string, string | undefined>) {
    const res = await new Browser().fetch(authorizationUrl(server.baseUrl, params));
    expect(res.status, res.text).to.be.oneOf([302, 303]);
    const location = new URL(res.location!);
    expect(location.origin + location.pathname).to.equal(REDIRECT_URI);
    return location.searchParams;
  }

  describe('discovery', () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      it(`serves ${path} with the agent scopes and S256 only`, async () => {
        const res = await fetch(`${server.baseUrl}${path}`);
        expect(res.status).to.equal(200);
        const doc = (await res.json()) as Record<string, unknown>;
        expect(doc.issuer).to.equal(server.baseUrl);
        expect(doc.authorization_endpoint).to.equal(`${server.baseUrl}/oauth/auth`);
        expect(doc.token_endpoint).to.equal(`${server.baseUrl}/oauth/token`);
        expect(doc.registration_endpoint).to.equal(`${server.baseUrl}/oauth/reg`);
        expect(doc.revocation_endpoint).to.equal(`${server.baseUrl}/oauth/token/revocation`);
        expect(doc.jwks_uri).to.equal(`${server.baseUrl}/oauth/jwks`);
        expect(doc.code_challenge_methods_supported).to.deep.equal(['S256']);
        expect(doc.scopes_supported).to.include.members([...ALL_SCOPES]);
        expect(doc.authorization_response_iss_parameter_supported).to.equal(true);
      });
    }

    for (const [path, resource] of [
      ['/.well-known/oauth-protected-resource/v1/agent', '/v1/agent'],
      ['/.well-known/oauth-protected-resource/mcp', '/mcp'],
    ] as const) {
      it(`serves the RFC 9728 document ${path}`, async () => {
        const res = await fetch(`${server.baseUrl}${path}`);
        expect(res.status).to.equal(200);
        const doc = (await res.json()) as Record<string, unknown>;
        expect(doc.resource).to.equal(`${server.baseUrl}${resource}`);
        expect(doc.authorization_servers).to.deep.equal([server.baseUrl]);
        expect(doc.bearer_methods_supported).to.deep.equal(['header']);
        expect(doc.scopes_supported).to.deep.equal([...ALL_SCOPES]);
      });
    }
  });

  describe('registration', () => {
    it('defaults to authorization_code + refresh_token for a public client', async () => {
      const reg = await registerClient(server.baseUrl, { redirect_uris: ['https://app.example.com/cb'] });
      expect(reg.status).to.equal(201);
      expect(reg.body.grant_types).to.deep.equal(['authorization_code', 'refresh_token']);
      expect(reg.body.token_endpoint_auth_method).to.equal('none');
    });

    it('refuses redirect URIs that are neither https nor loopback', async () => {
      for (const uri of ['http://app.example.com/cb', 'myapp://cb', 'https://app.example.com/cb#frag']) {
        const reg = await registerClient(server.baseUrl, { redirect_uris: [uri] });
        expect(reg.status, uri).to.equal(400);
        expect(reg.body.error, uri).to.be.oneOf(['invalid_redirect_uri', 'invalid_client_metadata']);
      }
    });

    it('answers 429 to a registration flood from one address', async () => {
      const address = uniqueAddress();
      const statuses: number[] = [];
      for (let i = 0; i < 21; i += 1) statuses.push((await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI] }, address)).status);
      expect(
        statuses.slice(0, 20).every((s) => s === 201),
        statuses.join(','),
      ).to.equal(true);
      expect(statuses[20]).to.equal(429);
      // Another address is unaffected.
      expect((await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI] })).status).to.equal(201);
    });

    it('registers a client out of band with agentctl oauth client add', async () => {
      const add = oauthCommands.find((c) => c.name === 'oauth client add')!;
      const ctx = { db: server.db, services: server.services, config: server.config, clock };
      const out = await add.run(ctx, { positional: [], flags: { name: 'Partner', 'redirect-uri': REDIRECT_URI } });
      expect(out.client_id).to.be.a('string');
      const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ client_id: out.client_id as string })));
      expect(res.status).to.equal(303);
      expect(res.location).to.match(/\/connect\/[^/]+$/);
      await add.run(ctx, { positional: [], flags: { name: 'Bad', 'redirect-uri': 'http://evil.example/cb' } }).then(
        () => expect.fail('accepted an http redirect'),
        (err: Error) => expect(err.message).to.include('https'),
      );
    });
  });

  describe('authorization request', () => {
    it('refuses plain PKCE', async () => {
      const params = await authorizeError(authParams({ code_challenge_method: 'plain', code_challenge: 'a'.repeat(43) }));
      expect(params.get('error')).to.equal('invalid_request');
    });

    it('refuses a request without PKCE', async () => {
      const params = await authorizeError(authParams({ code_challenge: undefined, code_challenge_method: undefined }));
      expect(params.get('error')).to.equal('invalid_request');
    });

    it('refuses a missing resource', async () => {
      const params = await authorizeError(authParams({ resource: undefined }));
      expect(params.get('error')).to.equal('invalid_target');
    });

    it('refuses a foreign resource', async () => {
      const params = await authorizeError(authParams({ resource: 'https://evil.example/v1/agent' }));
      expect(params.get('error')).to.equal('invalid_target');
    });

    it('shows an error page and never redirects on a redirect URI mismatch', async () => {
      for (const uri of ['http://127.0.0.1:9/cb/', 'http://127.0.0.1:9/other', 'https://evil.example/cb']) {
        const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ redirect_uri: uri })));
        expect(res.status, uri).to.equal(400);
        expect(res.location, uri).to.equal(null);
        expect(res.text).to.include('redirect_uri');
      }
    });

    it('returns access_denied when the user denies', async () => {
      const callback = await authorizeThroughConnect(new Browser(), authorizationUrl(server.baseUrl, authParams()), mail, { email, agentId, deny: true });
      expect(callback.searchParams.get('error')).to.equal('access_denied');
      expect(callback.searchParams.get('code')).to.equal(null);
    });
  });

  describe('token endpoint', () => {
    it('refuses a resource switched at the token endpoint', async () => {
      const { code, verifier } = await obtainCode();
      const res = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: mcpResource });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_target');
    });

    it('refuses a wrong code_verifier', async () => {
      const { code } = await obtainCode();
      const res = await tokenRequest(server.baseUrl, {
        grant_type: 'authorization_code',
        code,
        code_verifier: pkcePair().verifier,
        redirect_uri: REDIRECT_URI,
        client_id: clientId,
        resource: agentResource,
      });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_grant');
    });

    it('revokes the grant when a code is used twice', async () => {
      const { code, verifier } = await obtainCode();
      const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: agentResource };
      const first = await tokenRequest(server.baseUrl, params);
      expect(first.status).to.equal(200);
      expect((await self(first.body.access_token as string)).status).to.equal(200);
      const second = await tokenRequest(server.baseUrl, params);
      expect(second.status).to.equal(400);
      expect(second.body.error).to.equal('invalid_grant');
      expect((await self(first.body.access_token as string)).status).to.equal(401);
      const refresh = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token as string, client_id: clientId, resource: agentResource });
      expect(refresh.body.error).to.equal('invalid_grant');
    });

    it('lets exactly one of ten parallel redemptions of a code succeed', async () => {
      const { code, verifier } = await obtainCode();
      const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: agentResource };
      const results = await Promise.all(Array.from({ length: 10 }, () => tokenRequest(server.baseUrl, params)));
      expect(results.filter((r) => r.status === 200)).to.have.length(1);
      expect(results.filter((r) => r.status === 400 && r.body.error === 'invalid_grant')).to.have.length(9);
    });

    it('refuses a refresh for another resource', async () => {
      const tokens = await obtainTokens();
      const res = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId, resource: mcpResource });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_target');
    });
  });

  describe('bearer tokens at /v1/agent', () => {
    it('refuses an expired access token', async () => {
      const tokens = await obtainTokens();
      expect((await self(tokens.access_token)).status).to.equal(200);
      const now = clock.now();
      const exp = decodeJwt(tokens.access_token).exp!;
      expect(exp - decodeJwt(tokens.access_token).iat!).to.equal(15 * 60);
      clock.set(new Date(exp * 1000 + 1000));
      try {
        const res = await self(tokens.access_token);
        expect(res.status).to.equal(401);
        expect(res.body.error.code).to.equal('invalid_token');
      } finally {
        clock.set(now);
      }
    });

    it('refuses alg none and a token signed by another key under our kid', async () => {
      const tokens = await obtainTokens();
      const header = decodeProtectedHeader(tokens.access_token);
      const claims = decodeJwt(tokens.access_token);
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      const none = `${b64({ alg: 'none', typ: 'at+jwt', kid: header.kid })}.${b64(claims)}.`;
      const noneRes = await self(none);
      expect(noneRes.status).to.equal(401);
      expect(noneRes.body.error.code).to.equal('invalid_token');

      const { privateKey } = await generateKeyPair('ES256');
      const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: header.kid! }).sign(privateKey);
      expect((await self(forged)).status).to.equal(401);

      // Tampered scope with the original signature.
      const [h, , s] = tokens.access_token.split('.');
      expect((await self(`${h}.${b64({ ...claims, scope: 'agent:read agent:payments:write' })}.${s}`)).status).to.equal(401);
    });

    it('refuses a /v1/agent token at /mcp and an /mcp token at /v1/agent', async () => {
      const verifier = createBearerVerifier({ config: server.config, db: server.db, clock });
      const agentToken = (await obtainTokens(agentResource)).access_token;
      const mcpToken = (await obtainTokens(mcpResource)).access_token;
      expect((await verifier.verify(agentToken, 'agent')).agentId).to.equal(agentId);
      expect((await verifier.verify(mcpToken, 'mcp')).agentId).to.equal(agentId);
      for (const [token, resource] of [
        [agentToken, 'mcp'],
        [mcpToken, 'agent'],
      ] as const) {
        const err = await verifier.verify(token, resource).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).to.be.instanceOf(ApiError);
        expect((err as ApiError).code).to.equal('invalid_token');
        expect((err as ApiError).headers['WWW-Authenticate']).to.include(`oauth-protected-resource/${resource === 'mcp' ? 'mcp' : 'v1/agent'}`);
      }
      const res = await self(mcpToken);
      expect(res.status).to.equal(401);
    });

    it('applies layer two: disabled agent, activation window, deleted owner', async () => {
      const tokens = await obtainTokens();
      await server.services.agents.setEnabled(server.db, agentId, false);
      try {
        const res = await self(tokens.access_token);
        expect(res.status).to.equal(401);
        expect(res.body.error.code).to.equal('agent_disabled');
      } finally {
        await server.services.agents.setEnabled(server.db, agentId, true);
      }
      const later = new Date(clock.now().getTime() + 3_600_000);
      await server.services.agents.setWindow(server.db, agentId, later, null);
      try {
        expect((await self(tokens.access_token)).body.error.code).to.equal('agent_not_yet_active');
      } finally {
        await server.services.agents.setWindow(server.db, agentId, null, null);
      }
      expect((await self(tokens.access_token)).status).to.equal(200);

      // A separate owner, so the shared owner of the other tests stays alive.
      const email2 = `gone-${Date.now()}@example.com`;
      const owner2 = (await server.services.agents.createOwner(server.db, { email: email2 })).owner_id;
      const agent2 = (await server.createAgent({ ownerId: owner2 })).agentId;
      const { verifier, challenge } = pkcePair();
      const callback = await authorizeThroughConnect(new Browser(), authorizationUrl(server.baseUrl, authParams({ code_challenge: challenge })), mail, { email: email2, agentId: agent2 });
      const t2 = await tokenRequest(server.baseUrl, {
        grant_type: 'authorization_code',
        code: callback.searchParams.get('code')!,
        code_verifier: verifier,
        redirect_uri: REDIRECT_URI,
        client_id: clientId,
        resource: agentResource,
      });
      expect((await self(t2.body.access_token as string)).status).to.equal(200);
      await server.services.agents.deleteOwner(server.db, owner2);
      const gone = await self(t2.body.access_token as string);
      expect(gone.status).to.equal(401);
      expect(gone.body.error.code).to.be.oneOf(['invalid_token', 'authentication_failed']);
    });

    it('keeps tokens of the previous key valid after agentctl oauth rotate-keys, and signs new ones with the new key', async () => {
      const before = await obtainTokens();
      const oldKid = decodeProtectedHeader(before.access_token).kid;
      const rotate = oauthCommands.find((c) => c.name === 'oauth rotate-keys')!;
      const out = await rotate.run({ db: server.db, services: server.services, config: server.config, clock }, { positional: [], flags: {} });
      expect(out.kid).to.be.a('string').and.not.equal(oldKid);
      await new Promise((r) => setTimeout(r, 1100)); // the provider notices a rotation within a second
      const after = await obtainTokens();
      expect(decodeProtectedHeader(after.access_token).kid).to.equal(out.kid);
      expect((await self(before.access_token)).status).to.equal(200);
      expect((await self(after.access_token)).status).to.equal(200);
      const jwks = (await (await fetch(`${server.baseUrl}/oauth/jwks`)).json()) as { keys: { kid: string; d?: string }[] };
      expect(jwks.keys.map((k) => k.kid)).to.include.members([oldKid!, out.kid as string]);
      expect(jwks.keys.every((k) => k.d === undefined)).to.equal(true);
    });

    it('revokes a grant with agentctl grants revoke and lists it with grants list', async () => {
      const tokens = await obtainTokens();
      const gid = decodeJwt(tokens.access_token).gid as string;
      const ctx = { db: server.db, services: server.services, config: server.config, clock };
      const list = await oauthCommands.find((c) => c.name === 'grants list')!.run(ctx, { positional: [], flags: { owner: ownerId } });
      expect((list.grants as { grant_id: string; status: string }[]).find((g) => g.grant_id === gid)?.status).to.equal('active');
      await oauthCommands.find((c) => c.name === 'grants revoke')!.run(ctx, { positional: [gid], flags: {} });
      expect((await self(tokens.access_token)).status).to.equal(401);
    });
  });

  describe('connect page', () => {
    async function openConnect(browser = new Browser()) {
      const start = await browser.fetch(authorizationUrl(server.baseUrl, authParams()));
      const page = await browser.fetch(start.location!);
      return { browser, url: start.location!, page, csrf: csrfOf(page.text) };
    }

    it('forbids framing and caching and shows the client, redirect host, resource and scopes', async () => {
      const { page } = await openConnect();
      expect(page.headers.get('content-security-policy')).to.include("frame-ancestors 'none'");
      expect(page.headers.get('x-frame-options')).to.equal('DENY');
      expect(page.headers.get('cache-control')).to.equal('no-store');
      expect(page.text).to.include('Security test app');
      expect(page.text).to.include('127.0.0.1:9');
      expect(page.text).to.include(agentResource);
      for (const scope of ALL_SCOPES) expect(page.text).to.include(scope);
    });

    it('refuses a POST without the CSRF token or without the interaction cookie', async () => {
      const { browser, url, csrf } = await openConnect();
      const noToken = await browser.fetch(url, { form: { action: 'email', email } });
      expect(noToken.status).to.equal(403);
      const otherBrowser = await new Browser().fetch(url, { form: { csrf, action: 'email', email } });
      expect(otherBrowser.status).to.equal(400);
    });

    it('answers an unknown e-mail exactly like a known one, and sends nothing', async () => {
      const unknown = `nobody-${Date.now()}@example.com`;
      const { browser, url, csrf } = await openConnect();
      const res = await browser.fetch(url, { form: { csrf, action: 'email', email: unknown } });
      expect(res.status).to.equal(200);
      expect(res.text).to.include(`If ${unknown} belongs to an account`);
      const wrong = await browser.fetch(url, { form: { csrf, action: 'code', code: '000000' } });
      expect(wrong.status).to.equal(400);
      await new Promise((r) => setTimeout(r, 200));
      expect(mail.received(unknown)).to.equal(0);
    });

    it('locks a code out after five wrong tries, even against the right code', async () => {
      const { browser, url, csrf } = await openConnect();
      await browser.fetch(url, { form: { csrf, action: 'email', email } });
      const code = await mail.nextCode(email);
      const wrong = code === '999999' ? '999998' : '999999';
      const statuses: number[] = [];
      for (let i = 0; i < 5; i += 1) statuses.push((await browser.fetch(url, { form: { csrf, action: 'code', code: wrong } })).status);
      expect(statuses).to.deep.equal([400, 400, 400, 400, 429]);
      const right = await browser.fetch(url, { form: { csrf, action: 'code', code } });
      expect(right.status).to.equal(429);
      expect(right.text).not.to.include('name="agent_id"');
      // A fresh code works again.
      await browser.fetch(url, { form: { csrf, action: 'email', email } });
      const fresh = await mail.nextCode(email);
      const ok = await browser.fetch(url, { form: { csrf, action: 'code', code: fresh } });
      expect(ok.status).to.equal(200);
      expect(ok.text).to.include('name="agent_id"');
    });

    it('expires a code after 10 minutes', async () => {
      const { browser, url, csrf } = await openConnect();
      await browser.fetch(url, { form: { csrf, action: 'email', email } });
      const code = await mail.nextCode(email);
      const now = clock.now();
      clock.advance(10 * 60 * 1000 + 1000);
      try {
        const res = await browser.fetch(url, { form: { csrf, action: 'code', code } });
        expect(res.status).to.equal(400);
        expect(res.text).to.include('expired');
      } finally {
        clock.set(now);
      }
    });

    it('throttles code requests to 10 per e-mail per 10 minutes', async () => {
      const busy = `busy-${Date.now()}@example.com`;
      const { browser, url, csrf } = await openConnect();
      const statuses: number[] = [];
      for (let i = 0; i < 11; i += 1) statuses.push((await browser.fetch(url, { form: { csrf, action: 'email', email: busy } })).status);
      expect(statuses.slice(0, 10).every((s) => s === 200)).to.equal(true);
      expect(statuses[10]).to.equal(429);
    });

    it('refuses an agent of another owner', async () => {
      const strangerOwner = (await server.services.agents.createOwner(server.db, { email: `stranger-${Date.now()}@example.com` })).owner_id;
      const stranger = (await server.createAgent({ ownerId: strangerOwner })).agentId;
      const { browser, url, csrf } = await openConnect();
      await browser.fetch(url, { form: { csrf, action: 'email', email } });
      await browser.fetch(url, { form: { csrf, action: 'code', code: await mail.nextCode(email) } });
      const res = await browser.fetch(url, { form: { csrf, action: 'approve', agent_id: stranger, scope: ['agent:read'] } });
      expect(res.status).to.equal(400);
      expect(res.location).to.equal(null);
    });
  });
});
