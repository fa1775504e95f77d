// Issue 26, item 2 and acceptance 3: a payment draws on Earn when the wallet's own balance of the asset is short.
import { expect } from 'chai';
import { newKey, type TestAgent } from '../helpers/server.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';

const PAYEE = '0x00000000000000000000000000000000000e4d01';
const USDC = 1_000_000n;

describe('createPayment drawing on Earn (issue 26)', function () {
  this.timeout(60_000);
  let s: LedgerServer;
  before(async () => {
    s = await startLedgerServer();
  });
  after(async () => {
    await s.db('earn_vaults').where('name', 'like', 'draw %').update({ active: false });
    await s.close();
  });

  const vault = (apyBps = 500) => s.services.defi.earn.addVault(s.db, { name: `draw ${Math.random().toString(36).slice(2, 8)}`, protocol: 'morpho', asset: 'USDC', apyBps, capacity: null });
  /** An agent whose wallet holds `wallet` USDC and whose Earn positions hold `positions` (one per vault, deposited through the route). */
  async function agentWith(wallet: string, positions: { vaultId: string; amount: string }[]): Promise<TestAgent & { positionIds: string[] }> {
    const total = positions.reduce((sum, p) => sum + Number(p.amount), Number(wallet));
    const agent = await s.agent({ fund: { USDC: String(total) } });
    const positionIds: string[] = [];
    for (const p of positions) {
      const dep = await s.request('POST', '/v1/agent/earn/deposit', { agent, idempotencyKey: newKey(), body: { asset: 'USDC', vault_id: p.vaultId, amount: p.amount } });
      expect(dep.status, dep.text).to.equal(200);
      positionIds.push(dep.body.resource.id);
    }
    return Object.assign(agent, { positionIds });
  }
  const pay = (agent: TestAgent, amount: string) => s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: PAYEE, asset: 'USDC', amount } });
  const balance = (agent: TestAgent) => s.ledger.ledger.balance(s.db, agent.walletId, 'USDC');
  const positionWorth = async (agent: TestAgent, id: string) => {
    const res = await s.request('GET', `/v1/agent/earn/${id}`, { agent });
    expect(res.status, res.text).to.equal(200);
    return res.body.position.value as string;
  };
  const usage = async (agent: TestAgent) => {
    const res = await s.request('GET', '/v1/agent/self/limits', { agent });
    expect(res.status, res.text).to.equal(200);
    return res.body.current_usage as { total_txs: number; total_spent_usd: string };
  };

  it('pays 80 USDC from 50 in the wallet and 40 in a position, leaves 10 in the position and counts 80 once', async () => {
    const v = await vault();
    const agent = await agentWith('50', [{ vaultId: v.vault_id, amount: '40' }]);
    expect(await balance(agent)).to.deep.equal({ available: 50n * USDC, held: 0n });
    const before = await usage(agent);

    const res = await pay(agent, '80');
    expect(res.status, res.text).to.equal(200);
    const op = await s.db('operations').where({ id: res.body.operation_id }).first();
    const { address } = await s.db('earn_vaults').where({ id: v.vault_id }).first();
    expect(op.details.drawn_from_earn).to.deep.equal([
      { position_id: agent.positionIds[0], vault_id: v.vault_id, vault: address, amount: (30n * USDC).toString(), shares: op.details.drawn_from_earn[0].shares },
    ]);
    expect(await balance(agent)).to.deep.equal({ available: 0n, held: 80n * USDC });
    expect(await positionWorth(agent, agent.positionIds[0]!)).to.equal('10');

    const after = await usage(agent);
    expect(after.total_txs - before.total_txs).to.equal(1);
    expect(Number(after.total_spent_usd) - Number(before.total_spent_usd)).to.equal(80);
    // Only the payment is an operation of this request: the redemption is journalled under it.
    expect(await s.db('operations').where({ agent_id: agent.agentId, type: 'earn.withdraw' })).to.have.length(0);
    const legs = await s.db('journal_entries').where({ operation_id: op.id, entry_type: 'earn.withdraw' });
    expect(legs.map((l) => BigInt(l.amount)).reduce((a, b) => a + b, 0n)).to.equal(0n);

    await s.settle();
    const settled = await s.request('GET', `/v1/agent/operations/${op.id}`, { agent });
    expect(settled.body.operation.status, settled.text).to.equal('executed');
    expect(await balance(agent)).to.deep.equal({ available: 0n, held: 0n });
    expect(await positionWorth(agent, agent.positionIds[0]!)).to.equal('10');
  });

  it('is insufficient_funds with 70 in wallet plus Earn, and nothing moves', async () => {
    const v = await vault();
    const agent = await agentWith('50', [{ vaultId: v.vault_id, amount: '20' }]);
    const snapshot = async () => ({
      balance: await balance(agent),
      positions: await s.db('earn_positions').where({ wallet_id: agent.walletId }).select('id', 'shares', 'principal'),
      vault: await s.db('earn_vaults').where({ id: v.vault_id }).select('total_assets', 'total_shares').first(),
      journal: (await s.db('journal_entries').where({ wallet_id: agent.walletId }).count({ n: '*' }))[0],
      operations: await s.db('operations').where({ agent_id: agent.agentId }).select('id', 'status'),
      usage: await usage(agent),
    });
    const before = await snapshot();
    const res = await pay(agent, '80');
    expect(res.status, res.text).to.equal(422);
    expect(res.body.error.code).to.equal('insufficient_funds');
    expect(await snapshot()).to.deep.equal(before);
  });

  it('draws on the best position first and pays from the wallet alone when it suffices', async () => {
    const [low, high] = [await vault(300), await vault(900)];
    const agent = await agentWith('10', [
      { vaultId: low.vault_id, amount: '20' },
      { vaultId: high.vault_id, amount: '5' },
    ]);
    const res = await pay(agent, '30');
    expect(res.status, res.text).to.equal(200);
    const op = await s.db('operations').where({ id: res.body.operation_id }).first();
    expect(op.details.drawn_from_earn.map((d: { vault_id: string; amount: string }) => [d.vault_id, d.amount])).to.deep.equal([
      [high.vault_id, (5n * USDC).toString()],
      [low.vault_id, (15n * USDC).toString()],
    ]);
    expect(await positionWorth(agent, agent.positionIds[0]!)).to.equal('5');

    const plain = await agentWith('10', [{ vaultId: low.vault_id, amount: '10' }]);
    const small = await pay(plain, '10');
    expect(small.status, small.text).to.equal(200);
    expect((await s.db('operations').where({ id: small.body.operation_id }).first()).details).to.not.have.property('drawn_from_earn');
    expect(await positionWorth(plain, plain.positionIds[0]!)).to.equal('10');
  });

  it('two payments racing for one position: one draws, the other is insufficient_funds, no balance goes negative', async () => {
    const v = await vault();
    const agent = await agentWith('50', [{ vaultId: v.vault_id, amount: '40' }]);
    const results = await Promise.all([pay(agent, '60'), pay(agent, '60')]);
    expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join('\n')).to.deep.equal([200, 422]);
    expect(results.find((r) => r.status === 422)!.body.error.code).to.equal('insufficient_funds');
    expect(await balance(agent)).to.deep.equal({ available: 0n, held: 60n * USDC });
    expect(await positionWorth(agent, agent.positionIds[0]!)).to.equal('30');
    const position = await s.db('earn_positions').where({ id: agent.positionIds[0] }).first();
    expect(BigInt(position.shares) >= 0n).to.equal(true);
    const negative = await s
      .db('balances')
      .where({ wallet_id: agent.walletId })
      .andWhere((q) => q.where('available', '<', 0).orWhere('held', '<', 0));
    expect(negative).to.have.length(0);
  });
});
