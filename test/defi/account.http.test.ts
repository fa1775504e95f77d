// GET /v1/agent/account values what the wallet holds outside its balances: earn, collateral and debt.
import { expect } from 'chai';
import { newKey } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from './http-helpers.js';

describe('getAccount', () => {
  let s: DefiServer;
  before(async () => {
    s = await startDefiServer();
  });
  after(async () => {
    await s.db('earn_vaults').where('name', 'like', 'account %').update({ active: false });
    await s.close();
  });

  it('values earn, collateral and debt, and nets them into net worth when the wallet holds all three', async () => {
    // WETH is priced at 3000 USD by the feed: 2 WETH of collateral is 6000 USD.
    const agent = await s.agent({ funds: { USDC: '1500', WETH: '2' } });
    const vault = await s.services.defi.earn.addVault(s.db, { name: `account ${newKey()}`, protocol: 'morpho', asset: 'USDC', apyBps: 500, capacity: null, rewardAsset: null });
    const post = async (path: string, body: Record<string, unknown>) => {
      const res = await s.request('POST', `/v1/agent/${path}`, { agent, body, idempotencyKey: newKey() });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
    };
    await post('earn/deposit', { asset: 'USDC', vault_id: vault.vault_id, amount: '500' });
    await post('borrow/collateral/add', { asset: 'WETH', amount: '2' });
    await post('borrow', { asset: 'USDC', amount: '1000', max_ltv_after: 0.5 });
    await s.settle();

    const res = await s.request('GET', '/v1/agent/account', { agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    // Wallet: 1500 - 500 deposited + 1000 borrowed = 2000 USDC.
    expect(res.body.account).to.include({ total_value_usd: '2000', earn_value_usd: '500', collateral_value_usd: '6000', debt_usd: '1000', net_worth_usd: '7500' });
  });

  it('reads zero holdings and net worth equal to the wallet when the agent holds no positions', async () => {
    const agent = await s.agent({ funds: { USDC: '42' } });
    const res = await s.request('GET', '/v1/agent/account', { agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.account).to.include({ total_value_usd: '42', earn_value_usd: '0', collateral_value_usd: '0', debt_usd: '0', net_worth_usd: '42' });
  });
});
