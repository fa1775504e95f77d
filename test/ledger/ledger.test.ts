import { expect } from 'chai';
import { privateKeyToAccount } from 'viem/accounts';
import { createSealer } from '../../src/lib/crypto.js';
import { ApiError } from '../../src/lib/errors.js';
import { openWalletAccount } from '../../src/lib/wallet-keys.js';
import { assertBooksBalance, createLedgerFixture, makeAgent, MASTER_KEY, type LedgerFixture } from './factory.js';

describe('ledger core', () => {
  let f: LedgerFixture;
  before(async () => {
    f = await createLedgerFixture();
  });
  after(async () => f.close());

  it('gives each new wallet a sealed secp256k1 key whose address is the wallet address', async () => {
    const agent = await makeAgent(f);
    const wallet = await f.db('wallets').where({ id: agent.walletId }).first();
    expect(wallet.address).to.match(/^0x[0-9a-fA-F]{40}$/);
    expect(wallet.sealed_private_key).to.match(/^v1\./);
    expect(wallet.sealed_private_key).not.to.include(wallet.address.slice(2));
    const account = openWalletAccount(createSealer(MASTER_KEY), wallet.sealed_private_key);
    expect(account.address).to.equal(wallet.address);
    const raw = createSealer(MASTER_KEY).open(wallet.sealed_private_key) as `0x${string}`;
    expect(privateKeyToAccount(raw).address).to.equal(wallet.address);
    expect(() => createSealer('another-master-key-0123456789abcdef0000').open(wallet.sealed_private_key)).to.throw();
  });

  it('round-trips 18-decimal amounts above 2^53 base units exactly through deposit, hold and release', async () => {
    const agent = await makeAgent(f);
    const amount = '9007199254.740993123456789012';
    await f.area.account.fund(f.db, agent.agentId, { asset: 'ETH', amount });
    const units = 9007199254740993123456789012n;
    expect(units > 2n ** 53n).to.equal(true);
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'ETH')).to.deep.equal({ available: units, held: 0n });
    const { holdId } = await f.area.ledger.hold(f.db, { walletId: agent.walletId, asset: 'ETH', amount: units - 1n, operationId: null });
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'ETH')).to.deep.equal({ available: 1n, held: units - 1n });
    expect(await f.area.ledger.release(f.db, holdId)).to.equal(true);
    expect(await f.area.ledger.release(f.db, holdId)).to.equal(false);
    const page = await f.area.account.listBalances(f.db, agent, {});
    expect(page.items.find((b) => b.asset_symbol === 'ETH')).to.include({ available: amount, held: '0', total: amount });
    await assertBooksBalance(f.db, [agent.walletId]);
  });

  it('refuses a hold larger than the available balance with insufficient_funds and changes nothing', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '5' } });
    const err = await f.area.ledger.hold(f.db, { walletId: agent.walletId, asset: 'USDC', amount: 5_000_001n, operationId: null }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ApiError);
    expect((err as ApiError).code).to.equal('insufficient_funds');
    expect(await f.area.ledger.balance(f.db, agent.walletId, 'USDC')).to.deep.equal({ available: 5_000_000n, held: 0n });
  });

  it('rejects an unbalanced journal entry', async () => {
    const agent = await makeAgent(f);
    const err = await f.area.ledger
      .post(f.db, { operationId: null, entryType: 'test', postings: [{ account: { kind: 'available', walletId: agent.walletId }, asset: 'USDC', amount: 10n }] })
      .catch((e: unknown) => e);
    expect(String(err)).to.include('unbalanced');
  });

  it('keeps the journal append-only', async () => {
    const agent = await makeAgent(f, { fund: { USDC: '1' } });
    const err = await f
      .db('journal_entries')
      .where({ wallet_id: agent.walletId })
      .update({ amount: '0' })
      .catch((e: unknown) => e);
    expect(String(err)).to.include('append-only');
  });

  it('answers price_stale when the feed price is older than the bound, and values again after a fresh price', async () => {
    const agent = await makeAgent(f);
    const weth = await f.area.ledger.requireAsset(f.db, 'WETH');
    await f.area.ledger.setPrice(f.db, 'WETH', '2500.5', new Date(f.clock.now().getTime() - 2 * 3600_000));
    const err = await f.area.ledger.usdValue(f.db, weth, 10n ** 18n).catch((e: unknown) => e);
    expect((err as ApiError).code).to.equal('price_stale');
    await f.area.ledger.setPrice(f.db, 'WETH', '2500.5');
    expect(await f.area.ledger.usdValue(f.db, weth, 2n * 10n ** 18n)).to.equal(500_100_000_000n);
    await f.area.ledger.setPrice(f.db, 'WETH', '3000', null);
    expect(agent.agentId).to.be.a('string');
  });
});
