import { expect } from 'chai';
import { ApiError } from '../../src/lib/errors.js';
import { addr, assertBooksBalance, createLedgerFixture, makeAgent, Refused, settleAll, type LedgerFixture } from './factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);

describe('createPayment', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('accepts exactly 50 of 200 concurrent payments on a wallet funded for 50, executes them, and balances the books', async function () {
    this.timeout(60_000);
    const agent = await makeAgent(f, { fund: { USDC: '50' } });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        f.area.payments.createPayment(f.db, agent, { to: addr(1000 + i), asset: 'USDC', amount: '1' }, `key-${i}`).then(
          (r) => ({ ok: true as const, r }),
          (e: unknown) => ({ ok: false as const, code: codeOf(e) }),
        ),
      ),
    );
    const accepted = results.filter((r) => r.ok);
    const refused = results.filter((r) => !r.ok);
    expect(accepted).to.have.length(50);
    expect(new Set(refused.map((r) => (r.ok ? '' : r.code)))).to.deep.equal(new Set(['insufficient_funds']));
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 0n, held: 50_000_000n });
    await settleAll(f);
    const ops = await f.db('operations').where({ agent_id: agent.agentId });
    expect(ops).to.have.length(50);
    expect(ops.every((o) => o.status === 'executed')).to.equal(true);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 0n, held: 0n });
    const events = await f.db('events').where({ agent_id: agent.agentId, type: 'payment.executed' });
    expect(events).to.have.length(50);
    const negatives = await f.db('balances').where('available', '<', 0).orWhere('held', '<', 0);
    expect(negatives).to.have.length(0);
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('ends execution_failed with payment.execution_failed and releases the hold when the chain fails the address', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '10' } });
    const bad = addr(0xbad);
    await f.area.ledger.setFailingAddress(f.db, bad, true);
    const res = await f.area.payments.createPayment(f.db, agent, { to: bad, asset: 'USDC', amount: '4' }, 'k-fail');
    expect(res.status).to.equal('accepted');
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 6_000_000n, held: 4_000_000n });
    await settleAll(f);
    const op = await f.area.operations.get(f.db, agent.agentId, res.operation_id, { include: ['onchain'] });
    expect(op.status).to.equal('execution_failed');
    expect(op.error?.code).to.equal('settlement_failed');
    expect(op.failed_at).to.be.a('string');
    expect(op.onchain?.to_address).to.equal(bad);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 10_000_000n, held: 0n });
    const events = await f.db('events').where({ operation_id: res.operation_id });
    expect(events.map((e) => e.type)).to.deep.equal(['payment.execution_failed']);
    const envelope = JSON.parse(events[0].payload);
    expect(envelope).to.include({ type: 'payment.execution_failed', agent_id: agent.agentId, wallet_id: agent.walletId, operation_id: res.operation_id });
    expect(envelope.data.operation.status).to.equal('execution_failed');
    const activity = await f.db('activity').where({ operation_id: res.operation_id });
    expect(activity.map((a) => a.status)).to.deep.equal(['execution_failed']);
    await f.area.ledger.setFailingAddress(f.db, bad, false);
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('credits the receiving wallet when the address belongs to another agent', async () => {
    const payer = await makeAgent(f, { fund: { USDC: '10' } });
    const payee = await makeAgent(f);
    const payeeWallet = await f.db('wallets').where({ id: payee.walletId }).first();
    const res = await f.area.payments.createPayment(f.db, payer, { to: payeeWallet.address, asset: 'USDC', amount: '2.5' }, 'k-internal');
    await settleAll(f);
    expect((await f.area.operations.get(f.db, payer.agentId, res.operation_id)).status).to.equal('executed');
    expect(await f.area.ledger.balance(f.db, payee.walletId, 'USDC')).to.deep.equal({ available: 2_500_000n, held: 0n });
    const received = await f.db('activity').where({ agent_id: payee.agentId, type: 'payment.received' });
    expect(received).to.have.length(1);
    await assertBooksBalance(f.db, [payer.walletId, payee.walletId]);
  });

  it('delivers another asset at the feed price when deliver_as differs, and fails on slippage when the price moved', async () => {
    const payer = await makeAgent(f, { fund: { USDC: '100' } });
    const payee = await makeAgent(f);
    const payeeAddress = (await f.db('wallets').where({ id: payee.walletId }).first()).address;
    await f.area.ledger.setPrice(f.db, 'EURC', '1.08', null);
    const ok = await f.area.payments.createPayment(f.db, payer, { to: payeeAddress, asset: 'USDC', amount: '54', deliver_as: 'EURC', slippage_percent: 1 }, 'k-conv');
    await settleAll(f);
    expect((await f.area.operations.get(f.db, payer.agentId, ok.operation_id)).status).to.equal('executed');
    expect(await f.area.ledger.balance(f.db, payee.walletId, 'EURC')).to.deep.equal({ available: 50_000_000n, held: 0n });

    const slipping = await f.area.payments.createPayment(f.db, payer, { to: payeeAddress, asset: 'USDC', amount: '10.8', deliver_as: 'EURC', slippage_percent: 1 }, 'k-conv-2');
    await f.area.ledger.setPrice(f.db, 'EURC', '1.2', null);
    await settleAll(f);
    const failed = await f.area.operations.get(f.db, payer.agentId, slipping.operation_id);
    expect(failed.status).to.equal('execution_failed');
    expect(failed.error?.code).to.equal('slippage_exceeded');
    expect(await f.area.ledger.balance(f.db, payer.walletId, 'USDC')).to.deep.equal({ available: 46_000_000n, held: 0n });
    await f.area.ledger.setPrice(f.db, 'EURC', '1.08', null);
    await assertBooksBalance(f.db, [payer.walletId, payee.walletId]);
  });

  it('answers validation_failed when both or neither of amount and amount_usd are given, and converts amount_usd at the price', async () => {
    const agent = await makeAgent(f, { fund: { ETH: '1' } });
    for (const body of [{}, { amount: '1', amount_usd: '1' }]) {
      // Bodies the document's types refuse: callers outside HTTP get the same answer from the service.
      const invalid = { to: addr(7), asset: 'ETH', ...body } as unknown as Parameters<typeof f.area.payments.createPayment>[2];
      const err = await f.area.payments.createPayment(f.db, agent, invalid, null).catch((e: unknown) => e);
      expect(codeOf(err)).to.equal('validation_failed');
    }
    const res = await f.area.payments.createPayment(f.db, agent, { to: addr(7), asset: 'ETH', amount_usd: '300' }, null);
    const op = await f.area.operations.get(f.db, agent.agentId, res.operation_id);
    expect(op).to.include({ amount: '0.1', amount_usd: '300', asset_symbol: 'ETH' });
  });

  it('routes to a recurring payee with prefer=recurring_payment and refuses a route `to` does not have', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '20' } });
    const { recipient_id } = await f.area.payments.addRecipient(f.db, agent.agentId, { kind: 'recurring', name: 'Landlord', address: addr(0x1a) });
    const { recurring_payment_id } = await f.area.payments.addRecurring(f.db, agent.agentId, { recipientId: recipient_id, asset: 'USDC', amount: '5', interval: 'month' });
    const res = await f.area.payments.createPayment(f.db, agent, { to: addr(0x1a), asset: 'USDC', amount: '5', prefer: 'recurring_payment' }, null);
    const row = await f.db('operations').where({ id: res.operation_id }).first();
    expect(row.details).to.include({ route: 'recurring_payment', recipient_id, recurring_payment_id });
    const err = await f.area.payments.createPayment(f.db, agent, { to: addr(0x1a), asset: 'USDC', amount: '5', prefer: 'trusted_destination' }, null).catch((e: unknown) => e);
    expect(codeOf(err)).to.equal('validation_failed');
    const missing = await f.area.payments.createPayment(f.db, agent, { to: '3f1c2b7e-0000-4000-8000-000000000000', asset: 'USDC', amount: '5' }, null).catch((e: unknown) => e);
    expect(codeOf(missing)).to.equal('not_found');
  });
});

