// The statements one accepted payment sends to Postgres through HTTP (docs/perf/issue-12-performance.md "Performance: payments"):
// a regression in the write path's round trips fails here rather than only slowing the benchmark.
import { expect } from 'chai';
import { newKey, startTestServer, type TestServer } from '../helpers/server.js';
import { statementsOf } from '../support/statements.js';

const trips = async (fn: () => Promise<unknown>) => statementsOf(fn);

describe('createPayment', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => s.close());

  it('takes at most 6 round trips to Postgres for one accepted payment with period caps', async () => {
    const agent = await s.createAgent({
      policy: { operation_types: ['payment'], allowed_recipients: 'all', allowed_assets: ['USDC'], per_tx_usd: '100', per_period_usd: '1000', period: 'day', max_txs_per_period: 100 },
      fund: { USDC: '100' },
      rateLimit: { limit: 1000, classes: ['write'] },
    });
    const body = { to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' };
    // A first payment warms what is cached per process (assets, the router), as in steady state.
    expect((await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: newKey() })).status).to.equal(200);
    let status = 0;
    const { statements, roundTrips } = await trips(async () => {
      status = (await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: newKey() })).status;
    });
    expect(status).to.equal(200);
    // Round trips, as test/support/statements.ts counts them: statements sent together on the pipelined connection
    // (src/db/knex.ts batch) share one.
    // auth, BEGIN, claim, payees + price + policy lock + usage (one round trip), hold + operation, stored response + COMMIT
    expect(roundTrips, roundTrips.join('\n---\n')).to.have.length.at.most(6);
    expect(statements.filter((q) => /^(BEGIN|COMMIT)/i.test(q.trim()))).to.have.length(2);
    expect(
      roundTrips.filter((q) => /agent_policies WHERE agent_id = \$1::uuid FOR UPDATE/.test(q) && /AS period/.test(q) && /LEFT JOIN prices p/.test(q)),
      'the policy round trip: payees, price, lock and usage',
    ).to.have.length(1);
    expect(
      roundTrips.filter((q) => /UPDATE idempotency_keys SET status_code.*;\s*COMMIT/s.test(q)),
      'the stored answer goes with the COMMIT',
    ).to.have.length(1);
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
    const { roundTrips: statements } = await trips(async () => {
      again = await s.request('POST', '/v1/agent/payments', { agent, body, idempotencyKey: key });
    });
    expect(again!.text).to.equal(first.text);
    expect(again!.headers.get('x-idempotency-replayed')).to.equal('true');
    // auth, BEGIN, claim (yields to the live record), read the record, COMMIT
    expect(statements, statements.join('\n---\n')).to.have.length.at.most(5);
  });
});
