// Audit of the money routes against the spec and contract (§1, §8, §9, §10, §13, §14, simulate).
import { createSealer } from '../../src/lib/crypto.js';
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from '../defi/http-helpers.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { createX402Service } from '../../src/services/x402/service.js';
import { SELLER_PAY_TO, startSeller, type Seller } from '../x402/seller.js';

const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const OPERATION_KEYS = [
  'id',
  'type',
  'status',
  'resource',
  'asset_symbol',
  'amount',
  'amount_usd',
  'fee_usd',
  'human_message',
  'idempotency_key_hash',
  'error',
  'created_at',
  'submitted_at',
  'executed_at',
  'failed_at',
].sort();
const WRITE_KEYS = ['ok', 'operation_id', 'status', 'resource', 'fee_usd', 'human_message'].sort();

describe('audit: money routes', () => {
  let s: DefiServer;
  before(async () => {
    s = await startDefiServer();
  });
  after(async () => s.close());

  const events = async (agentId: string) => (await s.db('events').where({ agent_id: agentId }).orderBy('created_at', 'asc')) as { type: string; operation_id: string | null }[];

  describe('createPayment', () => {
    it('answers 403 permission_not_granted for a fresh agent, records the rejection with its event, and replays it', async () => {
      const agent = await s.agent({ policy: null, funds: { USDC: '10' } });
      const key = newKey();
      const body = { to: addr(0xabc), asset: 'USDC', amount: '1' };
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('permission_not_granted');
      const replay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body });
      expect(replay.status).to.equal(403);
      expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(replay.body).to.deep.equal(res.body);
      const ops = await s.request('GET', '/v1/agent/operations?status=policy_rejected', { agent });
      expect(ops.body.items).to.have.length(1);
      expect(ops.body.items[0]).to.include({ status: 'policy_rejected', type: 'payment', idempotency_key_hash: sha(key) });
      expect(ops.body.items[0].error.code).to.equal('permission_not_granted');
      const ev = await events(agent.agentId);
      expect(ev.map((e) => e.type)).to.deep.equal(['operation.policy_rejected']);
      expect(ev[0]!.operation_id).to.equal(ops.body.items[0].id);
    });

    it('answers exactly the write response and the operation has exactly the contract fields', async () => {
      const agent = await s.agent({ funds: { USDC: '10' } });
      const key = newKey();
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: key, body: { to: addr(0xabd), asset: 'USDC', amount: '1.5' } });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(WRITE_KEYS);
      const op = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}`, { agent });
      expect(Object.keys(op.body.operation).sort()).to.deep.equal(OPERATION_KEYS);
      expect(op.body.operation.idempotency_key_hash).to.equal(sha(key));
      expect(op.body.operation.amount).to.equal('1.5');
      await s.settle();
      await s.settle();
      const onchain = await s.request('GET', `/v1/agent/operations/${res.body.operation_id}?include=onchain`, { agent });
      expect(onchain.body.operation.status).to.equal('executed');
      expect(onchain.body.operation.onchain).to.include.keys('chain_id', 'wallet_address', 'tx_hash');
      expect(onchain.body.operation.onchain.chain_id).to.equal(8453);
      expect(onchain.body.operation.onchain.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      const ev = await events(agent.agentId);
      expect(ev.map((e) => e.type)).to.deep.equal(['payment.executed']);
    });

    it('refuses both and neither of amount and amount_usd with validation_failed', async () => {
      const agent = await s.agent({ funds: { USDC: '10' } });
      const both = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(1), asset: 'USDC', amount: '1', amount_usd: '1' } });
      expect(both.status).to.equal(400);
      expect(both.body.error.code).to.equal('validation_failed');
      const neither = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(1), asset: 'USDC' } });
      expect(neither.status).to.equal(400);
      const num = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(1), asset: 'USDC', amount: 1 } });
      expect(num.status).to.equal(400);
    });
  });

  describe('resource-specific lists and details', () => {
    it('return only operations of their own family', async () => {
      const agent = await s.agent({ funds: { USDC: '100', ETH: '1' } });
      const pay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(0x51), asset: 'USDC', amount: '1' } });
      const oneOff = await s.request('POST', '/v1/agent/one-off-payments', { agent, idempotencyKey: newKey(), body: { to: addr(0x52), asset: 'USDC', amount: '1' } });
      const { method_id } = await s.services.ledger.withdrawals.addMethod(s.db, agent.ownerId, { kind: 'bank', label: 'Checking' });
      const wd = await s.request('POST', '/v1/agent/withdrawals/to-bank', { agent, idempotencyKey: newKey(), body: { method_id, asset: 'USDC', amount: '1' } });
      const quote = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'ETH', amount: '3' } });
      expect(quote.status, JSON.stringify(quote.body)).to.equal(200);
      const conv = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: quote.body.quote.quote_id } });
      for (const r of [pay, oneOff, wd, conv]) expect(r.status, JSON.stringify(r.body)).to.equal(200);
      const families: [string, string, string[]][] = [
        ['/v1/agent/payments', pay.body.operation_id, ['payment']],
        ['/v1/agent/one-off-payments', oneOff.body.operation_id, ['one_off_payment.create']],
        ['/v1/agent/withdrawals', wd.body.operation_id, ['withdrawal.bank']],
        ['/v1/agent/conversions', conv.body.operation_id, ['conversion']],
      ];
      for (const [path, id, types] of families) {
        const list = await s.request('GET', path, { agent });
        expect(list.status).to.equal(200);
        expect(
          list.body.items.map((o: { id: string }) => o.id),
          path,
        ).to.deep.equal([id]);
        expect(list.body.items.map((o: { type: string }) => o.type)).to.deep.equal(types);
        for (const [otherPath, otherId] of families) {
          const detail = await s.request('GET', `${path}/${otherId}`, { agent });
          expect(detail.status, `${path}/${otherPath}`).to.equal(otherPath === path ? 200 : 404);
          if (otherPath === path) expect(Object.keys(detail.body).sort()).to.deep.equal(['ok', 'operation']);
        }
      }
      const all = await s.request('GET', '/v1/agent/operations?type=payment', { agent });
      expect(all.body.items.map((o: { id: string }) => o.id)).to.deep.equal([pay.body.operation_id]);
      const accepted = await s.request('GET', '/v1/agent/operations?status=accepted', { agent });
      expect(accepted.body.items).to.have.length(4);
      const future = new Date(s.clock.now().getTime() + 1000).toISOString();
      expect((await s.request('GET', `/v1/agent/operations?since=${encodeURIComponent(future)}`, { agent })).body.items).to.have.length(0);
      expect((await s.request('GET', '/v1/agent/operations?status=bogus', { agent })).status).to.equal(400);
      expect((await s.request('GET', '/v1/agent/operations?since=yesterday', { agent })).status).to.equal(400);
      await s.settle();
      await s.settle();
      const act = await s.request('GET', '/v1/agent/activity?type=payment', { agent });
      expect(act.status).to.equal(200);
      expect(act.body.items.map((a: { operation_id: string }) => a.operation_id)).to.deep.equal([pay.body.operation_id]);
      expect((await s.request('GET', `/v1/agent/activity?since=${encodeURIComponent(future)}`, { agent })).body.items).to.have.length(0);
      const ev = (await events(agent.agentId)).map((e) => e.type).sort();
      expect(ev).to.deep.equal(['conversion.executed', 'one_off_payment.created', 'payment.executed', 'withdrawal.settled']);
    });
  });

  describe('trusted destinations', () => {
    it('confirm waits for the time lock, transitions are guarded and each emits its event', async () => {
      const agent = await s.agent({ funds: { USDC: '100' } });
      const { destination_id } = await s.services.ledger.destinations.add(s.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0x77), label: 'Cold', timelockSeconds: 3600 });
      const early = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: newKey() });
      expect(early.status).to.equal(409);
      expect(early.body.error.code).to.equal('time_delay_not_reached');
      const pendingWd = await s.request('POST', '/v1/agent/withdrawals/to-crypto', { agent, idempotencyKey: newKey(), body: { destination_id, asset: 'USDC', amount: '1' } });
      expect(pendingWd.status).to.equal(409);
      expect(pendingWd.body.error.code).to.equal('invalid_state_transition');
      s.clock.advance(3600_000);
      const ok = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: newKey() });
      expect(ok.status).to.equal(200);
      expect(Object.keys(ok.body).sort()).to.deep.equal(WRITE_KEYS);
      expect(ok.body.resource).to.deep.equal({ type: 'trusted_destination', id: destination_id });
      const again = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/confirm`, { agent, idempotencyKey: newKey() });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('invalid_state_transition');
      const cancel = await s.request('POST', `/v1/agent/trusted-destinations/${destination_id}/cancel`, { agent, idempotencyKey: newKey() });
      expect(cancel.body.error.code).to.equal('invalid_state_transition');
      const detail = await s.request('GET', `/v1/agent/trusted-destinations/${destination_id}`, { agent });
      expect(detail.body.trusted_destination.status).to.equal('confirmed');
      const wd = await s.request('POST', '/v1/agent/withdrawals/to-crypto', { agent, idempotencyKey: newKey(), body: { destination_id, asset: 'USDC', amount: '1' } });
      expect(wd.status).to.equal(200);
      const del = await s.request('DELETE', `/v1/agent/trusted-destinations/${destination_id}`, { agent, idempotencyKey: newKey() });
      expect(del.status).to.equal(200);
      await s.settle();
      await s.settle();
      const ev = (await events(agent.agentId)).map((e) => e.type);
      expect(ev).to.include.members(['trusted_destination.confirmed', 'trusted_destination.removed', 'withdrawal.settled']);
      const { owner_id } = await s.services.agents.createOwner(s.db, { email: `audit-${newKey()}@example.com` });
      const stranger = await s.createAgent({ ownerId: owner_id });
      await s.services.ledger.policy.allowAll(s.db, stranger.agentId);
      const foreign = await s.request('POST', '/v1/agent/withdrawals/to-bank', {
        agent: stranger,
        idempotencyKey: newKey(),
        body: { method_id: (await s.services.ledger.withdrawals.addMethod(s.db, agent.ownerId, { kind: 'bank', label: 'X' })).method_id, asset: 'USDC', amount: '1' },
      });
      expect(foreign.status).to.equal(404);
    });
  });

  describe('conversions', () => {
    it('quotes are single use, expire after 60 s, and execution re-prices', async () => {
      const agent = await s.agent({ funds: { USDC: '10000' } });
      const q = async (extra: Record<string, unknown> = {}) =>
        s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'ETH', amount: '300', ...extra } });
      const first = await q();
      expect(first.status).to.equal(200);
      expect(first.body.quote.expires_in_seconds).to.equal(60);
      const exec = (id: string) => s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: id } });
      expect((await exec(first.body.quote.quote_id)).status).to.equal(200);
      const twice = await exec(first.body.quote.quote_id);
      expect(twice.status).to.equal(409);
      expect(twice.body.error.code).to.equal('quote_already_consumed');
      const late = await q();
      s.clock.advance(61_000);
      const expired = await exec(late.body.quote.quote_id);
      expect(expired.status).to.equal(409);
      expect(expired.body.error.code).to.equal('quote_expired');
      const slip = await q({ slippage_percent: 1 });
      const before = await s.db('prices').where({ asset_symbol: 'ETH' }).first();
      try {
        await s.services.ledger.ledger.setPrice(s.db, 'ETH', '3100');
        const r = await exec(slip.body.quote.quote_id);
        expect(r.status).to.equal(422);
        expect(r.body.error.code).to.equal('slippage_exceeded');
        await s.services.ledger.ledger.setPrice(s.db, 'ETH', '3000', new Date(s.clock.now().getTime() - 2 * 3600_000));
        const stale = await q();
        expect(stale.status).to.equal(422);
        expect(stale.body.error.code).to.equal('price_stale');
      } finally {
        await s.db('prices').where({ asset_symbol: 'ETH' }).update(before);
      }
    });
  });

  describe('createConversion', () => {
    it('commits no vault redemption with a policy refusal of a conversion out of a vault', async () => {
      const agent = await s.agent({ funds: { USDC: '1000' } });
      const vault = (await s.request('GET', '/v1/agent/earn/opportunities', { agent })).body.items.find((v: { asset_symbol: string }) => v.asset_symbol === 'USDC');
      expect((await s.request('POST', '/v1/agent/earn/deposit', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', vault_id: vault.vault_id, amount: '500' } })).status).to.equal(200);
      const position = async () => (await s.request('GET', '/v1/agent/earn', { agent })).body.items[0].shares;
      const shares = await position();
      const quote = await s.request('POST', '/v1/agent/conversions/quote', {
        agent,
        idempotencyKey: newKey(),
        body: { from_asset: 'USDC', to_asset: 'ETH', from_vault_address: vault.vault_address, amount: '300' },
      });
      expect(quote.status, JSON.stringify(quote.body)).to.equal(200);
      await s.services.ledger.policy.set(s.db, agent.agentId, { operation_types: 'all', per_tx_usd: '100' });
      const res = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: quote.body.quote.quote_id } });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
      expect(await position()).to.equal(shares);
      expect(await s.services.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).to.deep.equal({ available: 500_000_000n, held: 0n });
      const rejected = await s.request('GET', '/v1/agent/conversions', { agent });
      expect(rejected.body.items.map((o: { status: string }) => o.status)).to.deep.equal(['policy_rejected']);
    });
  });

  describe('simulateRequest', () => {
    it('answers 200 with would_succeed and stages, and changes nothing', async () => {
      const agent = await s.agent({ funds: { USDC: '10' } });
      const okSim = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(9), asset: 'USDC', amount: '1' } } });
      expect(okSim.status).to.equal(200);
      expect(okSim.body).to.include({ ok: true, would_succeed: true });
      expect(Object.keys(okSim.body.response).sort()).to.deep.equal(WRITE_KEYS);
      expect(okSim.body.stages.map((x: { name: string }) => x.name)).to.include.members(['validation', 'policy', 'funds']);
      const bad = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(9), asset: 'USDC', amount: '100' } } });
      expect(bad.status).to.equal(200);
      expect(bad.body.would_succeed).to.equal(false);
      expect(bad.body.error.code).to.equal('insufficient_funds');
      expect(bad.body).to.not.have.property('response');
      const fresh = await s.agent({ policy: null, funds: { USDC: '10' } });
      const denied = await s.request('POST', '/v1/agent/simulate', { agent: fresh, body: { method: 'POST', path: '/v1/agent/payments', body: { to: addr(9), asset: 'USDC', amount: '1' } } });
      expect(denied.body.error.code).to.equal('permission_not_granted');
      expect(await s.db('operations').whereIn('agent_id', [agent.agentId, fresh.agentId])).to.have.length(0);
      expect(await events(fresh.agentId)).to.have.length(0);
    });
  });

  describe('getSelfLimits', () => {
    it('shows caps and usage counting accepted operations', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'], per_period_usd: '5', period: 'day', allowed_recipients: 'all' }, funds: { USDC: '100' } });
      expect((await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(3), asset: 'USDC', amount: '3' } })).status).to.equal(200);
      const over = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(3), asset: 'USDC', amount_usd: '3' } });
      expect(over.status).to.equal(403);
      expect(over.body.error.code).to.equal('limit_exceeded');
      const limits = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(limits.status).to.equal(200);
      expect(limits.body.limits).to.include({ per_period_usd: '5', period: 'day', per_tx_usd: null });
      expect(limits.body.usage).to.include({ period_usd: '3', period_txs: 1 });
      const other = await s.request('POST', '/v1/agent/one-off-payments', { agent, idempotencyKey: newKey(), body: { to: addr(3), asset: 'USDC', amount: '1' } });
      expect(other.body.error.code).to.equal('permission_not_granted');
    });
  });

  describe('execution failures', () => {
    it('emit failure events only for payment, conversion and withdrawal', async () => {
      const agent = await s.agent({ funds: { USDC: '100' } });
      const bad = addr(0xdead01);
      await s.services.ledger.ledger.setFailingAddress(s.db, bad, true);
      const pay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: bad, asset: 'USDC', amount: '1' } });
      expect(pay.status).to.equal(200);
      await s.settle();
      await s.settle();
      const op = await s.request('GET', `/v1/agent/payments/${pay.body.operation_id}`, { agent });
      expect(op.body.operation.status).to.equal('execution_failed');
      expect(op.body.operation.failed_at).to.be.a('string');
      const ev = await events(agent.agentId);
      expect(ev.map((e) => e.type)).to.deep.equal(['payment.execution_failed']);
      expect(ev[0]!.operation_id).to.equal(pay.body.operation_id);
      const bal = await s.request('GET', '/v1/agent/balances', { agent });
      expect(bal.body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC')).to.include({ available: '100', held: '0' });
    });
  });

  describe('amount flags', () => {
    it('refuses an amount beside withdraw_all: true', async () => {
      const agent = await s.agent({ funds: { USDC: '100' } });
      const r = await s.request('POST', '/v1/agent/earn/withdraw', { agent, idempotencyKey: newKey(), body: { position_id: '0b9f3c52-6f7e-4b8e-9d1a-3c2f1e0d4a5b', withdraw_all: true, amount: '1' } });
      expect(r.status).to.equal(400);
      const lower = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: addr(1), asset: 'usdc', amount: '1' } });
      expect(lower.status).to.equal(400);
      expect(lower.body.error.code).to.equal('validation_failed');
    });
  });

  describe('DeFi families', () => {
    it('emit their executed events and no failure events; policy refusals are recorded', async () => {
      const agent = await s.agent({ funds: { USDC: '10000', WETH: '10' } });
      const opp = await s.request('GET', '/v1/agent/earn/opportunities', { agent });
      const vault = opp.body.items.find((v: { asset_symbol: string }) => v.asset_symbol === 'USDC');
      const dep = await s.request('POST', '/v1/agent/earn/deposit', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', vault_id: vault.vault_id, amount: '100' } });
      expect(dep.status, JSON.stringify(dep.body)).to.equal(200);
      await s.settle();
      await s.settle();
      const pos = (await s.request('GET', '/v1/agent/earn', { agent })).body.items[0];
      const wd = await s.request('POST', '/v1/agent/earn/withdraw', { agent, idempotencyKey: newKey(), body: { position_id: pos.id, amount: '10' } });
      expect(wd.status, JSON.stringify(wd.body)).to.equal(200);
      const col = await s.request('POST', '/v1/agent/borrow/collateral/add', { agent, idempotencyKey: newKey(), body: { asset: 'WETH', amount: '1' } });
      expect(col.status, JSON.stringify(col.body)).to.equal(200);
      await s.settle();
      await s.settle();
      const bor = await s.request('POST', '/v1/agent/borrow', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', amount: '100', max_ltv_after: 0.5 } });
      expect(bor.status, JSON.stringify(bor.body)).to.equal(200);
      await s.settle();
      await s.settle();
      const rep = await s.request('POST', '/v1/agent/borrow/repay', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', amount: '10' } });
      expect(rep.status, JSON.stringify(rep.body)).to.equal(200);
      const tooHigh = await s.request('POST', '/v1/agent/borrow', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', amount: '2000', max_ltv_after: 0.1 } });
      expect(tooHigh.status).to.equal(403);
      expect(tooHigh.body.error.code).to.equal('ltv_too_high');
      await s.settle();
      await s.settle();
      const ev = (await events(agent.agentId)).map((e) => e.type);
      expect(ev).to.include.members(['earn.deposit.executed', 'earn.withdraw.executed', 'collateral.added', 'debt.borrowed', 'debt.repaid']);
      const ops = await s.request('GET', '/v1/agent/operations?limit=100', { agent });
      for (const o of ops.body.items) expect(Object.keys(o).sort()).to.deep.equal(OPERATION_KEYS);
      const fresh = await s.agent({ policy: null });
      const denied = await s.request('POST', '/v1/agent/earn/deposit', { agent: fresh, idempotencyKey: newKey(), body: { asset: 'USDC', vault_id: vault.vault_id, amount: '100' } });
      expect(denied.status).to.equal(403);
      expect(denied.body.error.code).to.equal('permission_not_granted');
      expect((await events(fresh.agentId)).map((e) => e.type)).to.deep.equal(['operation.policy_rejected']);
      const deniedQuote = await s.request('POST', '/v1/agent/conversions/quote', { agent: fresh, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'ETH', amount: '1' } });
      expect(deniedQuote.status).to.equal(403);
      expect(deniedQuote.body.error.code).to.equal('permission_not_granted');
    });
  });

  describe('policy precedence', () => {
    it('decides type, then asset, then recipient, then caps', async () => {
      const agent = await s.agent({
        policy: { operation_types: ['payment', 'conversion', 'earn.deposit'], allowed_assets: ['USDC'], allowed_recipients: [addr(5)], allowed_protocols: ['morpho'], per_tx_usd: '2' },
        funds: { USDC: '100', ETH: '1' },
      });
      const pay = (body: Record<string, unknown>) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body });
      expect((await pay({ to: addr(6), asset: 'ETH', amount: '1' })).body.error.code).to.equal('asset_not_allowed');
      expect((await pay({ to: addr(6), asset: 'USDC', amount: '5' })).body.error.code).to.equal('recipient_not_allowed');
      expect((await pay({ to: addr(5), asset: 'USDC', amount: '5' })).body.error.code).to.equal('limit_exceeded');
      const ow = await s.request('POST', '/v1/agent/one-off-payments', { agent, idempotencyKey: newKey(), body: { to: addr(6), asset: 'ETH', amount: '5' } });
      expect(ow.body.error.code).to.equal('permission_not_granted');
      // The seeded Aave v3 USDC vault (migration 0005): a protocol outside the allow-list. Other tests add vaults, so pin it.
      const aaveUsdcVault = '6f1d2a10-0000-4000-8000-000000000002';
      const dep = await s.request('POST', '/v1/agent/earn/deposit', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', vault_id: aaveUsdcVault, amount: '1' } });
      expect(dep.body.error.code).to.equal('protocol_not_allowed');
      const insufficient = await pay({ to: addr(5), asset: 'USDC', amount: '1000' });
      expect(insufficient.body.error.code).to.equal('limit_exceeded');
    });
  });

  describe('one-off payments', () => {
    it('hold funds at creation and release them at expiry', async () => {
      const agent = await s.agent({ funds: { USDC: '10' } });
      const r = await s.request('POST', '/v1/agent/one-off-payments', {
        agent,
        idempotencyKey: newKey(),
        body: { to: addr(0x99), asset: 'USDC', amount: '4', unlock_delay_seconds: 10, expires_in_seconds: 120 },
      });
      expect(r.status).to.equal(200);
      expect(r.body.resource.type).to.equal('one_off_payment');
      const usdc = async () => (await s.request('GET', '/v1/agent/balances', { agent })).body.items.find((b: { asset_symbol: string }) => b.asset_symbol === 'USDC');
      expect(await usdc()).to.include({ available: '6', held: '4' });
      await s.settle();
      await s.settle();
      s.clock.advance(121_000);
      await s.services.ledger.payments.expireOneOffs(s.db);
      expect(await usdc()).to.include({ available: '10', held: '0' });
      const op = await s.request('GET', `/v1/agent/one-off-payments/${r.body.operation_id}`, { agent });
      expect(op.body.operation.status).to.equal('executed');
      expect((await events(agent.agentId)).map((e) => e.type)).to.deep.equal(['one_off_payment.created']);
      const act = await s.request('GET', '/v1/agent/activity?type=one_off_payment.expire', { agent });
      expect(act.body.items).to.have.length(1);
    });
  });
});