describe('policy', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('denies by default, records a policy_rejected operation and writes operation.policy_rejected', async () => {
    const agent = await makeAgent(f, { policy: null, fund: { USDC: '10' } });
    const err = await f.area.payments.createPayment(f.db, agent, { to: addr(1), asset: 'USDC', amount: '1' }, 'k1').catch((e: unknown) => e);
    expect(codeOf(err)).to.equal('permission_not_granted');
    expect(err).to.be.instanceOf(Refused);
    const ops = await f.db('operations').where({ agent_id: agent.agentId });
    expect(ops.map((o) => [o.status, o.error_code])).to.deep.equal([['policy_rejected', 'permission_not_granted']]);
    const events = await f.db('events').where({ agent_id: agent.agentId });
    expect(events.map((e) => e.type)).to.deep.equal(['operation.policy_rejected']);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 10_000_000n, held: 0n });
  });

  it('applies precedence: type, then asset, then recipient, then caps', async () => {
    const agent = await makeAgent(f, { policy: { operation_types: ['payment'], allowed_assets: ['USDC'], allowed_recipients: [addr(5)], per_tx_usd: '3' }, fund: { USDC: '10', EURC: '10' } });
    const attempt = (body: Record<string, string>) => f.area.payments.createPayment(f.db, agent, { to: addr(5), asset: 'USDC', amount: '1', ...body } as never, null).catch((e: unknown) => codeOf(e));
    expect(await f.area.payments.createOneOffPayment(f.db, agent, { to: addr(5), asset: 'USDC', amount: '1' }, null).catch((e: unknown) => codeOf(e))).to.equal('permission_not_granted');
    expect(await attempt({ asset: 'EURC', to: addr(6) })).to.equal('asset_not_allowed');
    expect(await attempt({ to: addr(6), amount: '5' })).to.equal('recipient_not_allowed');
    expect(await attempt({ amount: '5' })).to.equal('limit_exceeded');
    const ok = await attempt({ amount: '3' });
    expect(ok).to.have.property('status', 'accepted');
  });

  it('never accepts more than the period cap under 100 concurrent writes', async function () {
    this.timeout(60_000);
    const agent = await makeAgent(f, { policy: { operation_types: 'all', per_period_usd: '10', period: 'day', allowed_recipients: 'all' }, fund: { USDC: '1000' } });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        f.area.payments.createPayment(f.db, agent, { to: addr(i + 1), asset: 'USDC', amount: '1' }, `cap-${i}`).then(
          () => 'accepted',
          (e: unknown) => codeOf(e),
        ),
      ),
    );
    expect(results.filter((r) => r === 'accepted')).to.have.length(10);
    expect(results.filter((r) => r === 'limit_exceeded')).to.have.length(90);
    const limits = await f.area.policy.limits(f.db, agent.agentId);
    expect(limits.usage).to.include({ period_usd: '10', period_txs: 10 });
    expect(await f.db('operations').where({ agent_id: agent.agentId, status: 'policy_rejected' }).count('* as n').first()).to.deep.equal({ n: 90 });
  });

  it('never accepts more than the lifetime cap or the count cap under concurrent writes (usage read after the lock)', async function () {
    this.timeout(60_000);
    const lifetime = await makeAgent(f, { policy: { operation_types: 'all', lifetime_usd: '7', allowed_recipients: 'all' }, fund: { USDC: '1000' } });
    const counted = await makeAgent(f, { policy: { operation_types: 'all', max_txs_per_period: 6, period: 'month', allowed_recipients: 'all' }, fund: { USDC: '1000' } });
    const burst = (agent: typeof lifetime, tag: string) =>
      Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          f.area.payments.createPayment(f.db, agent, { to: addr(i + 1), asset: 'USDC', amount: '1' }, `${tag}-${i}`).then(
            () => 'accepted',
            (e: unknown) => codeOf(e),
          ),
        ),
      );
    const [a, b] = await Promise.all([burst(lifetime, 'life'), burst(counted, 'count')]);
    expect(a.filter((r) => r === 'accepted')).to.have.length(7);
    expect(a.filter((r) => r === 'limit_exceeded')).to.have.length(53);
    expect(b.filter((r) => r === 'accepted')).to.have.length(6);
    expect(b.filter((r) => r === 'limit_exceeded')).to.have.length(54);
  });

  it('counts pending operations and frees nothing on execution, but a failed settlement no longer counts', async () => {
    const agent = await makeAgent(f, { policy: { operation_types: 'all', max_txs_per_period: 2, allowed_recipients: 'all' }, fund: { USDC: '10' } });
    const bad = addr(0xdead);
    await f.area.ledger.setFailingAddress(f.db, bad, true);
    await f.area.payments.createPayment(f.db, agent, { to: bad, asset: 'USDC', amount: '1' }, null);
    await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null);
    expect(await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null).catch((e: unknown) => codeOf(e))).to.equal('limit_exceeded');
    await settleAll(f);
    const again = await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null);
    expect(again.status).to.equal('accepted');
    await f.area.ledger.setFailingAddress(f.db, bad, false);
  });

  it('resets the daily count at the next UTC day', async () => {
    const agent = await makeAgent(f, { policy: { operation_types: 'all', max_txs_per_period: 1, period: 'day', allowed_recipients: 'all' }, fund: { USDC: '10' } });
    await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null);
    expect(await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null).catch((e: unknown) => codeOf(e))).to.equal('limit_exceeded');
    f.clock.advance(24 * 3600_000);
    expect((await f.area.payments.createPayment(f.db, agent, { to: addr(2), asset: 'USDC', amount: '1' }, null)).status).to.equal('accepted');
  });

  it('refuses a policy file with unknown keys or malformed amounts', () => {
    expect(() => f.area.policy.parse({ operation_types: 'all', per_tx_usd: 5 })).to.throw(ApiError);
    expect(() => f.area.policy.parse({ operation_types: ['payment', 'teleport'] })).to.throw(ApiError);
    expect(() => f.area.policy.parse({ operation_types: 'all', surprise: true })).to.throw(ApiError);
    expect(f.area.policy.parse({ operation_types: 'all', per_tx_usd: '12.5' }).per_tx_usd).to.equal(1_250_000_000n);
  });
});
