import { expect } from 'chai';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';

// Every parameterless GET of the document, for an agent with a balance and some history, answers
// 200 and passes response validation (the test server turns a mismatch into a 500).
describe('every read route', () => {
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer({ worker: true });
    agent = await server.createAgent();
    await server.services.ledger.setupDemoAgent(server.db, { agentId: agent.agentId, walletId: agent.walletId });
    const pay = await server.request('POST', '/v1/agent/payments', {
      agent,
      idempotencyKey: newKey(),
      body: { to: '0x1111111111111111111111111111111111111111', asset: 'USDC', amount: '1.25' },
    });
    expect(pay.status, pay.text).to.equal(200);
  });
  after(() => server.close());

  it('answers 200 on each GET without path parameters', async () => {
    const reads = server.built.router.ops.filter((op) => op.method === 'get' && op.path.startsWith('/v1/agent') && !op.path.includes('{'));
    expect(reads.length).to.be.at.least(25);
    const failures: string[] = [];
    for (const op of reads) {
      const query = op.operationId === 'getDepositAddress' ? '?asset=USDC&chain=base' : '';
      const res = await server.request('GET', `${op.path}${query}`, { agent });
      if (res.status !== 200) failures.push(`${op.operationId} ${res.status} ${res.text.slice(0, 300)}`);
    }
    expect(failures, failures.join('\n')).to.deep.equal([]);
  });

  it('answers 200 on each detail route for a resource the agent owns', async () => {
    const ops = await server.request('GET', '/v1/agent/operations?limit=1', { agent });
    const id = ops.body.items[0].id as string;
    for (const path of [`/v1/agent/operations/${id}`, `/v1/agent/operations/${id}?include=onchain`, `/v1/agent/payments/${id}`]) {
      const res = await server.request('GET', path, { agent });
      expect(res.status, `${path}: ${res.text}`).to.equal(200);
      expect(res.body.operation.id).to.equal(id);
    }
  });
});
