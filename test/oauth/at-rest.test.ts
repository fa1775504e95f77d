// Secrets at rest (issue 10 items 5 and 6): OAuth artefacts are stored by hash, and a pg_dump taken after a
// webhook create, a rotation, a confidential client's authorization code flow and a refresh holds none of
// the secrets or tokens handed out.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as oidc from 'openid-client';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { artefactHash, upsertModel } from '../../src/db/repositories/oauth.repository.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createAdapterClass, sealLegacySecrets } from '../../src/oauth/adapter.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { testEnv } from '../setup.js';
import { createTableResolver } from '../webhooks/hostile-urls.js';
import { authorizeThroughConnect, Browser, startMailSink, uniqueAddress, type MailSink } from './helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/callback';

/** A browser that remembers every cookie value it was ever given (session and interaction ids). */
class RecordingBrowser extends Browser {
  readonly seen = new Map<string, Set<string>>();
  override async fetch(...args: Parameters<Browser['fetch']>) {
    const res = await super.fetch(...args);
    for (const [name, value] of this.cookies) this.seen.set(name, (this.seen.get(name) ?? new Set()).add(value));
    return res;
  }
}

describe('OAuth artefacts and secrets at rest', function () {
  this.timeout(60_000);
  let server: TestServer;
  let mail: MailSink;
  let agent: TestAgent;
  const handedOut = new Map<string, string>();
  let tokens: { code: string; refresh: string; rotated: string; sessions: string[]; interactions: string[] };

  before(async () => {
    mail = await startMailSink();
    server = await startTestServer({ clock: createFakeClock(new Date()), env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    (server.services as { webhooks: unknown }).webhooks = createWebhookService({
      clock: server.clock,
      sealer: createSealer(server.config.masterKey),
      allowLoopback: false,
      resolver: createTableResolver(),
    });
    const email = `at-rest-${Date.now()}@example.com`;
    const { owner_id } = await server.services.agents.createOwner(server.db, { email });
    agent = await server.createAgent({ ownerId: owner_id, name: 'at rest' });
    handedOut.set('api key', agent.apiKey);

    // Webhook create and rotate (their responses sit in idempotency records).
    const created = await server.request('POST', '/v1/agent/webhooks', { agent, body: { url: 'https://hooks.example.com/at-rest', event_types: ['payment.executed'] }, idempotencyKey: newKey() });
    expect(created.status, created.text).to.equal(200);
    const rotated = await server.request('POST', `/v1/agent/webhooks/${created.body.webhook.id}/rotate-secret`, { agent, idempotencyKey: newKey() });
    expect(rotated.status, rotated.text).to.equal(200);
    handedOut.set('webhook secret', created.body.signing_secret);
    handedOut.set('rotated webhook secret', rotated.body.signing_secret);

    // A confidential client: registration hands out a client secret and a registration access token.
    const config = await oidc.dynamicClientRegistration(
      new URL(server.baseUrl),
      { redirect_uris: [REDIRECT_URI], client_name: 'At-rest app', token_endpoint_auth_method: 'client_secret_post' },
      undefined,
      {
        algorithm: 'oauth2',
        execute: [oidc.allowInsecureRequests],
        [oidc.customFetch]: (url: string, init: RequestInit) => fetch(url, { ...init, headers: { ...Object.fromEntries(new Headers(init.headers)), 'x-forwarded-for': uniqueAddress() } }),
      },
    );
    const metadata = config.clientMetadata();
    expect(metadata.client_secret).to.be.a('string');
    handedOut.set('client secret', metadata.client_secret as string);
    handedOut.set('registration access token', metadata.registration_access_token as string);

    const verifier = oidc.randomPKCECodeVerifier();
    const resource = `${server.baseUrl}/v1/agent`;
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope: ALL_SCOPES.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      resource,
    });
    const browser = new RecordingBrowser();
    const callback = await authorizeThroughConnect(browser, url.href, mail, { email, agentId: agent.agentId });
    const code = callback.searchParams.get('code')!;
    const granted = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier }, { resource });
    const refreshed = await oidc.refreshTokenGrant(config, granted.refresh_token!, { resource });
    tokens = {
      code,
      refresh: granted.refresh_token!,
      rotated: refreshed.refresh_token!,
      sessions: [...(browser.seen.get('_session') ?? [])],
      interactions: [...(browser.seen.get('_interaction') ?? [])],
    };
    expect(tokens.sessions, 'the session cookie').to.have.length.greaterThan(0);
    expect(tokens.interactions, 'the interaction cookie').to.have.length.greaterThan(0);
    handedOut.set('authorization code', code);
    handedOut.set('refresh token', tokens.refresh);
    handedOut.set('rotated refresh token', tokens.rotated);
    handedOut.set('access token', granted.access_token);
    handedOut.set('refreshed access token', refreshed.access_token);
    tokens.sessions.forEach((v, i) => handedOut.set(`session id ${i}`, v));
    tokens.interactions.forEach((v, i) => handedOut.set(`interaction id ${i}`, v));
  });

  after(async () => {
    await server?.close();
    await mail?.close();
  });

  it('stores codes, refresh tokens, session and interaction ids only as SHA-256 hashes', async () => {
    const rows = await server.db('oauth_models').select('model', 'id', 'uid', 'payload');
    const byHash = new Map(rows.map((r: { model: string; id: string }) => [r.id, r.model]));
    expect(byHash.get(artefactHash(tokens.code))).to.equal('AuthorizationCode');
    expect(byHash.get(artefactHash(tokens.refresh))).to.equal('RefreshToken');
    expect(byHash.get(artefactHash(tokens.rotated))).to.equal('RefreshToken');
    expect(
      tokens.sessions.some((s) => byHash.get(artefactHash(s)) === 'Session'),
      'the session row',
    ).to.equal(true);
    const stored = JSON.stringify(rows);
    for (const value of [tokens.code, tokens.refresh, tokens.rotated, ...tokens.sessions, ...tokens.interactions]) expect(stored).not.to.include(value);
    const codes = await server.db('oauth_login_codes').select('interaction_uid');
    expect(codes.map((c: { interaction_uid: string }) => c.interaction_uid)).to.include.members(tokens.interactions.map(artefactHash));
  });

  it('leaves none of the secrets or tokens handed out in a pg_dump of the database', async () => {
    const { stdout } = await promisify(execFile)('pg_dump', ['--data-only', '--no-owner', testEnv.databaseUrl], { maxBuffer: 512 * 1024 * 1024 });
    expect(stdout).to.include('oauth_models');
    for (const [name, value] of handedOut) {
      expect(value, name).to.be.a('string').with.length.greaterThan(15);
      expect(stdout.includes(value), `${name} is in the dump`).to.equal(false);
    }
  });

  it('finds a Session by uid with its id restored, and gives an Interaction back its session cookie', async () => {
    const sealer = createSealer(server.config.masterKey);
    const Adapter = createAdapterClass({ db: server.db, clock: server.clock, sealer });
    const sessionId = `session-${newKey()}`;
    const uid = `uid-${newKey()}`;
    await new Adapter('Session').upsert(sessionId, { jti: sessionId, uid, kind: 'Session', accountId: 'owner-1' }, 3600);
    expect(await new Adapter('Session').findByUid(uid)).to.include({ jti: sessionId, uid, accountId: 'owner-1' });
    expect(await new Adapter('Session').find(sessionId)).to.include({ jti: sessionId, uid });
    const interactionId = `interaction-${newKey()}`;
    await new Adapter('Interaction').upsert(interactionId, { jti: interactionId, kind: 'Interaction', session: { accountId: 'owner-1', uid, cookie: sessionId } }, 600);
    expect((await new Adapter('Interaction').find(interactionId))!.session).to.deep.equal({ accountId: 'owner-1', uid, cookie: sessionId });
    const rows = await server.db('oauth_models').whereIn('id', [artefactHash(sessionId), artefactHash(interactionId)]);
    expect(rows).to.have.length(2);
    expect(JSON.stringify(rows)).not.to.include(sessionId);
  });

  it('seals a client secret stored in plaintext before the change, and still serves it to the provider', async () => {
    const sealer = createSealer(server.config.masterKey);
    const clientId = `legacy-${newKey()}`;
    const secret = `legacy-secret-${newKey()}`;
    await upsertModel(server.db, {
      model: 'Client',
      id: clientId,
      payload: { client_id: clientId, client_secret: secret, redirect_uris: [REDIRECT_URI] },
      grant_id: null,
      uid: null,
      user_code: null,
      expires_at: null,
    });
    while ((await sealLegacySecrets(server.db, sealer)) > 0);
    const row = await server
      .db('oauth_models')
      .where({ model: 'Client', id: artefactHash(clientId) })
      .first();
    expect(JSON.stringify(row.payload)).not.to.include(secret);
    expect(row.sealed_secrets).to.match(/^v1\./);
    const Adapter = createAdapterClass({ db: server.db, clock: server.clock, sealer });
    expect(await new Adapter('Client').find(clientId)).to.include({ client_id: clientId, client_secret: secret });
  });
});
