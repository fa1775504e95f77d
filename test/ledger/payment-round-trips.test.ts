// The statements one accepted payment sends to Postgres through HTTP (docs/ARCHITECTURE.md "Performance: payments"):
// a regression in the write path's round trips fails here rather than only slowing the benchmark.
import { expect } from 'chai';
import { newKey, startTestServer, type TestServer } from '../helpers/server.js';
import { statementsOf } from '../support/statements.js';

const sent = async (fn: () => Promise<unknown>): Promise<string[]> => (await statementsOf(fn)).statements;

describe('createPayment', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => s.close());

  it('sends at most 6 statements to Postgres for one accepted payment with period caps', async () => {
    const agent = await s.createAgent({ policy: { operation_types: ['payment'], allowed_assets: ['USDC'], per_tx_usd: '100', per_period_usd: '1000', period: 'day', max_txs_per_period: 100 }, fund: { USDC: '100' }, rateLimit: { limit: 1000, classes: ['write'] } });
    const body = { to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' };
    // A first payment warms what is cached per process (assets, the router), as in steady state.
    expect((await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: newKey() })).status).to.equal(200);
    let status = 0;
    const statements = await sent(async () => {
      status = (await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: newKey() })).status;
    });
    expect(status).to.equal(200);
    // The statements of the policy round trip run prepared (knex statementsIn): PREPAREd once per pooled connection,
    // a round trip that steady state does not pay (which pooled connection a request gets is the pool's choice).
    const steady = statements.filter((q) => !/^PREPARE agentapi_/.test(q.trim()));
    // auth, BEGIN, claim, payees + price + policy lock + usage (one round trip), hold + operation + stored response, COMMIT
    expect(steady, steady.join('\n---\n')).to.have.length.at.most(6);
    expect(steady.filter((q) => /^(BEGIN|COMMIT)/i.test(q.trim()))).to.have.length(2);
    expect(steady.filter((q) => /^EXECUTE agentapi_payees_and_price\(.*;\s*EXECUTE agentapi_policy_lock\(.*;\s*EXECUTE agentapi_policy_usage\(/s.test(q.trim())), 'the policy round trip, prepared').to.have.length(1);
  });

  it('stores a refusal thrown after the effects began (insufficient funds) with nothing of the effects, and replays it', async () => {
    const agent = await s.createAgent({ policy: 'all', fund: { USDC: '1' }, rateLimit: { limit: 1000, classes: ['write'] } });
    const key = newKey();
    const body = { to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '5' };
    const first = await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: key });
    expect(first.status).to.equal(422);
    expect(first.body).to.have.nested.property('error.code', 'insufficient_funds');
    const again = await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: key });
    expect(again.text).to.equal(first.text);
    expect(again.headers.get('x-idempotency-replayed')).to.equal('true');
    const ops = await s.db('operations').where({ agent_id: agent.agentId });
    expect(ops).to.have.length(0);
  });

  it('answers a replay of the same key from the stored record in at most 5 statements, with the same body', async () => {
    const agent = await s.createAgent({ policy: 'all', fund: { USDC: '10' }, rateLimit: { limit: 1000, classes: ['write'] } });
    const key = newKey();
    const body = { to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' };
    const first = await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: key });
    let again: Awaited<ReturnType<TestServer['request']>> | undefined;
    const statements = await sent(async () => {
      again = await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: key });
    });
    expect(again!.text).to.equal(first.text);
    expect(again!.headers.get('x-idempotency-replayed')).to.equal('true');
    // auth, BEGIN, claim (yields to the live record), read the record, COMMIT
    expect(statements, statements.join('\n---\n')).to.have.length.at.most(5);
  });
});
