// Issue 26, item 11: Hightop's 409 `pending_time_lock_exists` where our routes meet that state: an owner proposes a
// trusted destination while one for the same address is still pending (its time lock running). Before, a second
// pending row was written beside the first. Concurrent proposals of one address leave exactly one pending.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ADMIN = 'time-lock-admin-token-0123456789abcdef0123456';
const admin = { authorization: `Bearer ${ADMIN}` };

describe('Hightop compatibility: pending_time_lock_exists (issue 26, item 11)', function () {
  let srv: TestServer;
  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
  });
  after(async () => srv?.close());

  const propose = (agentId: string, address: string, label = 'cold') =>
    srv.request('POST', `/v1/owner/agents/${agentId}/trusted-destinations`, { headers: admin, idempotencyKey: randomUUID(), body: { kind: 'crypto', chain: 'base', address, label } });
  const address = () => `0x${randomUUID().replace(/-/g, '').padEnd(40, '7')}`;

  it('refuses a second proposal of a pending address (any case) with 409 pending_time_lock_exists naming the pending one', async () => {
    const agent = await srv.createAgent();
    const to = address();
    const first = await propose(agent.agentId, to);
    expect(first.status, first.text).to.be.oneOf([200, 201]);
    const again = await propose(agent.agentId, to.toUpperCase().replace('0X', '0x'), 'cold again');
    expect(again.status, again.text).to.equal(409);
    expect(again.body.error.code).to.equal('pending_time_lock_exists');
    expect(again.body.error.details).to.include({ destination_id: first.body.destination_id });
    expect(again.body.error.details.confirmable_at).to.be.a('string');
    const list = await srv.request('GET', `/v1/owner/agents/${agent.agentId}/trusted-destinations`, { headers: admin });
    expect(list.body.items.filter((d: { address: string }) => d.address.toLowerCase() === to.toLowerCase())).to.have.length(1);
    // Another agent's pending proposal of the same address is its own.
    const other = await srv.createAgent();
    expect((await propose(other.agentId, to)).status).to.be.oneOf([200, 201]);
  });

  it('accepts the address again once the pending one is cancelled', async () => {
    const agent = await srv.createAgent();
    const to = address();
    const first = await propose(agent.agentId, to);
    const cancelled = await srv.request('POST', `/v1/owner/trusted-destinations/${first.body.destination_id}/cancel`, { headers: admin, idempotencyKey: randomUUID() });
    expect(cancelled.status, cancelled.text).to.equal(200);
    expect((await propose(agent.agentId, to)).status).to.be.oneOf([200, 201]);
  });

  it('concurrent proposals of one address leave exactly one pending, the others 409', async () => {
    const agent = await srv.createAgent();
    const to = address();
    const answers = await Promise.all(Array.from({ length: 6 }, () => propose(agent.agentId, to)));
    expect(answers.filter((r) => r.status < 300)).to.have.length(1);
    expect(answers.filter((r) => r.status === 409).map((r) => r.body.error.code)).to.deep.equal(Array(5).fill('pending_time_lock_exists'));
    const rows = await srv.db('trusted_destinations').where({ agent_id: agent.agentId, status: 'pending' });
    expect(rows).to.have.length(1);
  });
});
