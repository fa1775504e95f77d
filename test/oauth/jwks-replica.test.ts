// An API process apart from the authorization server (OAUTH_JWKS_URI): bearer tokens are verified with keys fetched
// from the authorization server's JWKS (jwks-rsa), and a key rotation there is picked up at the first token signed with
// the new key. The JWKS goes through a counting proxy, so the test sees the replica fetch it.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeProtectedHeader } from 'jose';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { oauthCommands } from '../../src/cli/oauth.js';
import { startServerProcess, type ServerProcess } from '../helpers/process.js';
import { startTestServer, testConfigEnv, type TestServer } from '../helpers/server.js';
import { authorizationUrl, authorizeThroughConnect, Browser, pkcePair, registerClient, startMailSink, tokenRequest, type MailSink } from './helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/callback';

describe('bearer tokens on an API replica apart from the authorization server', function () {
  this.timeout(120_000);
  let authServer: TestServer;
  let replica: ServerProcess;
  let jwksProxy: Server;
  let jwksFetches = 0;
  let mail: MailSink;
  let email: string;
  let agentId: string;
  let clientId: string;

  before(async () => {
    mail = await startMailSink();
    authServer = await startTestServer({ env: { SMTP_URL: mail.url } });
    email = `replica-${Date.now()}@example.com`;
    const ownerId = (await authServer.services.agents.createOwner(authServer.db, { email })).owner_id;
    agentId = (await authServer.createAgent({ ownerId })).agentId;
    const reg = await registerClient(authServer.baseUrl, { redirect_uris: [REDIRECT_URI], client_name: 'Replica test app' });
    clientId = reg.body.client_id as string;

    jwksProxy = createServer((req, res) => {
      jwksFetches += 1;
      void fetch(`${authServer.baseUrl}/oauth/jwks`).then(async (upstream) => {
        res.writeHead(upstream.status, { 'content-type': 'application/json' });
        res.end(await upstream.text());
      });
    });
    await new Promise<void>((resolve) => jwksProxy.listen(0, '127.0.0.1', resolve));
    const jwksUri = `http://127.0.0.1:${(jwksProxy.address() as AddressInfo).port}/oauth/jwks`;
    // Same database (grants are read there) and issuer; its own port, and keys only through the JWKS.
    replica = await startServerProcess(testConfigEnv({ RUN_WORKER: 'false', BASE_URL: authServer.baseUrl, OAUTH_JWKS_URI: jwksUri }));
  });

  after(async () => {
    await replica?.stop();
    await authServer?.close();
    jwksProxy?.close();
    await mail?.close();
  });

  async function obtainAccessToken(): Promise<string> {
    const resource = `${authServer.baseUrl}/v1/agent`;
    const { verifier, challenge } = pkcePair();
    const params = {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      scope: ALL_SCOPES.join(' '),
      resource,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'st',
    };
    await authServer.db('oauth_throttles').delete();
    const callback = await authorizeThroughConnect(new Browser(), authorizationUrl(authServer.baseUrl, params), mail, { email, agentId });
    const res = await tokenRequest(authServer.baseUrl, {
      grant_type: 'authorization_code',
      code: callback.searchParams.get('code')!,
      code_verifier: verifier,
      redirect_uri: REDIRECT_URI,
      client_id: clientId,
      resource,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.access_token as string;
  }

  const selfOnReplica = async (token: string) => (await fetch(`${replica.baseUrl}/v1/agent/self`, { headers: { authorization: `Bearer ${token}` } })).status;

  it('verifies through the JWKS, and picks up a rotation on the authorization server at the first new kid', async () => {
    const before = await obtainAccessToken();
    expect(await selfOnReplica(before)).to.equal(200);
    const fetchesBefore = jwksFetches;
    expect(fetchesBefore).to.be.at.least(1);

    const rotate = oauthCommands.find((c) => c.name === 'oauth rotate-keys')!;
    const out = await rotate.run({ db: authServer.db, services: authServer.services, config: authServer.config, clock: authServer.clock }, { positional: [], flags: {} });
    // The provider signs with the new key once it has noticed the rotation: ask for tokens until one carries it.
    let after = await obtainAccessToken();
    for (let i = 0; i < 20 && decodeProtectedHeader(after).kid !== out.kid; i += 1) after = await obtainAccessToken();
    expect(decodeProtectedHeader(after).kid).to.equal(out.kid);

    expect(await selfOnReplica(after)).to.equal(200);
    expect(jwksFetches, 'the replica fetched the key set again for the new kid').to.be.greaterThan(fetchesBefore);
    expect(await selfOnReplica(before)).to.equal(200); // the previous key still verifies
    expect(await selfOnReplica(`${after.slice(0, -4)}AAAA`)).to.equal(401);
  });
});