describe('audit: simulateRequest of x402 writes', function () {
  this.timeout(30_000);
  let s: LedgerServer;
  let seller: Seller;
  before(async () => {
    s = await startLedgerServer({ UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' });
    s.clock.set(new Date());
    seller = await startSeller();
    (s.services as { x402: unknown }).x402 = createX402Service({ config: s.config, sealer: createSealer(s.config.masterKey), clock: s.clock, ledger: s.ledger, ca: seller.ca });
  });
  after(async () => {
    await seller.close();
    await s.close();
  });

  it('signs nothing and pays nothing when simulating x402 sign and purchase', async () => {
    const agent = await s.agent({ fund: { USDC: '3' } });
    const sign = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/x402/sign', body: { pay_to: SELLER_PAY_TO, amount: '250000' } } });
    expect(sign.status).to.equal(200);
    expect(sign.body.would_succeed, JSON.stringify(sign.body)).to.equal(true);
    expect(sign.body.response.payment_header).to.equal('');
    const before = seller.requests.length;
    const buy = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/x402/purchase', body: { url: seller.url('/v1/report'), max_amount: '1000000' } } });
    expect(buy.status).to.equal(200);
    expect(buy.body.would_succeed, JSON.stringify(buy.body)).to.equal(true);
    expect(buy.body.response).to.include({ paid: false, settled: false });
    expect(seller.requests.slice(before).filter((r) => JSON.stringify(r).match(/x-payment|payment-signature/i))).to.have.length(0);
    expect(seller.settlements).to.have.length(0);
    expect(await s.db('operations').where({ agent_id: agent.agentId })).to.have.length(0);
    expect(await s.ledger.ledger.balance(s.db, agent.walletId, 'USDC')).to.deep.equal({ available: 3_000_000n, held: 0n });
  });
});
