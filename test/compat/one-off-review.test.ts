// Issue 26, item 3: one-off payments under the owner's instant threshold and review delay (policy keys
// one_off_instant_threshold_usd and one_off_review_delay_seconds), the agent's own delays working within them.
import { expect } from 'chai';
import { parsePolicy } from '../../src/services/ledger/policy-document.js';
import { newKey, type TestAgent } from '../helpers/server.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';

const TO = '0x00000000000000000000000000000000000e4d02';
const HOUR = 3600;

describe('createOneOffPayment under the owner review (issue 26)', function () {
  this.timeout(60_000);
  let s: LedgerServer;
  before(async () => {
    s = await startLedgerServer();
  });
  after(() => s.close());

  const owner = { operation_types: 'all', allowed_recipients: 'all', one_off_instant_threshold_usd: '100', one_off_review_delay_seconds: 2 * HOUR };
  const create = (agent: TestAgent, body: Record<string, unknown>) => s.request('POST', '/v1/agent/one-off-payments', { agent, idempotencyKey: newKey(), body: { to: TO, asset: 'USDC', ...body } });
  const oneOffOf = async (operationId: string) => s.db('one_off_payments').where({ operation_id: operationId }).first();

  it('clears a payment below the instant threshold at once', async () => {
    const agent = await s.agent({ policy: owner, fund: { USDC: '500' } });
    const res = await create(agent, { amount: '99.99' });
    expect(res.status, res.text).to.equal(200);
    const row = await oneOffOf(res.body.operation_id);
    expect(row.unlock_at.getTime()).to.equal(s.clock.now().getTime());
    await s.settle();
    const claimed = await s.ledger.payments.claimOneOff(s.db, row.id);
    expect(claimed.status).to.equal('claimed');
  });

  it('makes a payment at or above the threshold wait the review delay, cancellable by the owner meanwhile', async () => {
    const agent = await s.agent({ policy: owner, fund: { USDC: '500' } });
    const res = await create(agent, { amount: '100' });
    expect(res.status, res.text).to.equal(200);
    const row = await oneOffOf(res.body.operation_id);
    expect(row.unlock_at.getTime()).to.equal(s.clock.now().getTime() + 2 * HOUR * 1000);
    expect((await s.db('operations').where({ id: res.body.operation_id }).first()).details.review_delay_seconds).to.equal(2 * HOUR);
    await s.settle();
    try {
      await s.ledger.payments.claimOneOff(s.db, row.id);
      expect.fail('claimed during the review delay');
    } catch (e) {
      expect((e as { code: string }).code).to.equal('time_delay_not_reached');
    }
    const cancelled = await s.ledger.payments.cancelOneOff(s.db, row.id);
    expect(cancelled.status).to.equal('cancelled');
    expect(await s.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).to.deep.equal({ available: 500_000_000n, held: 0n });
  });

  it('keeps the agent unlock_delay_seconds and expires_in_seconds within the owner review', async () => {
    const agent = await s.agent({ policy: owner, fund: { USDC: '500' } });
    const now = s.clock.now().getTime();
    // Longer than the review delay: the agent's own delay wins.
    const longer = await create(agent, { amount: '150', unlock_delay_seconds: 3 * HOUR, expires_in_seconds: 5 * HOUR });
    expect(longer.status, longer.text).to.equal(200);
    const a = await oneOffOf(longer.body.operation_id);
    expect([a.unlock_at.getTime(), a.expires_at.getTime()]).to.deep.equal([now + 3 * HOUR * 1000, now + 5 * HOUR * 1000]);
    // Below the threshold the agent's delay alone applies.
    const small = await create(agent, { amount: '5', unlock_delay_seconds: 60 });
    expect((await oneOffOf(small.body.operation_id)).unlock_at.getTime()).to.equal(now + 60_000);
    // An expiry inside the review delay could never be claimed.
    const early = await create(agent, { amount: '150', expires_in_seconds: HOUR });
    expect(early.status, early.text).to.equal(400);
    expect(early.body.error.code).to.equal('validation_failed');
    expect(early.body.error.message).to.contain("owner's review delay");
    // Without an expiry the default week runs from the end of the review.
    const dflt = await create(agent, { amount: '150' });
    expect((await oneOffOf(dflt.body.operation_id)).expires_at.getTime()).to.equal(now + (2 * HOUR + 604_800) * 1000);
  });

  it('leaves one-off payments instant without a review delay, and validates the keys', async () => {
    const agent = await s.agent({ policy: { operation_types: 'all', allowed_recipients: 'all' }, fund: { USDC: '500' } });
    const res = await create(agent, { amount: '400' });
    expect((await oneOffOf(res.body.operation_id)).unlock_at.getTime()).to.equal(s.clock.now().getTime());
    expect(() => parsePolicy({ operation_types: 'all', one_off_review_delay_seconds: 31 * 86_400 })).to.throw(/one_off_review_delay_seconds/);
    expect(() => parsePolicy({ operation_types: 'all', one_off_instant_threshold_usd: 5 })).to.throw(/one_off_instant_threshold_usd/);
  });
});
