// One route match per request (issue 25, acceptance 2): an HTTP request is matched once by the router's matcher and
// dispatched once; an MCP tool call holds its operation (found by the tool's name) and is dispatched without matching
// a path; simulate matches the route it simulates once and dispatches it. openapi-backend never routes: it validates
// the operation it is given (its own matchOperation is counted too, and stays at zero).
import { expect } from 'chai';
import { OpenAPIRouter } from 'openapi-backend';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import type { Router } from '../../src/http/types.js';
import { newKey, type TestAgent, type TestServer } from '../helpers/server.js';
import { mintAccessToken, postMcp, startMcpTestServer, toolCall } from '../mcp/helpers.js';

describe('one route match per request', function () {
  this.timeout(60_000);
  let server: TestServer;
  let agent: TestAgent;
  let token: string;
  const seen = { matches: 0, backendMatches: 0, dispatched: [] as string[] };
  const backendMatch = OpenAPIRouter.prototype.matchOperation;
  const payment = { to: `0x${'1'.repeat(40)}`, asset: 'USDC', amount: '1' };

  before(async () => {
    server = await startMcpTestServer();
    agent = await server.createAgent({ fund: { USDC: '100' } });
    token = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
    // Counters around the app's own router (the object every entry calls) and openapi-backend's matcher.
    const router: Router = server.built.router;
    const { match, dispatch } = router;
    router.match = (method, path) => {
      seen.matches += 1;
      return match(method, path);
    };
    router.dispatch = (op, input, ctx) => {
      seen.dispatched.push(op.operationId);
      return dispatch(op, input, ctx);
    };
    OpenAPIRouter.prototype.matchOperation = function (this: OpenAPIRouter, ...args: Parameters<typeof backendMatch>) {
      seen.backendMatches += 1;
      return backendMatch.apply(this, args);
    } as typeof backendMatch;
  });

  after(async () => {
    OpenAPIRouter.prototype.matchOperation = backendMatch;
    await server?.close();
  });

  beforeEach(() => {
    seen.matches = 0;
    seen.backendMatches = 0;
    seen.dispatched = [];
  });

  const mcp = (name: string, args: Record<string, unknown>) => postMcp(server, toolCall(name, args), { authorization: `Bearer ${token}` });

  it('matches an HTTP request once and dispatches it once', async () => {
    const res = await server.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: payment });
    expect(res.status).to.be.oneOf([200, 201, 403]);
    expect(seen).to.deep.equal({ matches: 1, backendMatches: 0, dispatched: ['createPayment'] });
  });

  it('dispatches an MCP tool call by the operation its tool holds, matching no path', async () => {
    const res = await mcp('agent_payments_create', { ...payment, idempotency_key: newKey() });
    expect(res.status).to.equal(200);
    expect(seen).to.deep.equal({ matches: 0, backendMatches: 0, dispatched: ['createPayment'] });
  });

  it('matches the route a simulate call simulates once (and, over HTTP, the simulate route itself once)', async () => {
    const body = { method: 'POST', path: '/v1/agent/payments', body: payment };
    const res = await server.request('POST', '/v1/agent/simulate', { agent, body });
    expect(res.status).to.equal(200);
    expect(seen).to.deep.equal({ matches: 2, backendMatches: 0, dispatched: ['simulateRequest', 'createPayment'] });

    seen.matches = 0;
    seen.dispatched = [];
    const viaMcp = await mcp('agent_simulate_create', body);
    expect(viaMcp.status).to.equal(200);
    expect(seen).to.deep.equal({ matches: 1, backendMatches: 0, dispatched: ['simulateRequest', 'createPayment'] });
  });
});
