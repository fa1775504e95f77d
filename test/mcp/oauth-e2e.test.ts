// End to end: an MCP client authorised through the real OAuth flow (registration, PKCE, connect page) calls tools at /mcp.
import { expect } from 'chai';
import * as oidc from 'openid-client';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createFakeClock } from '../../src/lib/clock.js';
import type { TestServer } from '../helpers/server.js';
import { authorizeThroughConnect, Browser, startMailSink, uniqueAddress, type MailSink } from '../oauth/helpers.js';
import { connectClient, resultBody, startMcpTestServer } from './helpers.js';

const REDIRECT_URI = 'http://127.0.0.1:9/callback';

describe('MCP with a token from the OAuth flow', function () {
  this.timeout(60_000);
  let server: TestServer;
  let mail: MailSink;
  let email: string;
  let agentId: string;

  before(async () => {
    mail = await startMailSink();
    server = await startMcpTestServer({ clock: createFakeClock(new Date()), env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    email = `mcp-owner-${Date.now()}@example.com`;
    const { owner_id } = await server.services.agents.createOwner(server.db, { email });
    agentId = (await server.createAgent({ ownerId: owner_id, name: 'mcp oauth agent' })).agentId;
  });

  after(async () => {
    await server?.close();
    await mail?.close();
  });

  async function obtainAccessToken(resource: string, scope: string): Promise<string> {
    const config = await oidc.dynamicClientRegistration(new URL(server.baseUrl), { redirect_uris: [REDIRECT_URI], client_name: 'MCP test client', token_endpoint_auth_method: 'none' }, oidc.None(), {
      algorithm: 'oauth2',
      execute: [oidc.allowInsecureRequests],
      [oidc.customFetch]: (url: string, init: RequestInit) => fetch(url, { ...init, headers: { ...Object.fromEntries(new Headers(init.headers)), 'x-forwarded-for': uniqueAddress() } }),
    });
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      resource,
      state,
    });
    const callback = await authorizeThroughConnect(new Browser(), url.href, mail, { email, agentId });
    const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, { resource });
    return tokens.access_token;
  }

  it('lists tools and calls agent_self_get with an /mcp token, and refuses a /v1/agent token', async () => {
    const mcpToken = await obtainAccessToken(`${server.baseUrl}/mcp`, 'agent:read');
    const client = await connectClient(server, mcpToken);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).to.include('agent_self_get');
      const result = await client.callTool({ name: 'agent_self_get', arguments: {} });
      expect(result.isError, JSON.stringify(result)).to.not.equal(true);
      expect(JSON.stringify(resultBody(result))).to.include(agentId);
    } finally {
      await client.close();
    }

    const agentToken = await obtainAccessToken(`${server.baseUrl}/v1/agent`, 'agent:read');
    const err = await connectClient(server, agentToken).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).to.equal(401);
  });
});
