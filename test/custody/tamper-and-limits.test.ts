// Issue 24, acceptance 3 and 6 on Anvil and Postgres. The agent's wallet is an AgentAccount whose owner signed a
// policy (per-tx 10 USD, period 30 USD, one payee). /self/limits shows the account's own caps and usage, and at the
// cap edge a payment of exactly the remaining allowance executes while one unit more is refused. Then the database
// mirror is tampered with (caps raised, recipients widened, an unconfirmed destination marked confirmed): paying 500
// USDC or withdrawing to that destination through the API moves nothing on chain (execution_failed, hold
// released), and reconcile reports the drift.
import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Address } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { randomAddress, startChainServer, type ChainServer, mintAndCredit } from '../helpers/chain.js';
import type { TestAgent } from '../helpers/server.js';

describe("custody: the account enforces the owner's limits, not the database", function () {
  this.timeout(180_000);
  let node: AnvilNode;
  let s: ChainServer & { dropDatabase(): Promise<void> };
  let agent: TestAgent;
  let account: Address;
  const payee = randomAddress();

  const pay = (body: Record<string, unknown>) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: randomUUID(), body });
  const limits = async () => (await s.request('GET', '/v1/agent/self/limits', { agent })).body;

  before(async () => {
    node = await startAnvil();
    s = await startChainServer(node, { env: { DATA_DIR: mkdtempSync(path.join(tmpdir(), 'custody-')) } });
    agent = await s.createAgent({});
    const wallet = await s.db('wallets').where({ id: agent.walletId }).first();
    expect(wallet.custody).to.equal('account');
    account = wallet.address as Address;
    // The owner's policy, relayed to the account as the owner's signed SetPolicy (the development owner key).
    await s.services.ledger.policy.set(s.db, agent.agentId, { operation_types: 'all', allowed_assets: ['USDC'], per_tx_usd: '10', per_period_usd: '30', allowed_recipients: [payee] });
    await mintAndCredit(s, agent.walletId, account, '1000');
  });
  after(async () => {
    await s?.close();
    await s?.dropDatabase();
    await node?.stop();
  });

  it("/self/limits shows the account's caps and usage; exactly the remaining allowance executes, one unit more is refused", async () => {
    const first = await limits();
    expect(first.limits).to.include({ per_tx_usd: '10', per_period_usd: '30' });
    expect(first.usage).to.include({ period_usd: '0', period_txs: 0 });
    for (const amount of ['10', '10']) {
      const res = await pay({ to: payee, asset: 'USDC', amount });
      expect(res.status).to.equal(200);
      const [op] = await s.settle([res.body.operation_id]);
      expect(op!.status).to.equal('executed');
    }
    // Read from the account: 20 of 30 used in this period.
    const state = await s.services.custody!.state(account);
    expect(state.usage!.periodUsd).to.equal(2_000_000_000n);
    expect((await limits()).usage).to.include({ period_usd: '20', period_txs: 2 });
    // One unit (0.000001 USDC) above the remaining 10 USD is refused; exactly 10 executes.
    const over = await pay({ to: payee, asset: 'USDC', amount: '10.000001' });
    expect(over.status).to.equal(403);
    expect(over.body.error.code).to.equal('limit_exceeded');
    const exact = await pay({ to: payee, asset: 'USDC', amount: '10' });
    const [op] = await s.settle([exact.body.operation_id]);
    expect(op!.status).to.equal('executed');
    expect(await s.usdcBalance(payee)).to.equal(30_000_000n);
    expect((await limits()).usage).to.include({ period_usd: '30', period_txs: 3 });
    expect((await s.services.custody!.state(account)).allowance!.periodRemainingUsd).to.equal(0n);
  });

  it('tampering with the database mirror moves nothing on chain, and reconcile reports the drift', async () => {
    const outsider = randomAddress();
    const { destination_id } = await s.services.ledger.destinations.add(s.db, agent.agentId, { kind: 'crypto', chain: 'base', address: outsider, label: 'Unconfirmed', timelockSeconds: 86_400 });
    expect(await s.services.ledger.policy.chainDrift(s.db, agent.agentId)).to.deep.equal([]);
    // The attacker raises the caps, widens the recipients and marks the destination confirmed, by SQL.
    await s
      .db('agent_policies')
      .where({ agent_id: agent.agentId })
      .update({ policy: JSON.stringify({ operation_types: 'all', allowed_assets: 'all', per_tx_usd: '1000000', per_period_usd: '1000000', allowed_recipients: 'all' }) });
    await s
      .db('trusted_destinations')
      .where({ id: destination_id })
      .update({ status: 'confirmed', confirmed_at: new Date(), confirmable_at: new Date(Date.now() - 1000) });
    const usdcBefore = await s.usdcBalance(account);

    const paid = await pay({ to: outsider, asset: 'USDC', amount: '500' });
    expect(paid.status).to.equal(200); // the tampered mirror lets it through; the account does not
    const withdrawn = await s.request('POST', '/v1/agent/withdrawals/to-crypto', { agent, idempotencyKey: randomUUID(), body: { destination_id, asset: 'USDC', amount: '400' } });
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).to.equal(200);
    const small = await pay({ to: randomAddress(), asset: 'USDC', amount: '1' });
    const ops = await s.settle([paid.body.operation_id, withdrawn.body.operation_id, small.body.operation_id]);
    for (const op of ops) {
      expect(op.status).to.equal('execution_failed');
      expect(op.tx_hash).to.equal(null); // refused by the lane call's eth_call: nothing was sent
    }
    // The outsider is a trusted destination still time-locked on chain (both 500 and 400 refused for it); the other
    // address is nobody the owner approved.
    const codes = new Map(ops.map((o) => [o.id, o.error_code]));
    expect(codes.get(paid.body.operation_id)).to.equal('time_delay_not_reached');
    expect(codes.get(withdrawn.body.operation_id)).to.equal('time_delay_not_reached');
    expect(codes.get(small.body.operation_id)).to.equal('recipient_not_allowed');
    expect(await s.usdcBalance(outsider)).to.equal(0n);
    expect(await s.usdcBalance(account)).to.equal(usdcBefore);
    const usdc = await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
    expect(usdc.held).to.equal(0n);

    // Confirming the destination early: the account's time lock answers.
    await s.db('trusted_destinations').where({ id: destination_id }).update({ status: 'pending', confirmed_at: null });
    const confirm = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: randomUUID() });
    expect(confirm.body.error.code).to.equal('time_delay_not_reached');
    await s.db('trusted_destinations').where({ id: destination_id }).update({ status: 'confirmed', confirmed_at: new Date() });

    const drift = await s.services.ledger.policy.chainDrift(s.db, agent.agentId);
    expect(drift.map((d) => d.kind).sort()).to.deep.equal(['policy', 'trusted_destination']);
    expect(drift.find((d) => d.kind === 'trusted_destination')).to.include({ destination_id, database: 'confirmed' });
  });
});
