import { expect } from 'chai';
import { ApiError } from '../../src/lib/errors.js';
import { addr, assertBooksBalance, createLedgerFixture, makeAgent, settleAll, type LedgerFixture } from './factory.js';

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : `unexpected: ${String(err)}`);

describe('trusted destinations and withdrawals', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('confirms only after the time lock, emits each trusted_destination event, and refuses wrong states', async () => {
    const agent = await makeAgent(f);
    const { destination_id } = await f.area.destinations.add(f.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd1), label: 'Cold', timelockSeconds: 3600 });
    expect(codeOf(await f.area.destinations.act(f.db, agent, destination_id, 'confirm').catch((e: unknown) => e))).to.equal('time_delay_not_reached');
    expect(codeOf(await f.area.destinations.act(f.db, agent, destination_id, 'remove').catch((e: unknown) => e))).to.equal('invalid_state_transition');
    f.clock.advance(3600_000);
    const confirmed = await f.area.destinations.act(f.db, agent, destination_id, 'confirm', { idempotencyKey: 'c1' });
    expect(confirmed).to.include({ status: 'executed' });
    expect(confirmed.resource).to.deep.equal({ type: 'trusted_destination', id: destination_id });
    expect((await f.area.destinations.get(f.db, agent.agentId, destination_id)).status).to.equal('confirmed');
    expect(codeOf(await f.area.destinations.act(f.db, agent, destination_id, 'cancel').catch((e: unknown) => e))).to.equal('invalid_state_transition');
    await f.area.destinations.act(f.db, agent, destination_id, 'remove');
    const events = await f.db('events').where({ agent_id: agent.agentId }).orderBy('created_at');
    expect(events.map((e) => e.type)).to.deep.equal(['trusted_destination.confirmed', 'trusted_destination.removed']);
    expect(JSON.parse(events[0].payload).data.trusted_destination.status).to.equal('confirmed');
  });

  it('lets the owner cancel with the same event and no agent policy', async () => {
    const agent = await makeAgent(f, { policy: null });
    const { destination_id } = await f.area.destinations.add(f.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd2), label: 'Maybe', timelockSeconds: 0 });
    expect(codeOf(await f.area.destinations.act(f.db, agent, destination_id, 'cancel').catch((e: unknown) => e))).to.equal('permission_not_granted');
    expect((await f.area.destinations.get(f.db, agent.agentId, destination_id)).status).to.equal('pending');
    await f.area.destinations.actAsOwner(f.db, destination_id, 'cancel');
    expect((await f.area.destinations.get(f.db, agent.agentId, destination_id)).status).to.equal('cancelled');
    const types = (await f.db('events').where({ agent_id: agent.agentId }).orderBy('created_at')).map((e) => e.type);
    expect(types).to.deep.equal(['operation.policy_rejected', 'trusted_destination.cancelled']);
  });

  it('withdraws to crypto only to a confirmed destination, and settles with withdrawal.settled', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '20' } });
    const { destination_id } = await f.area.destinations.add(f.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd3), label: 'Treasury', timelockSeconds: 0 });
    expect(codeOf(await f.area.withdrawals.createCryptoWithdrawal(f.db, agent, { destination_id, asset: 'USDC', amount: '5' }, null).catch((e: unknown) => e))).to.equal('invalid_state_transition');
    await f.area.destinations.act(f.db, agent, destination_id, 'confirm');
    const res = await f.area.withdrawals.createCryptoWithdrawal(f.db, agent, { destination_id, asset: 'USDC', amount: '5' }, null);
    await settleAll(f);
    expect((await f.area.operations.get(f.db, agent.agentId, res.operation_id)).status).to.equal('executed');
    expect((await f.db('events').where({ operation_id: res.operation_id })).map((e) => e.type)).to.deep.equal(['withdrawal.settled']);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 15_000_000n, held: 0n });
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('fails a crypto withdrawal to a failing address with withdrawal.execution_failed', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '20' } });
    const { destination_id } = await f.area.destinations.add(f.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd4), label: 'Broken', timelockSeconds: 0 });
    await f.area.destinations.act(f.db, agent, destination_id, 'confirm');
    await f.area.ledger.setFailingAddress(f.db, addr(0xd4), true);
    const res = await f.area.withdrawals.createCryptoWithdrawal(f.db, agent, { destination_id, asset: 'USDC', amount: '5' }, null);
    await settleAll(f);
    expect((await f.db('events').where({ operation_id: res.operation_id })).map((e) => e.type)).to.deep.equal(['withdrawal.execution_failed']);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 20_000_000n, held: 0n });
  });

  it("withdraws to the owner's bank method only, in cash assets", async () => {
    const agent = await makeAgent(f, { fund: { USDC: '20', ETH: '1' } });
    const other = await makeAgent(f);
    const { method_id } = await f.area.withdrawals.addMethod(f.db, agent.ownerId, { kind: 'bank', label: 'Checking' });
    const { method_id: foreign } = await f.area.withdrawals.addMethod(f.db, other.ownerId, { kind: 'bank', label: 'Not yours' });
    expect(codeOf(await f.area.withdrawals.createBankWithdrawal(f.db, agent, { method_id: foreign, asset: 'USDC', amount: '1' }, null).catch((e: unknown) => e))).to.equal('not_found');
    expect(codeOf(await f.area.withdrawals.createBankWithdrawal(f.db, agent, { method_id, asset: 'ETH', amount: '0.1' }, null).catch((e: unknown) => e))).to.equal('validation_failed');
    const res = await f.area.withdrawals.createBankWithdrawal(f.db, agent, { method_id, asset: 'USDC', amount_usd: '12.5' }, 'bank-1');
    await settleAll(f);
    const op = await f.area.operations.get(f.db, agent.agentId, res.operation_id);
    expect(op).to.include({ status: 'executed', type: 'withdrawal.bank', amount: '12.5' });
    expect(op.idempotency_key_hash).to.match(/^[0-9a-f]{64}$/);
    const methods = await f.area.withdrawals.listMethods(f.db, agent.ownerId, {});
    expect(methods.items.map((m) => m.id)).to.deep.equal([method_id]);
  });

  it('makes a crypto withdrawal wait for a removal in progress, then refuses it', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '100' } });
    const { destination_id } = await f.area.destinations.add(f.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd7), label: 'Racing', timelockSeconds: 0 });
    await f.area.destinations.act(f.db, agent, destination_id, 'confirm');
    const removal = await f.db.transaction();
    try {
      await f.area.destinations.act(removal, agent, destination_id, 'remove');
      const withdrawal = f.area.withdrawals.createCryptoWithdrawal(f.db, agent, { destination_id, asset: 'USDC', amount: '5' }, null).then(
        () => 'accepted',
        (e: unknown) => codeOf(e),
      );
      const early = await Promise.race([withdrawal, new Promise((r) => setTimeout(() => r('waiting'), 300))]);
      expect(early, 'the withdrawal must wait for the destination row').to.equal('waiting');
      await removal.commit();
      expect(await withdrawal).to.equal('invalid_state_transition');
    } finally {
      if (!removal.isCompleted()) await removal.rollback();
    }
  });
});
