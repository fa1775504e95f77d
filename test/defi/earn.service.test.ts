// Earn vaults on the ledger: deposits, interest from the clock, withdrawals, moves, capacity, rewards and policy.
import { expect } from 'chai';
import fc from 'fast-check';
import { parseAmount } from '../../src/lib/money.js';
import { defiCommands } from '../../src/cli/defi.js';
import type { CliContext } from '../../src/cli/types.js';
import { createDefiHarness, errorCode, type DefiHarness } from './helpers.js';

const E6 = 10n ** 6n;
const YEAR_MS = 365 * 24 * 3600 * 1000;

describe('earn (service)', () => {
  let h: DefiHarness;
  before(async () => {
    h = await createDefiHarness();
  });
  after(async () => {
    await h.db('earn_vaults').where('name', 'like', 'test %').update({ active: false });
    await h.close();
  });

  const vault = (opts: { apyBps?: number; capacity?: string; rewardBps?: number; protocol?: string; asset?: string } = {}) =>
    h.defi.earn.addVault(h.db, {
      name: `test ${Math.random().toString(36).slice(2, 8)}`,
      protocol: opts.protocol ?? 'morpho',
      asset: opts.asset ?? 'USDC',
      apyBps: opts.apyBps ?? 500,
      capacity: opts.capacity ?? null,
      rewardAsset: opts.rewardBps ? 'USDC' : null,
      rewardBps: opts.rewardBps,
    });

  describe('createEarnDeposit', () => {
    it('mints shares 1:10^6 into an empty vault and shows the position', async () => {
      const who = await h.newAgent();
      const v = await vault();
      const res = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '1000' }, 'k');
      expect(res.status).to.equal('executed');
      expect(res.resource.type).to.equal('earn_position');
      const p = await h.defi.earn.getPosition(h.db, who, res.resource.id);
      expect(p).to.include({ vault_id: v.vault_id, shares: '1000', value: '1000', principal: '1000', earned: '0', apy: 0.05, asset_symbol: 'USDC' });
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9000n * E6);
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'earn.deposit.executed' })).to.have.length(1);
    });

    it('picks the highest-APY vault with room when use_best_available is set', async () => {
      const who = await h.newAgent({ funds: { EURC: '1000' } });
      const full = await vault({ asset: 'EURC', apyBps: 9900, capacity: '10' });
      const best = await vault({ asset: 'EURC', apyBps: 9800 });
      const res = await h.defi.earn.deposit(h.db, who, { asset: 'EURC', use_best_available: true, amount: '100' }, 'k');
      const p = await h.defi.earn.getPosition(h.db, who, res.resource.id);
      expect(p.vault_id).to.equal(best.vault_id);
      expect(p.vault_id).to.not.equal(full.vault_id);
    });

    it('refuses with limit_exceeded above the vault capacity', async () => {
      const who = await h.newAgent();
      const v = await vault({ capacity: '500' });
      expect(await errorCode(() => h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '500.000001' }, 'k'))).to.equal('limit_exceeded');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(10_000n * E6);
    });

    it('refuses with insufficient_funds beyond the wallet balance', async () => {
      const who = await h.newAgent({ funds: { USDC: '10' } });
      const v = await vault();
      expect(await errorCode(() => h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '11' }, 'k'))).to.equal('insufficient_funds');
    });

    it('records protocol_not_allowed for a vault outside the allowed protocols', async () => {
      const who = await h.newAgent({ policy: { operation_types: 'all', allowed_protocols: ['aave-v3'] } });
      const v = await vault({ protocol: 'morpho' });
      const code = await h.db.transaction(async (trx) => errorCode(() => h.defi.earn.deposit(trx, who, { asset: 'USDC', vault_id: v.vault_id, amount: '1' }, 'k')));
      expect(code).to.equal('protocol_not_allowed');
      expect(await h.db('operations').where({ agent_id: who.agentId, status: 'policy_rejected', type: 'earn.deposit' })).to.have.length(1);
    });
  });

  describe('createEarnWithdrawal', () => {
    it('pays a year of 5 % APY on withdraw_all, never more', async () => {
      const who = await h.newAgent();
      const v = await vault({ apyBps: 500 });
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '1000' }, 'k');
      h.clock.advance(YEAR_MS);
      const p = await h.defi.earn.getPosition(h.db, who, dep.resource.id);
      // A' = floor(1000 · 1.05) − 1 unit of truncation; (A'+1)/(S+10^6) of 10^15 shares floors once more.
      expect(p.earned).to.equal('49.999998');
      await h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, withdraw_all: true }, 'k2');
      const after = await h.balance(who.walletId, 'USDC');
      expect(after <= 10_050n * E6 && after >= 10_049n * E6, String(after)).to.equal(true);
      expect((await h.defi.earn.listPositions(h.db, who, {})).items).to.have.length(0);
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'earn.withdraw.executed' })).to.have.length(1);
    });

    it('withdraws an exact amount and refuses more than the position is worth', async () => {
      const who = await h.newAgent();
      const v = await vault();
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '100' }, 'k');
      await h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, amount: '40' }, 'k2');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9940n * E6);
      expect(await errorCode(() => h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, amount: '60.000001' }, 'k3'))).to.equal('insufficient_funds');
      expect(await errorCode(() => h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, amount: '1', withdraw_all: true }, 'k4'))).to.equal('validation_failed');
    });

    it('pays out another asset only with allow_conversion', async () => {
      const who = await h.newAgent();
      const v = await vault();
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '108' }, 'k');
      expect(await errorCode(() => h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, withdraw_all: true, destination_asset: 'EURC' }, 'k2'))).to.equal('validation_failed');
      await h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, amount: '108', destination_asset: 'EURC', allow_conversion: true }, 'k3');
      // 108 USDC at 1.08 USD/EURC = 100 EURC, less 0.3 %
      expect(await h.balance(who.walletId, 'EURC')).to.equal(99_700_000n);
    });

    it('answers not_found for a position of another agent', async () => {
      const who = await h.newAgent();
      const other = await h.newAgent();
      const v = await vault();
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '1' }, 'k');
      expect(await errorCode(() => h.defi.earn.withdraw(h.db, other, { position_id: dep.resource.id, withdraw_all: true }, 'k2'))).to.equal('not_found');
    });
  });

  describe('createEarnMove', () => {
    it('moves a position between vaults in one transaction', async () => {
      const who = await h.newAgent();
      const a = await vault({ apyBps: 100 });
      const b = await vault({ apyBps: 200 });
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: a.vault_id, amount: '300' }, 'k');
      const res = await h.defi.earn.move(h.db, who, { from_position_id: dep.resource.id, to_vault_id: b.vault_id, amount: '100' }, 'k2');
      expect(res.status).to.equal('executed');
      const from = await h.defi.earn.getPosition(h.db, who, dep.resource.id);
      const to = await h.defi.earn.getPosition(h.db, who, res.resource.id);
      expect(from.value).to.equal('200');
      expect(to).to.include({ vault_id: b.vault_id, principal: '100' });
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9700n * E6);
      await h.defi.earn.move(h.db, who, { from_position_id: dep.resource.id, to_vault_id: b.vault_id, move_all: true }, 'k3');
      expect((await h.defi.earn.getPosition(h.db, who, dep.resource.id)).shares).to.equal('0');
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'earn.move.executed' })).to.have.length(2);
      expect(await errorCode(() => h.defi.earn.move(h.db, who, { from_position_id: res.resource.id, to_vault_id: b.vault_id, move_all: true }, 'k4'))).to.equal('validation_failed');
    });
  });

  describe('claimEarnRewards', () => {
    it('accrues rewards per share over time and pays them once', async () => {
      const who = await h.newAgent();
      const v = await vault({ apyBps: 0, rewardBps: 100, protocol: 'moonwell' });
      const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '1000' }, 'k');
      h.clock.advance(YEAR_MS);
      const p = await h.defi.earn.getPosition(h.db, who, dep.resource.id);
      expect(p.pending_rewards).to.deep.equal([{ asset_symbol: 'USDC', amount: '10' }]);
      const res = await h.defi.earn.claimRewards(h.db, who, { protocols: ['moonwell'] }, 'k2');
      expect(res.status).to.equal('executed');
      expect(await h.balance(who.walletId, 'USDC')).to.equal(9010n * E6);
      expect(await h.db('events').where({ agent_id: who.agentId, type: 'rewards.claimed' })).to.have.length(1);
      expect(await errorCode(() => h.defi.earn.claimRewards(h.db, who, { protocols: ['moonwell'] }, 'k3'))).to.equal('invalid_state_transition');
    });
  });

  describe('listEarnOpportunities', () => {
    it('lists vaults by APY with capacity and pages with a cursor', async () => {
      const who = await h.newAgent();
      const first = await h.defi.earn.listOpportunities(h.db, who, { limit: 2 });
      expect(first.items).to.have.length(2);
      expect(first.has_more).to.equal(true);
      expect(first.items[0]!.apy >= first.items[1]!.apy).to.equal(true);
      const second = await h.defi.earn.listOpportunities(h.db, who, { limit: 2, cursor: first.next_cursor! });
      expect(second.items[0]!.apy <= first.items[1]!.apy).to.equal(true);
      expect(second.items.map((i) => i.vault_id)).to.not.include(first.items[0]!.vault_id);
      const prime = (await h.defi.earn.listOpportunities(h.db, who, { limit: 100 })).items.find((i) => i.name === 'Morpho USDC Prime');
      expect(prime).to.include({ capacity: '50000000', protocol: 'morpho', apy: 0.052 });
    });
  });

  it("never pays more than the deposit plus the vault's accrued interest on deposit then withdraw_all (property)", async () => {
    const who = await h.newAgent({ funds: { USDC: '100000000' } });
    const other = await h.newAgent({ funds: { USDC: '100000000' } });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 50_000_000 }),
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 0, max: 3 * 365 * 24 * 3600 }),
        fc.integer({ min: 0, max: 5_000_000 }),
        async (cents, apyBps, seconds, otherCents) => {
          n += 1;
          const v = await vault({ apyBps });
          // Another depositor first, so the share price is not 1:10^6.
          if (otherCents > 0) await h.defi.earn.deposit(h.db, other, { asset: 'USDC', vault_id: v.vault_id, amount: (otherCents / 100).toFixed(2) }, `o${n}`);
          const before = await h.balance(who.walletId, 'USDC');
          const deposit = parseAmount((cents / 100).toFixed(2), 6);
          const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: (cents / 100).toFixed(2) }, `d${n}`);
          h.clock.advance(seconds * 1000);
          const [row] = await h.db('earn_vaults').where({ id: v.vault_id });
          const tvlBefore = BigInt(row.total_assets);
          const tvlAfter = h.defi.earn.accruedVault(row).state.totalAssets;
          await h.defi.earn.withdraw(h.db, who, { position_id: dep.resource.id, withdraw_all: true }, `w${n}`);
          const paid = (await h.balance(who.walletId, 'USDC')) - (before - deposit);
          // paid ≤ deposit · (A' + 1) / (A + 1): at most the deposit's share of the vault's growth.
          expect(paid * (tvlBefore + 1n) <= deposit * (tvlAfter + 1n), `paid ${paid} for ${deposit}`).to.equal(true);
          if (apyBps === 0 || seconds === 0) expect(paid <= deposit).to.equal(true);
        },
      ),
      { numRuns: 20 },
    );
  });

  it('strictly raises the share price as the clock advances at a positive APY', async () => {
    const who = await h.newAgent();
    const v = await vault({ apyBps: 300 });
    const dep = await h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '5000' }, 'k');
    let last = parseAmount((await h.defi.earn.getPosition(h.db, who, dep.resource.id)).value, 6);
    for (let i = 0; i < 10; i += 1) {
      h.clock.advance(3600_000);
      const value = parseAmount((await h.defi.earn.getPosition(h.db, who, dep.resource.id)).value, 6);
      expect(value > last, `hour ${i}: ${value} <= ${last}`).to.equal(true);
      last = value;
    }
  });

  describe('agentctl vault add / vault list / market add', () => {
    const ctx = (): CliContext => ({ db: h.db, services: { defi: h.defi } as unknown as CliContext['services'], config: {} as CliContext['config'], clock: h.clock });
    const run = (name: string, positional: string[], flags: Record<string, string | boolean>) => defiCommands.find((c) => c.name === name)!.run(ctx(), { positional, flags });

    it('adds a vault that agents can then deposit into', async () => {
      const out = await run('vault add', [], { name: 'test cli vault', protocol: 'aave-v3', asset: 'EURC', 'apy-bps': '275', capacity: '1000' });
      expect(out).to.include({ name: 'test cli vault', protocol: 'aave-v3', asset_symbol: 'EURC', apy: 0.0275, capacity: '1000', tvl: '0' });
      const listed = (await run('vault list', [], {})) as { vaults: { vault_id: string }[] };
      expect(listed.vaults.map((x) => x.vault_id)).to.include(out.vault_id);
      const who = await h.newAgent({ funds: { EURC: '10' } });
      expect((await h.defi.earn.deposit(h.db, who, { asset: 'EURC', vault_id: out.vault_id as string, amount: '10' }, 'k')).status).to.equal('executed');
    });

    it('refuses a market whose LTV is not below its liquidation threshold, and a second market for one asset', async () => {
      let message = '';
      try {
        await run('market add', [], { asset: 'ETH', 'ltv-bps': '8500', 'liquidation-threshold-bps': '8000', 'borrow-apr-bps': '100' });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).to.match(/ltv_bps < liquidation_threshold_bps/);
      // ETH already has a seeded market: a second one for the same asset is refused by the unique key.
      let duplicate = false;
      try {
        await run('market add', [], { asset: 'ETH', 'ltv-bps': '7000', 'liquidation-threshold-bps': '8000', 'borrow-apr-bps': '100' });
      } catch {
        duplicate = true;
      }
      expect(duplicate).to.equal(true);
    });
  });

  it('fills a capped vault exactly when ten agents deposit at once', async () => {
    const v = await vault({ capacity: '1000' });
    const agents = await Promise.all(Array.from({ length: 10 }, () => h.newAgent({ funds: { USDC: '150' } })));
    const results = await Promise.allSettled(agents.map((who, i) => h.defi.earn.deposit(h.db, who, { asset: 'USDC', vault_id: v.vault_id, amount: '150' }, `cap-${i}`)));
    expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(6);
    expect(new Set(results.filter((r) => r.status === 'rejected').map((r) => ((r as PromiseRejectedResult).reason as { code: string }).code))).to.deep.equal(new Set(['limit_exceeded']));
    const [row] = await h.db('earn_vaults').where({ id: v.vault_id });
    expect(row.total_assets).to.equal('900000000');
  });
});
