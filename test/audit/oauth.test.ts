// Audit of OAuth 2.0 and MCP against the negative-test checklist (research/oauth-mcp.md §5) not already covered in test/oauth and test/mcp.
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { decodeJwt, importJWK, SignJWT, type JWTPayload } from 'jose';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createFakeClock, type FakeClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { sha256Hex } from '../../src/lib/crypto.js';
import { loadSigningKeys } from '../../src/oauth/keys.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { postMcp, toolCall } from '../mcp/helpers.js';
import { authorizationUrl, authorizeThroughConnect, Browser, csrfOf, pkcePair, registerClient, startMailSink, tokenRequest, type MailSink } from '../oauth/helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/cb';

describe('audit: OAuth and MCP negative checklist', function () {
  this.timeout(60_000);
  let server: TestServer;
  let mail: MailSink;
  let clock: FakeClock;
  let email: string;
  let agentId: string;
  let clientId: string;
  let otherClientId: string;
  let agentResource: string;
  let mcpResource: string;

  before(async () => {
    mail = await startMailSink();
    clock = createFakeClock(new Date());
    server = await startTestServer({ clock, env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    agentResource = `${server.baseUrl}/v1/agent`;
    mcpResource = `${server.baseUrl}/mcp`;
    email = `audit-${Date.now()}@example.com`;
    const ownerId = (await server.services.agents.createOwner(server.db, { email })).owner_id;
    agentId = (await server.createAgent({ ownerId, name: 'audit agent' })).agentId;
    const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], client_name: 'Audit app' });
    expect(reg.status, JSON.stringify(reg.body)).to.equal(201);
    clientId = reg.body.client_id as string;
    const other = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], client_name: 'Other app' });
    otherClientId = other.body.client_id as string;
  });

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

  async function obtainCode(opts: { resource?: string; scope?: string; client?: string; state?: string; browser?: Browser } = {}) {
    const { verifier, challenge } = pkcePair();
    const url = authorizationUrl(
      server.baseUrl,
      authParams({
        code_challenge: challenge,
        resource: opts.resource ?? agentResource,
        client_id: opts.client ?? clientId,
        ...(opts.scope ? { scope: opts.scope } : {}),
        ...(opts.state ? { state: opts.state } : {}),
      }),
    );
    const callback = await authorizeThroughConnect(opts.browser ?? new Browser(), url, mail, { email, agentId });
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');
    return { code: code!, verifier, callback };
  }

  async function obtainTokens(opts: { resource?: string; client?: string; scope?: string } = {}) {
    const resource = opts.resource ?? agentResource;
    const client = opts.client ?? clientId;
    const { code, verifier } = await obtainCode({ resource, client, scope: opts.scope });
    const res = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: client, resource });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body as { access_token: string; refresh_token: string; id_token?: string };
  }

  const self = (token: string) => server.request('GET', '/v1/agent/self', { headers: { authorization: `Bearer ${token}` } });

  /** Re-signs claims with the server's own current key, so only the claim or header under test is wrong. */
  async function signWithOurKey(claims: JWTPayload, header: Record<string, unknown> = {}) {
    const [key] = await loadSigningKeys(server.db, createSealer(server.config.masterKey), server.clock);
    const privateKey = await importJWK(key!.privateJwk, key!.alg);
    return new SignJWT(claims).setProtectedHeader({ alg: key!.alg, typ: 'at+jwt', kid: key!.kid, ...header }).sign(privateKey);
  }

  describe('authorization request', () => {
    it('refuses a challenge without a method, and challenges that are too short, too long or use illegal characters', async () => {
      for (const overrides of [{ code_challenge_method: undefined }, { code_challenge: 'a'.repeat(42) }, { code_challenge: 'a'.repeat(129) }, { code_challenge: `${'a'.repeat(42)}!` }]) {
        const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams(overrides)));
        expect(res.status, JSON.stringify(overrides)).to.be.oneOf([302, 303]);
        const location = new URL(res.location!);
        expect(location.origin + location.pathname, JSON.stringify(overrides)).to.equal(REDIRECT_URI);
        expect(location.searchParams.get('error'), JSON.stringify(overrides)).to.equal('invalid_request');
      }
    });

    it('refuses a relative resource, one with a fragment and two resources', async () => {
      for (const resource of ['/v1/agent', `${agentResource}#frag`, `${agentResource}/`]) {
        const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ resource })));
        expect(res.status, resource).to.be.oneOf([302, 303]);
        const location = new URL(res.location!);
        expect(location.origin + location.pathname).to.equal(REDIRECT_URI);
        expect(location.searchParams.get('error'), resource).to.be.oneOf(['invalid_target', 'invalid_request']);
      }
      const url = `${authorizationUrl(server.baseUrl, authParams())}&resource=${encodeURIComponent(mcpResource)}`;
      const browser = new Browser();
      let res = await browser.fetch(url);
      for (let hops = 0; hops < 4 && res.location && !res.location.startsWith(REDIRECT_URI); hops += 1) res = await browser.fetch(res.location);
      expect(res.location, res.text).to.be.a('string');
      expect(new URL(res.location!).searchParams.get('error')).to.be.oneOf(['invalid_target', 'invalid_request']);
      expect(new URL(res.location!).searchParams.get('code')).to.equal(null);
    });

    it('never redirects for a redirect URI that differs by query, fragment, case, scheme, port or userinfo', async () => {
      for (const uri of [
        'http://127.0.0.1:9/cb?x=1',
        'http://127.0.0.1:9/cb#f',
        'http://127.0.0.1:9/CB',
        'https://127.0.0.1:9/cb',
        'http://127.0.0.1:10/cb',
        'http://localhost:9/cb',
        'http://u@127.0.0.1:9/cb',
        'javascript:alert(1)',
      ]) {
        const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ redirect_uri: uri })));
        expect(res.status, uri).to.equal(400);
        expect(res.location, uri).to.equal(null);
      }
    });

    it('never redirects for an unknown client, and escapes reflected parameters on the error page', async () => {
      const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ client_id: '<script>alert(1)</script>', redirect_uri: 'https://evil.example/cb' })));
      expect(res.status).to.equal(400);
      expect(res.location).to.equal(null);
      expect(res.text).not.to.include('<script>');
      expect(res.headers.get('x-frame-options')).to.equal('DENY');
    });

    it('echoes state exactly on success and on error', async () => {
      const state = 'a b+c/d=e&f%g~é';
      const { callback } = await obtainCode({ state });
      expect(callback.searchParams.get('state')).to.equal(state);
      const res = await new Browser().fetch(authorizationUrl(server.baseUrl, authParams({ state, code_challenge_method: 'plain' })));
      expect(new URL(res.location!).searchParams.get('state')).to.equal(state);
    });

    it('answers prompt=none with an error, never a code, even inside an existing browser session', async () => {
      const browser = new Browser();
      await obtainCode({ browser });
      const res = await browser.fetch(authorizationUrl(server.baseUrl, authParams({ prompt: 'none' })));
      let location = res.location;
      for (let hops = 0; hops < 4 && location && !location.startsWith(REDIRECT_URI); hops += 1) location = (await browser.fetch(location)).location;
      expect(location).to.be.a('string');
      const params = new URL(location!).searchParams;
      expect(params.get('code')).to.equal(null);
      expect(params.get('error')).to.be.oneOf(['login_required', 'consent_required', 'interaction_required']);
    });
  });

  describe('connect page', () => {
    it('escapes a hostile client_name', async () => {
      const reg = await registerClient(server.baseUrl, { redirect_uris: ['https://app.example.com/cb'], client_name: '<img src=x onerror=alert(1)>"\'' });
      expect(reg.status).to.equal(201);
      const browser = new Browser();
      const start = await browser.fetch(authorizationUrl(server.baseUrl, authParams({ client_id: reg.body.client_id as string, redirect_uri: 'https://app.example.com/cb' })));
      const page = await browser.fetch(start.location!);
      expect(page.status).to.equal(200);
      expect(page.text).not.to.include('<img');
      expect(page.text).to.include('&#60;img');
      expect(page.text).to.include('app.example.com');
    });

    it('is dead once the authorization completed: no second code from a replayed approval', async () => {
      const browser = new Browser();
      const start = await browser.fetch(authorizationUrl(server.baseUrl, authParams()));
      const connectUrl = start.location!;
      const first = await browser.fetch(connectUrl);
      const csrf = csrfOf(first.text);
      await browser.fetch(connectUrl, { form: { csrf, action: 'email', email } });
      await browser.fetch(connectUrl, { form: { csrf, action: 'code', code: await mail.nextCode(email) } });
      const approved = await browser.fetch(connectUrl, { form: { csrf, action: 'approve', agent_id: agentId, scope: ['agent:read'] } });
      expect(approved.status).to.equal(303);
      let location = approved.location!;
      for (let hops = 0; hops < 4 && !location.startsWith(REDIRECT_URI); hops += 1) location = (await browser.fetch(location)).location!;
      expect(new URL(location).searchParams.get('code')).to.be.a('string');

      const again = await browser.fetch(connectUrl);
      expect(again.status).to.equal(400);
      const replay = await browser.fetch(connectUrl, { form: { csrf, action: 'approve', agent_id: agentId, scope: ['agent:read'] } });
      expect(replay.status).to.equal(400);
      expect(replay.location).to.equal(null);
    });

    it('ignores scopes the client did not request when the approval form adds them', async () => {
      const browser = new Browser();
      const start = await browser.fetch(authorizationUrl(server.baseUrl, authParams({ scope: 'agent:read' })));
      const connectUrl = start.location!;
      const csrf = csrfOf((await browser.fetch(connectUrl)).text);
      await browser.fetch(connectUrl, { form: { csrf, action: 'email', email } });
      await browser.fetch(connectUrl, { form: { csrf, action: 'code', code: await mail.nextCode(email) } });
      const approved = await browser.fetch(connectUrl, { form: { csrf, action: 'approve', agent_id: agentId, scope: ['agent:read', 'agent:payments:write'] } });
      let location = approved.location!;
      for (let hops = 0; hops < 4 && !location.startsWith(REDIRECT_URI); hops += 1) location = (await browser.fetch(location)).location!;
      const code = new URL(location).searchParams.get('code');
      expect(code).to.be.a('string');
    });
  });

  describe('token endpoint', () => {
    it('refuses a redirect_uri at the token endpoint that differs from the authorization request', async () => {
      const { code, verifier } = await obtainCode();
      const res = await tokenRequest(server.baseUrl, {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        redirect_uri: 'http://127.0.0.1:9/cb2',
        client_id: clientId,
        resource: agentResource,
      });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.be.oneOf(['invalid_grant', 'invalid_request']);
    });

    it("refuses client A's code redeemed by client B", async () => {
      const { code, verifier } = await obtainCode();
      const res = await tokenRequest(server.baseUrl, {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        redirect_uri: REDIRECT_URI,
        client_id: otherClientId,
        resource: agentResource,
      });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_grant');
    });

    it('refuses a code_verifier that is too short or uses illegal characters', async () => {
      for (const verifier of ['a'.repeat(42), `${'a'.repeat(42)}!`]) {
        const { code } = await obtainCode();
        const res = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: agentResource });
        expect(res.status, verifier).to.equal(400);
        expect(res.body.error, verifier).to.be.oneOf(['invalid_grant', 'invalid_request']);
      }
    });

    it('refuses two resources at the token endpoint', async () => {
      const { code, verifier } = await obtainCode();
      const body = new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: agentResource });
      body.append('resource', mcpResource);
      const res = await fetch(`${server.baseUrl}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body.toString() });
      expect(res.status).to.equal(400);
      expect(((await res.json()) as { error: string }).error).to.be.oneOf(['invalid_target', 'invalid_request']);
    });

    it("refuses client A's refresh token presented by client B", async () => {
      const tokens = await obtainTokens();
      const res = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: otherClientId, resource: agentResource });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_grant');
    });

    it('refuses an authorization code older than 60 seconds', async () => {
      const { code, verifier } = await obtainCode();
      const now = clock.now();
      clock.advance(61_000);
      try {
        const res = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: clientId, resource: agentResource });
        expect(res.status).to.equal(400);
        expect(res.body.error).to.equal('invalid_grant');
      } finally {
        clock.set(now);
      }
    });

    it('lets a refresh token idle for more than 30 days expire, and rotation restarts the 30 days', async () => {
      const tokens = await obtainTokens();
      const now = clock.now();
      try {
        clock.advance(29 * 86_400_000);
        const first = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId, resource: agentResource });
        expect(first.status, JSON.stringify(first.body)).to.equal(200);
        clock.advance(29 * 86_400_000);
        const second = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token as string, client_id: clientId, resource: agentResource });
        expect(second.status, JSON.stringify(second.body)).to.equal(200);
        clock.advance(31 * 86_400_000);
        const idle = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: second.body.refresh_token as string, client_id: clientId, resource: agentResource });
        expect(idle.status).to.equal(400);
        expect(idle.body.error).to.equal('invalid_grant');
      } finally {
        clock.set(now);
      }
    });

    it('ignores client B revoking client A’s refresh token', async () => {
      const tokens = await obtainTokens();
      const res = await fetch(`${server.baseUrl}/oauth/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: tokens.refresh_token, client_id: otherClientId }).toString(),
      });
      expect(res.status).to.be.oneOf([200, 400]);
      expect((await self(tokens.access_token)).status).to.equal(200);
      const refresh = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId, resource: agentResource });
      expect(refresh.status).to.equal(200);
    });

    it('revokes the grant when a client revokes its own access token', async () => {
      const tokens = await obtainTokens();
      expect((await self(tokens.access_token)).status).to.equal(200);
      const res = await fetch(`${server.baseUrl}/oauth/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: tokens.access_token, token_type_hint: 'access_token', client_id: clientId }).toString(),
      });
      expect(res.status, await res.text()).to.equal(200);
      expect((await self(tokens.access_token)).status).to.equal(401);
      const refresh = await tokenRequest(server.baseUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId, resource: agentResource });
      expect(refresh.body.error).to.equal('invalid_grant');
    });

    it('does not let client B revoke client A’s access token', async () => {
      const tokens = await obtainTokens();
      const res = await fetch(`${server.baseUrl}/oauth/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: tokens.access_token, client_id: otherClientId }).toString(),
      });
      expect(res.status).to.be.oneOf([200, 400]);
      expect((await self(tokens.access_token)).status).to.equal(200);
    });
  });

  describe('registration', () => {
    it('refuses javascript:, data:, file: and non-loopback http redirect URIs', async () => {
      for (const uri of ['javascript:alert(1)', 'data:text/html,hi', 'file:///etc/passwd', 'http://127.0.0.1.evil.example/cb', 'http://localhost.evil.example/cb']) {
        const reg = await registerClient(server.baseUrl, { redirect_uris: [uri] });
        expect(reg.status, uri).to.equal(400);
      }
    });

    it('refuses grant and response types outside authorization_code + refresh_token', async () => {
      for (const metadata of [
        { grant_types: ['client_credentials'] },
        { grant_types: ['implicit'], response_types: ['token'] },
        { grant_types: ['password'] },
        { response_types: ['code id_token'] },
      ]) {
        const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], ...metadata });
        expect(reg.status, JSON.stringify(metadata)).to.equal(400);
      }
    });

    it('refuses client authentication that would make the server fetch a client URL (private_key_jwt with jwks_uri)', async () => {
      const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'http://169.254.169.254/latest/meta-data/' });
      expect(reg.status, JSON.stringify(reg.body)).to.equal(400);
    });

    it('refuses metadata that would make the server fetch a client URL, and never fetches it', async () => {
      let hits = 0;
      const sink = createServer((_req, res) => {
        hits += 1;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify([REDIRECT_URI]));
      });
      await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/x`;
      try {
        for (const metadata of [{ sector_identifier_uri: url, subject_type: 'pairwise' }, { sector_identifier_uri: url }, { jwks_uri: url }]) {
          const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], ...metadata });
          expect(reg.status, JSON.stringify(metadata)).to.equal(400);
        }
        expect(hits).to.equal(0);
      } finally {
        await new Promise<void>((resolve) => sink.close(() => resolve()));
      }
      const doc = (await (await fetch(`${server.baseUrl}/.well-known/oauth-authorization-server`)).json()) as { token_endpoint_auth_methods_supported: string[] };
      expect(doc.token_endpoint_auth_methods_supported).to.have.members(['none', 'client_secret_basic', 'client_secret_post']);
    });

    it('refuses oversized metadata', async () => {
      const reg = await registerClient(server.baseUrl, { redirect_uris: [REDIRECT_URI], client_name: 'x'.repeat(5000) });
      expect(reg.status).to.equal(400);
      const many = await registerClient(server.baseUrl, { redirect_uris: Array.from({ length: 11 }, (_, i) => `https://app.example.com/cb${i}`) });
      expect(many.status).to.equal(400);
    });
  });

  describe('bearer tokens', () => {
    it('refuses a token whose typ is not at+jwt, and an ID token', async () => {
      const tokens = await obtainTokens({ scope: `openid ${ALL_SCOPES.join(' ')}` });
      const claims = decodeJwt(tokens.access_token);
      expect((await self(await signWithOurKey(claims))).status).to.equal(200);
      for (const typ of ['JWT', 'jwt', undefined]) {
        const res = await self(await signWithOurKey(claims, { typ }));
        expect(res.status, String(typ)).to.equal(401);
        expect(res.body.error.code).to.equal('invalid_token');
      }
      if (tokens.id_token) expect((await self(tokens.id_token)).status).to.equal(401);
    });

    it('refuses a wrong iss, a future nbf, a future iat, two audiences and a missing grant claim', async () => {
      const claims = decodeJwt((await obtainTokens()).access_token);
      const now = Math.floor(clock.now().getTime() / 1000);
      for (const [label, bad] of [
        ['iss', { ...claims, iss: 'https://evil.example' }],
        ['nbf', { ...claims, nbf: now + 3600 }],
        ['iat', { ...claims, iat: now + 3600, exp: now + 3600 + 900 }],
        ['aud', { ...claims, aud: [agentResource, mcpResource] }],
        ['gid', { ...claims, gid: undefined }],
        ['exp', { ...claims, exp: undefined }],
      ] as const) {
        const res = await self(await signWithOurKey(bad as JWTPayload));
        expect(res.status, label).to.equal(401);
        expect(res.body.error.code, label).to.equal('invalid_token');
      }
    });

    it('refuses an unknown kid and an HS256 token keyed with our public key', async () => {
      const tokens = await obtainTokens();
      const claims = decodeJwt(tokens.access_token);
      expect((await self(await signWithOurKey(claims, { kid: 'no-such-kid' }))).status).to.equal(401);
      const jwks = (await (await fetch(`${server.baseUrl}/oauth/jwks`)).json()) as { keys: Record<string, unknown>[] };
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      const input = `${b64({ alg: 'HS256', typ: 'at+jwt', kid: jwks.keys[0]!.kid })}.${b64(claims)}`;
      const sig = createHmac('sha256', JSON.stringify(jwks.keys[0])).update(input).digest('base64url');
      expect((await self(`${input}.${sig}`)).status).to.equal(401);
    });

    it('refuses the token in the query string or the body at /v1/agent and /mcp', async () => {
      const tokens = await obtainTokens();
      const body = await server.request('POST', `/v1/agent/recipients/resolve`, { body: { access_token: tokens.access_token, to: '0x1111111111111111111111111111111111111111' } });
      expect(body.status).to.equal(401);
      const mcp = await obtainTokens({ resource: mcpResource });
      const inQuery = await fetch(`${server.baseUrl}/mcp?access_token=${mcp.access_token}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(toolCall('agent_self_get', {})),
      });
      expect(inQuery.status).to.equal(401);
      const inBody = await postMcp(server, { ...toolCall('agent_self_get', {}), access_token: mcp.access_token });
      expect(inBody.status).to.equal(401);
      // The same token in the header works.
      expect((await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${mcp.access_token}` })).status).to.equal(200);
    });

    it('refuses an /mcp token at /v1/agent with the /v1/agent challenge, and a /v1/agent token at /mcp with the /mcp challenge', async () => {
      const mcp = await obtainTokens({ resource: mcpResource });
      const agent = await obtainTokens();
      const a = await self(mcp.access_token);
      expect(a.status).to.equal(401);
      expect(a.headers.get('www-authenticate')).to.include(`resource_metadata="${server.baseUrl}/.well-known/oauth-protected-resource/v1/agent"`);
      const m = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${agent.access_token}` });
      expect(m.status).to.equal(401);
      expect(m.headers.get('www-authenticate')).to.include(`resource_metadata="${server.baseUrl}/.well-known/oauth-protected-resource/mcp"`);
      expect(m.headers.get('www-authenticate')).to.include('error="invalid_token"');
    });

    it('answers 403 insufficient_scope with the required scope for a read-only token on a payment route and tool', async () => {
      const read = await obtainTokens({ scope: 'agent:read' });
      const res = await server.request('POST', '/v1/agent/payments', {
        headers: { authorization: `Bearer ${read.access_token}` },
        body: { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1' },
        idempotencyKey: `audit-${Date.now()}`,
      });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('insufficient_scope');
      expect(res.headers.get('www-authenticate')).to.include('scope="agent:payments:write"');
      expect(res.headers.get('www-authenticate')).to.include('resource_metadata=');
      const mcp = await obtainTokens({ resource: mcpResource, scope: 'agent:read' });
      const tool = await postMcp(server, toolCall('agent_payments_create', { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1', idempotency_key: `audit-${Date.now()}` }), {
        authorization: `Bearer ${mcp.access_token}`,
      });
      expect(tool.status).to.equal(403);
      expect(tool.headers.get('www-authenticate')).to.include('scope="agent:payments:write"');
    });
  });

  describe('MCP transport', () => {
    it('refuses an opaque (null) Origin and a look-alike origin', async () => {
      const mcp = await obtainTokens({ resource: mcpResource });
      const base = new URL(server.baseUrl);
      for (const origin of ['null', `${base.protocol}//${base.hostname}.evil.example:${base.port}`, `http://localhost:${base.port}`]) {
        const res = await postMcp(server, toolCall('agent_self_get', {}), { authorization: `Bearer ${mcp.access_token}`, origin });
        expect(res.status, origin).to.equal(403);
      }
    });
  });
});
