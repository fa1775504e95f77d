// Issue 30 (found by the soak's MCP clients): an MCP request while Redis (the shared session store) or Postgres does
// not answer is a 503 service_unavailable with Retry-After, as on /v1/agent, never a 500; the session works again
// once the store answers.
import { expect } from 'chai';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { createDemoAgent, type TestAgent, type TestServer } from '../helpers/server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { testEnv } from '../setup.js';
import { mintAccessToken, postMcp, startMcpTestServer } from './helpers.js';

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'outage-test', version: '1.0.0' } } };
const listTools = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

for (const store of ['redis', 'postgres'] as const) {
  describe(`MCP while ${store === 'redis' ? 'Redis (the session store)' : 'Postgres'} does not answer`, function () {
    this.timeout(60_000);
    let proxy: TcpProxy;
    let server: TestServer;
    let agent: TestAgent;
    let bearer: string;
    before(async () => {
      const target = new URL(store === 'redis' ? testEnv.redisUrl : testEnv.databaseUrl);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || (store === 'redis' ? 6379 : 5432)) });
      const env: Record<string, string> = store === 'redis' ? { REDIS_URL: proxy.rewrite(testEnv.redisUrl) } : { DATABASE_URL: proxy.rewrite(testEnv.databaseUrl), DB_ACQUIRE_TIMEOUT_MS: '1500' };
      server = await startMcpTestServer({ env });
      agent = await createDemoAgent(server);
      bearer = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
    });
    after(async () => {
      await proxy?.setMode('pass');
      await server?.close();
      await proxy?.close();
    });

    it('answers 503 service_unavailable with Retry-After, then serves the session again', async () => {
      const auth = { authorization: `Bearer ${bearer}` };
      const init = await postMcp(server, initialize, auth);
      expect(init.status).to.equal(200);
      const id = init.headers.get('mcp-session-id')!;
      expect((await postMcp(server, listTools, { ...auth, 'mcp-session-id': id })).status).to.equal(200);

      await proxy.setMode('refuse');
      const refused = await postMcp(server, listTools, { ...auth, 'mcp-session-id': id });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
      expect(Number(refused.headers.get('retry-after'))).to.be.at.least(1);
      expect((refused.body as { error: { message: string } }).error.message).to.match(/unavailable/i);

      await proxy.setMode('pass');
      const deadline = Date.now() + 20_000;
      let again = await postMcp(server, listTools, { ...auth, 'mcp-session-id': id });
      while (again.status === 503 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        again = await postMcp(server, listTools, { ...auth, 'mcp-session-id': id });
      }
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
    });
  });
}
