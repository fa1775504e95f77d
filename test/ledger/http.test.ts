import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { addr } from './factory.js';
import { checksumTables, snapshotRedis, startLedgerServer, type LedgerServer } from './http-server.js';

describe('ledger routes over HTTP (responses validated against the document)', () => {
  let s: LedgerServer;
  before(async () => {
    s = await startLedgerServer();
  });
  after(async () => s.close());

  describe('account reads', () => {
    it('getAccount, listAssets, listProtocols, listBalances and listCashBalances answer 200 with exact amounts', async () => {
      const agent = await s.agent({ fund: { USDC: '12.5', ETH: '0.000000000000000001' } });
      const account = await s.request('GET', '/v1/agent/account', { agent });
      expect(account.status).to.equal(200);
      expect(account.body.account).to.include({ cash_value_usd: '12.5', wallet_id: agent.walletId });
      const assets = await s.request('GET', '/v1/agent/assets?limit=2', { agent });
      expect(assets.status).to.equal(200);
      expect(assets.body.items).to.have.length(2);
      expect(assets.body.has_more).to.equal(true);
      const rest = await s.request('GET', `/v1/agent/assets?cursor=${assets.body.next_cursor}`, { agent });
      expect(rest.body.items.map((a: { symbol: string }) => a.symbol)).to.not.include(assets.body.items[0].symbol);
      expect((await s.request('GET', '/v1/agent/protocols', { agent })).status).to.equal(200);
      const balances = await s.request('GET', '/v1/agent/balances', { agent });
      expect(balances.status).to.equal(200);
      expect(balances.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'ETH')).to.include({ available: '0.000000000000000001' });
      const cash = await s.request('GET', '/v1/agent/balances/cash', { agent });
      expect(cash.status).to.equal(200);
      expect(cash.body.items.map((b: { asset_symbol: string }) => b.asset_symbol)).to.deep.equal(['EURC', 'USDC']);
      expect((await s.request('GET', '/v1/agent/assets?cursor=garbage', { agent })).status).to.equal(400);
    });

    it('getDepositAddress and listDepositMethods return the wallet address and the owner bank methods', async () => {
      const agent = await s.agent();
      await s.ledger.withdrawals.addMethod(s.db, agent.ownerId, { kind: 'bank', label: 'Checking' });
      const wallet = await s.db('wallets').where({ id: agent.walletId }).first();
      const address = await s.request('GET', '/v1/agent/deposit-address?asset=USDC&chain=base', { agent });
      expect(address.status).to.equal(200);
      expect(address.body.deposit_address).to.deep.equal({ address: wallet.address, chain: 'base', asset_symbol: 'USDC' });
      const methods = await s.request('GET', '/v1/agent/deposit-methods', { agent });
      expect(methods.status).to.equal(200);
      expect(methods.body.items.map((m: { kind: string }) => m.kind).sort()).to.deep.equal(['bank_transfer', 'crypto_transfer']);
    });
  });

  describe('createPayment', () => {
    it('answers the write response, then the operation reads show it executed with onchain details and activity', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const key = newKey();
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body: { to: addr(0xabc), asset: 'USDC', amount: '2.25', note: 'thanks' } });
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ ok: true, status: 'accepted', fee_usd: '0' });
      const replay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body: { to: addr(0xabc), asset: 'USDC', amount: '2.25', note: 'thanks' } });
      expect(replay.body.operation_id).to.equal(res.body.operation_id);
      await s.settle();
      const op = await s.request('GET', `/v1/agent/payments/${res.body.operation_id}?include=onchain`, { agent });
      expect(op.status).to.equal(200);
      expect(op.body.operation).to.include({ status: 'executed', amount: '2.25', amount_usd: '2.25', type: 'payment' });
      expect(op.body.operation.onchain.chain_id).to.equal(8453);
      expect((await s.request('GET', `/v1/agent/operations/${res.body.operation_id}`, { agent })).status).to.equal(200);
      expect((await s.request('GET', `/v1/agent/withdrawals/${res.body.operation_id}`, { agent })).status).to.equal(404);
      const list = await s.request('GET', '/v1/agent/operations?status=executed&type=payment', { agent });
      expect(list.body.items.map((o: { id: string }) => o.id)).to.deep.equal([res.body.operation_id]);
      expect((await s.request('GET', '/v1/agent/payments', { agent })).body.items).to.have.length(1);
      const activity = await s.request('GET', '/v1/agent/activity?type=payment', { agent });
      expect(activity.status).to.equal(200);
      expect(activity.body.items[0]).to.include({ direction: 'out', amount: '2.25', operation_id: res.body.operation_id });
      const deposits = await s.request('GET', '/v1/agent/activity?type=deposit', { agent });
      expect(deposits.body.items).to.have.length(1);
    });

    it('answers 403 with the policy code, records the rejection, and replays it for the same key', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'], per_tx_usd: '1', allowed_recipients: 'all' }, fund: { USDC: '10' } });
      const key = newKey();
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body: { to: addr(1), asset: 'USDC', amount: '2' } });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
      const replay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body: { to: addr(1), asset: 'USDC', amount: '2' } });
      expect(replay.status).to.equal(403);
      const ops = await s.request('GET', '/v1/agent/operations?status=policy_rejected', { agent });
      expect(ops.body.items).to.have.length(1);
      expect(ops.body.items[0].error.code).to.equal('limit_exceeded');
      const events = await s.db('events').where({ agent_id: agent.agentId });
      expect(events.map((e) => e.type)).to.deep.equal(['operation.policy_rejected']);
      const limits = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(limits.status).to.equal(200);
      expect(limits.body.limits).to.include({ per_tx_usd: '1', per_period_usd: null });
      expect(limits.body.usage).to.include({ period_txs: 0, lifetime_usd: '0' });
    });

    it('accepts exactly 50 of 200 concurrent HTTP payments on a wallet funded for 50 (rate limits raised)', async function () {
      this.timeout(60_000);
      const agent = await s.agent({ fund: { USDC: '50' } });
      await s.services.agents.setRateLimit(s.db, agent.agentId, { class: 'write', limit: 1000, burst: 1000, windowSeconds: 60 });
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(0x5000 + i), asset: 'USDC', amount: '1' } })),
      );
      expect(results.filter((r) => r.status === 200)).to.have.length(50);
      const refused = results.filter((r) => r.status !== 200);
      expect(refused.every((r) => r.status === 422 && r.body.error.code === 'insufficient_funds')).to.equal(true);
      await s.settle();
      const executed = await s.request('GET', '/v1/agent/payments?limit=100', { agent });
      expect(executed.body.items.filter((o: { status: string }) => o.status === 'executed')).to.have.length(50);
      const balance = (await s.request('GET', '/v1/agent/balances/cash', { agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC');
      expect(balance).to.include({ available: '0', held: '0' });
      const sums = (await s.db('journal_entries').select('asset_symbol').sum({ total: 'amount' }).groupBy('asset_symbol')) as unknown as { total: string }[];
      expect(sums.every((x) => BigInt(x.total) === 0n)).to.equal(true);
    });

    it('answers 422 insufficient_funds and 400 for both amounts', async () => {
      const agent = await s.agent({ fund: { USDC: '1' } });
      const poor = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(2), asset: 'USDC', amount: '2' } });
      expect(poor.status).to.equal(422);
      expect(poor.body.error.code).to.equal('insufficient_funds');
      const both = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(2), asset: 'USDC', amount: '1', amount_usd: '1' } });
      expect(both.status).to.equal(400);
    });
  });

  describe('one-off and recurring payments, recipients', () => {
    it('creates a one-off payment and lists recipients, recurring payments and a resolution', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const { recipient_id } = await s.ledger.payments.addRecipient(s.db, agent.agentId, { kind: 'recurring', name: 'Rent', address: addr(0x77) });
      const { recurring_payment_id } = await s.ledger.payments.addRecurring(s.db, agent.agentId, { recipientId: recipient_id, asset: 'USDC', amount: '3', interval: 'week' });
      const oneOff = await s.request('POST', '/v1/agent/one-off-payments', { agent, idempotencyKey: newKey(), body: { to: addr(0x78), asset: 'USDC', amount: '1', expires_in_seconds: 600 } });
      expect(oneOff.status).to.equal(200);
      expect(oneOff.body.resource.type).to.equal('one_off_payment');
      expect((await s.request('GET', `/v1/agent/one-off-payments/${oneOff.body.operation_id}`, { agent })).status).to.equal(200);
      expect((await s.request('GET', '/v1/agent/one-off-payments', { agent })).body.items).to.have.length(1);
      const recipients = await s.request('GET', '/v1/agent/recipients', { agent });
      expect(recipients.status).to.equal(200);
      expect(recipients.body.items[0]).to.include({ id: recipient_id, recurring_payment_id });
      expect((await s.request('GET', `/v1/agent/recipients/${recipient_id}`, { agent })).status).to.equal(200);
      expect((await s.request('GET', '/v1/agent/recurring-payments', { agent })).status).to.equal(200);
      const recurring = await s.request('GET', `/v1/agent/recurring-payments/${recurring_payment_id}`, { agent });
      expect(recurring.status).to.equal(200);
      expect(recurring.body.recurring_payment).to.include({ amount: '3', interval: 'week', to_address: addr(0x77) });
      const resolved = await s.request('POST', '/v1/agent/recipients/resolve', { agent, body: { to: 'rent' } });
      expect(resolved.status).to.equal(200);
      expect(resolved.body.resolution).to.include({ route: 'recurring_payment', recipient_id, allowed: true, reason: null });
    });
  });

  describe('trusted destinations and withdrawals', () => {
    it('refuses early confirm with 409, confirms later, withdraws to crypto and to the bank', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const { destination_id } = await s.ledger.destinations.add(s.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0xd5), label: 'Vault', timelockSeconds: 60 });
      const early = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: newKey() });
      expect(early.status).to.equal(409);
      expect(early.body.error.code).to.equal('time_delay_not_reached');
      s.clock.advance(60_000);
      const confirm = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: newKey() });
      expect(confirm.status).to.equal(200);
      const dest = await s.request('GET', `/v1/agent/trusted-destinations/${destination_id}`, { agent });
      expect(dest.body.trusted_destination.status).to.equal('confirmed');
      expect((await s.request('GET', '/v1/agent/trusted-destinations', { agent })).body.items).to.have.length(1);
      const cancel = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/cancel`, { agent, idempotencyKey: newKey() });
      expect(cancel.status).to.equal(409);
      expect(cancel.body.error.code).to.equal('invalid_state_transition');
      const crypto = await s.request('POST', '/v1/agent/withdrawals/to-crypto', { agent, idempotencyKey: newKey(), body: { destination_id, asset: 'USDC', amount: '1' } });
      expect(crypto.status).to.equal(200);
      const { method_id } = await s.ledger.withdrawals.addMethod(s.db, agent.ownerId, { kind: 'bank', label: 'Checking', last4: '1234' });
      expect((await s.request('GET', '/v1/agent/withdrawal-methods', { agent })).body.items[0]).to.include({ id: method_id, account_last4: '1234' });
      const bank = await s.request('POST', '/v1/agent/withdrawals/to-bank', { agent, idempotencyKey: newKey(), body: { method_id, asset: 'USDC', amount: '2' } });
      expect(bank.status).to.equal(200);
      await s.settle();
      const list = await s.request('GET', '/v1/agent/withdrawals', { agent });
      expect(list.body.items.map((o: { status: string }) => o.status)).to.deep.equal(['executed', 'executed']);
      const removed = await s.request('DELETE', `/v1/agent/trusted-destinations/${destination_id}`, { agent, idempotencyKey: newKey() });
      expect(removed.status).to.equal(200);
      const types = (await s.db('events').where({ agent_id: agent.agentId }).orderBy('created_at')).map((e) => e.type);
      expect(types).to.include.members(['trusted_destination.confirmed', 'trusted_destination.removed', 'withdrawal.settled']);
    });
  });

  describe('simulateRequest', () => {
    it('returns the would-be response and changes no table and no rate-limit key but its own', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      await s.request('GET', '/v1/agent/account', { agent });
      const tablesBefore = await checksumTables(s.db);
      const redisBefore = await snapshotRedis(s.config.redisPrefix, /simulate/);
      const ok = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(3), asset: 'USDC', amount: '1' } } });
      expect(ok.status).to.equal(200);
      expect(ok.body).to.include({ would_succeed: true, status: 200 });
      expect(ok.body.response).to.include({ status: 'accepted' });
      const poor = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(3), asset: 'USDC', amount: '50' } } });
      expect(poor.body).to.include({ would_succeed: false, status: 422 });
      expect(poor.body.error.code).to.equal('insufficient_funds');
      expect(poor.body.stages.find((x: { name: string }) => x.name === 'funds').outcome).to.equal('failed');
      const invalid = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { asset: 'USDC' } } });
      expect(invalid.body).to.include({ would_succeed: false, status: 400 });
      const missing = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/nowhere', body: {} } });
      expect(missing.body).to.include({ would_succeed: false, status: 404 });
      expect(await checksumTables(s.db)).to.deep.equal(tablesBefore);
      expect(await snapshotRedis(s.config.redisPrefix, /simulate/)).to.deep.equal(redisBefore);
    });

    it('reports a policy refusal without recording the policy_rejected operation', async () => {
      const agent = await s.agent({ policy: null, fund: { USDC: '5' } });
      const before = await checksumTables(s.db);
      const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(3), asset: 'USDC', amount: '1' } } });
      expect(res.body).to.include({ would_succeed: false, status: 403 });
      expect(res.body.stages.find((x: { name: string }) => x.name === 'policy')).to.include({ outcome: 'failed', code: 'permission_not_granted' });
      expect(await checksumTables(s.db)).to.deep.equal(before);
    });
  });
});
