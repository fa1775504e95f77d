import { expect } from 'chai';
import { createDemoAgent, newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

// Hostile-input sweep: every write route of the document, called with an empty and a junk body,
// directly and through /simulate, answers a documented 4xx (or 200 for simulate), never a 5xx.
describe('every write route', () => {
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer();
    agent = await createDemoAgent(server, 10_000);
  });
  after(() => server.close());

  const writes = () => server.built.router.ops.filter((op) => op.method !== 'get' && op.path.startsWith('/v1/agent'));
  const concrete = (path: string) => path.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
  const junk = { amount: -1, asset: { $gt: '' }, to: ['x'], url: 'javascript:alert(1)', quote_id: "' OR 1=1 --", method: 'TRACE', unknown_field: true };

  it('answers 4xx, never 5xx, to empty and junk bodies', async () => {
    const failures: string[] = [];
    for (const op of writes()) {
      for (const body of [{}, junk]) {
        const res = await server.request(op.method.toUpperCase(), concrete(op.path), { agent, body, idempotencyKey: newKey() });
        if (res.status < 400 || res.status >= 500) failures.push(`${op.operationId} ${JSON.stringify(body).slice(0, 40)} -> ${res.status} ${res.text.slice(0, 200)}`);
        else if (res.body?.ok !== false || typeof res.body?.error?.code !== 'string') failures.push(`${op.operationId} -> no envelope: ${res.text.slice(0, 200)}`);
      }
    }
    expect(failures, failures.join('\n')).to.deep.equal([]);
  });

  it('simulates every write route with 200 and would_succeed false for an empty body', async () => {
    const failures: string[] = [];
    for (const op of writes().filter((o) => o.operationId !== 'simulateRequest')) {
      const res = await server.request('POST', '/v1/agent/simulate', { agent, body: { method: op.method.toUpperCase(), path: concrete(op.path), body: {} } });
      if (res.status !== 200 || res.body.would_succeed !== false || !Array.isArray(res.body.stages)) failures.push(`${op.operationId} -> ${res.status} ${res.text.slice(0, 200)}`);
    }
    expect(failures, failures.join('\n')).to.deep.equal([]);
  });
});
