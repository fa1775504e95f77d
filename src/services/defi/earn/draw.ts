// A payment drawing on Earn (issue 26, item 2): the wallet's shortfall redeemed out of the agent's positions in the
// asset, best first, inside the payment's own transaction and under its operation id.
import * as repo from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import { ApiError } from '../../../lib/errors.js';
import { formatAmount, mulDiv } from '../../../lib/money.js';
import type { DrawnFromEarn } from '../../ledger/payments.js';
import type { EarnService } from './types.js';
import type { EarnCore } from './vaults.js';

export function createEarnDraw(core: EarnCore): Pick<EarnService, 'drawShortfall'> {
  const { ledger, onchain, accruedVault, assetOf, burnFrom, vaultAccount, withdrawalOf, lockBalances } = core;

  return {
    /**
     * Null when the positions together are worth less than the shortfall (nothing is written). Locks: the caller holds
     * the agent's policy row (every earn write takes it first), so two payments of one agent never race for a
     * position; the wallet's balance row of the asset, then vaults in id order (repo.lockVaults, as every earn write) and positions in id order.
     * Each position pays out exact assets for shares rounded up (ERC-4626 `withdraw`), never more than it holds: the
     * wallet receives the shortfall to the unit. Ledger vaults only: an on-chain vault's redemption settles through
     * the worker, not in this transaction. "Best first" is the order of `use_best_available` (highest APY, then id).
     */
    async drawShortfall(trx, who, need) {
      const held = (await repo.listAllValuedPositions(trx, who.walletId)).filter((r) => r.vault.asset_symbol === need.asset && BigInt(r.position.shares) > 0n);
      const candidates = [];
      for (const r of held) if (!(await onchain(trx, r.vault))) candidates.push(r);
      if (candidates.length === 0) return null;
      // The balance row the draw credits, then the vault rows (vault.repository's lock order).
      await lockBalances(trx, who.walletId, [need.asset]);
      const vaults = await repo.lockVaults(
        trx,
        candidates.map((r) => r.vault.id),
      );
      const plan = [];
      for (const id of candidates.map((r) => r.position.id).sort()) {
        const p = (await repo.lockPosition(trx, who.walletId, id))!;
        const v = vaults.find((x) => x.id === p.vault_id)!;
        const a = accruedVault(v);
        plan.push({ p, v, a, worth: erc.previewRedeem(a.state, BigInt(p.shares)) });
      }
      plan.sort((x, y) => y.v.apy_bps - x.v.apy_bps || (x.v.id < y.v.id ? -1 : 1));
      if (plan.reduce((sum, x) => sum + x.worth, 0n) < need.amount) return null;

      const drawn: DrawnFromEarn[] = [];
      let left = need.amount;
      for (const { p, v, a, worth } of plan) {
        if (left <= 0n) break;
        const take = worth < left ? worth : left;
        if (take <= 0n) continue;
        const { shares, assets } = withdrawalOf(a, p, take);
        // What the burned shares return may not fall below the amount needed less `slippage_percent` (the ledger
        // vaults' price is deterministic, so only a venue with a moving price could trip this).
        const floor = mulDiv(take, BigInt(10_000 - need.slippageBps), 10_000n);
        if (assets < floor) {
          const { decimals } = await assetOf(trx, v.asset_symbol);
          throw new ApiError('slippage_exceeded', `drawing on ${v.name} would return ${formatAmount(assets, decimals)} ${v.asset_symbol}, below the minimum ${formatAmount(floor, decimals)}`, {
            position_id: p.id,
          });
        }
        await burnFrom(trx, v, a, p, shares, assets);
        await ledger.post(trx, {
          operationId: need.operationId,
          entryType: 'earn.withdraw',
          postings: [
            { account: vaultAccount(v), asset: v.asset_symbol, amount: -assets },
            { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: assets },
          ],
        });
        drawn.push({ position_id: p.id, vault_id: v.id, vault: v.address, amount: assets.toString(), shares: shares.toString() });
        left -= assets;
      }
      return drawn;
    },
  };
}
