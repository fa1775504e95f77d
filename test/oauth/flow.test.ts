// Black-box OAuth flow with openid-client v6 as the client: registration, PKCE, connect page, tokens, refresh, replay, revocation.
import { expect } from 'chai';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as oidc from 'openid-client';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { authorizeThroughConnect, Browser, startMailSink, uniqueAddress, type MailSink } from './helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/callback';

describe('OAuth authorization code flow (openid-client)', function () {
  this.timeout(30_000);
  let server: TestServer;
  let mail: MailSink;
  let email: string;
  let agentId: string;
  let otherAgentId: string;

  before(async () => {
    mail = await startMailSink();
    server = await startTestServer({ clock: createFakeClock(new Date()), env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    email = `owner-${Date.now()}@example.com`;
    const { owner_id } = await server.services.agents.createOwner(server.db, { email });
    agentId = (await server.createAgent({ ownerId: owner_id, name: 'first agent' })).agentId;
    otherAgentId = (await server.createAgent({ ownerId: owner_id, name: 'second agent' })).agentId;
  });

  after(async () => {
    await server?.close();
    await mail?.close();
  });

  async function register(): Promise<oidc.Configuration> {
    return oidc.dynamicClientRegistration(new URL(server.baseUrl), { redirect_uris: [REDIRECT_URI], client_name: 'Flow test app', token_endpoint_auth_method: 'none' }, oidc.None(), {
      algorithm: 'oauth2',
      execute: [oidc.allowInsecureRequests],
      // Each registration from its own address, so the per-address registration throttle never bites here.
      [oidc.customFetch]: (url: string, init: RequestInit) => fetch(url, { ...init, headers: { ...Object.fromEntries(new Headers(init.headers)), 'x-forwarded-for': uniqueAddress() } }),
    });
  }

  async function connect(config: oidc.Configuration, opts: { scope?: string; resource?: string; agent?: string; scopes?: string[] } = {}) {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const resource = opts.resource ?? `${server.baseUrl}/v1/agent`;
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope: opts.scope ?? ALL_SCOPES.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      resource,
      state,
    });
    const callback = await authorizeThroughConnect(new Browser(), url.href, mail, { email, agentId: opts.agent ?? agentId, scopes: opts.scopes });
    const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, { resource });
    return { tokens, callback };
  }

  const self = (token: string) => server.request('GET', '/v1/agent/self', { headers: { authorization: `Bearer ${token}` } });

  it('issues an audience-bound JWT and a refresh token that work end to end', async () => {
    const config = await register();
    const { tokens, callback } = await connect(config, { agent: otherAgentId });
    expect(callback.origin + callback.pathname).to.equal(REDIRECT_URI);
    expect(callback.searchParams.get('iss')).to.equal(server.baseUrl);
    expect(tokens.refresh_token).to.be.a('string');
    expect(tokens.token_type.toLowerCase()).to.equal('bearer');
    expect(tokens.expires_in).to.be.at.most(900);

    const header = decodeProtectedHeader(tokens.access_token);
    expect(header.typ).to.equal('at+jwt');
    expect(header.alg).to.equal('ES256');
    expect(header.kid).to.be.a('string');
    const claims = decodeJwt(tokens.access_token);
    expect(claims.aud).to.equal(`${server.baseUrl}/v1/agent`);
    expect(claims.iss).to.equal(server.baseUrl);
    expect(claims.sub).to.equal(otherAgentId);
    expect(claims.client_id).to.equal(config.clientMetadata().client_id);
    expect(claims.jti).to.be.a('string');
    expect(String(claims.scope).split(' ').sort()).to.deep.equal([...ALL_SCOPES].sort());

    const res = await self(tokens.access_token);
    expect(res.status, res.text).to.equal(200);
    expect(res.text).to.include(otherAgentId);

    // Tokens only in the Authorization header.
    const inQuery = await server.request('GET', `/v1/agent/self?access_token=${tokens.access_token}`);
    expect(inQuery.status).to.equal(401);
  });

  it('rotates the refresh token and revokes the grant when a consumed one is replayed', async () => {
    const config = await register();
    const { tokens } = await connect(config);
    const resource = `${server.baseUrl}/v1/agent`;

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource });
    expect(refreshed.refresh_token).to.be.a('string').and.not.equal(tokens.refresh_token);
    expect(refreshed.access_token).to.not.equal(tokens.access_token);
    expect((await self(refreshed.access_token)).status).to.equal(200);

    // Replay of the consumed refresh token: invalid_grant, the grant dies, its live access token is refused at once.
    const replay = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(replay).to.be.instanceOf(oidc.ResponseBodyError);
    expect((replay as oidc.ResponseBodyError).error).to.equal('invalid_grant');
    const refused = await self(refreshed.access_token);
    expect(refused.status).to.equal(401);
    expect(refused.body.error.code).to.equal('invalid_token');
    expect(refused.headers.get('www-authenticate')).to.include(`resource_metadata="${server.baseUrl}/.well-known/oauth-protected-resource/v1/agent"`);
    expect(refused.headers.get('www-authenticate')).to.include('error="invalid_token"');

    // The newest refresh token died with the grant.
    const after = await oidc.refreshTokenGrant(config, refreshed.refresh_token!, { resource }).then(
      () => null,
      (err: unknown) => err,
    );
    expect((after as oidc.ResponseBodyError).error).to.equal('invalid_grant');
  });

  it('revokes the grant through the revocation endpoint', async () => {
    const config = await register();
    const { tokens } = await connect(config);
    expect((await self(tokens.access_token)).status).to.equal(200);
    await oidc.tokenRevocation(config, tokens.refresh_token!, { token_type_hint: 'refresh_token' });
    expect((await self(tokens.access_token)).status).to.equal(401);
    const refresh = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource: `${server.baseUrl}/v1/agent` }).then(
      () => null,
      (err: unknown) => err,
    );
    expect((refresh as oidc.ResponseBodyError).error).to.equal('invalid_grant');
  });

  it('honours a consented subset of scopes, refuses write routes without their scope, and refuses escalation at refresh', async () => {
    const config = await register();
    const { tokens } = await connect(config, { scope: 'agent:read agent:webhooks:manage', scopes: ['agent:read'] });
    expect(decodeJwt(tokens.access_token).scope).to.equal('agent:read');
    expect((await self(tokens.access_token)).status).to.equal(200);

    const write = await server.request('POST', '/v1/agent/webhooks', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
      body: { url: 'https://example.com/hook', event_types: ['payment.executed'] },
      idempotencyKey: `k-${Date.now()}`,
    });
    expect(write.status).to.equal(403);
    expect(write.body.error.code).to.equal('insufficient_scope');
    const challenge = write.headers.get('www-authenticate') ?? '';
    expect(challenge).to.include('error="insufficient_scope"');
    expect(challenge).to.include('scope="agent:webhooks:manage"');

    const escalate = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource: `${server.baseUrl}/v1/agent`, scope: 'agent:read agent:webhooks:manage' }).then(
      () => null,
      (err: unknown) => err,
    );
    expect((escalate as oidc.ResponseBodyError).error).to.equal('invalid_scope');
  });

  it('lists and revokes the grant for its owner (agentctl grants), refusing its access token at once', async () => {
    const config = await register();
    const { tokens } = await connect(config);
    const gid = decodeJwt(tokens.access_token).gid as string;
    const ownerId = (await server.db('agents').where({ id: agentId }).first('owner_id')).owner_id as string;
    const listed = await server.services.oauth.listGrants(server.db, ownerId);
    const mine = listed.find((g) => g.grant_id === gid);
    expect(mine).to.include({ agent_id: agentId, client_name: 'Flow test app', status: 'active', resource: `${server.baseUrl}/v1/agent`, last_used_at: null });

    expect((await self(tokens.access_token)).status).to.equal(200);
    // The accepted token stamps the grant's last use (the connected-apps list shows it).
    const used = (await server.services.oauth.listGrants(server.db, ownerId)).find((g) => g.grant_id === gid);
    expect(used?.last_used_at).to.equal(server.clock.now().toISOString());
    expect(await server.services.oauth.revokeGrant(server.db, gid)).to.deep.equal({ grant_id: gid, revoked: true });
    expect((await self(tokens.access_token)).status).to.equal(401);
    const refresh = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource: `${server.baseUrl}/v1/agent` }).then(
      () => null,
      (err: unknown) => err,
    );
    expect((refresh as oidc.ResponseBodyError).error).to.equal('invalid_grant');
    const relisted = await server.services.oauth.listGrants(server.db, ownerId);
    expect(relisted.find((g) => g.grant_id === gid)).to.include({ status: 'revoked', revoked_reason: 'owner' });
  });

  it('binds /mcp tokens to /mcp only', async () => {
    const config = await register();
    const { tokens } = await connect(config, { resource: `${server.baseUrl}/mcp` });
    expect(decodeJwt(tokens.access_token).aud).to.equal(`${server.baseUrl}/mcp`);
    const res = await self(tokens.access_token);
    expect(res.status).to.equal(401);
    expect(res.body.error.code).to.equal('invalid_token');
  });
});
