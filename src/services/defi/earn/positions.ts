// Earn reads: positions, opportunities and vaults (the owner's list and the admin's addition).
import * as repo from '../../../db/repositories/vault.repository.js';
import type { VaultRow } from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { mulDiv } from '../../../lib/money.js';
import { decodeKey, decodeKeyset, encodeKey, encodeKeyset, pageLimit, toPage } from '../../cursor.js';
import type { EarnService } from './types.js';
import type { EarnCore } from './vaults.js';

export function createEarnPositions(
  core: EarnCore,
): Pick<EarnService, 'accruedVault' | 'listPositions' | 'getPosition' | 'valueUsd' | 'listOpportunities' | 'addVault' | 'listVaults' | 'findVaultByAddress'> {
  const { clock, ledger, accruedVault, assetOf, allowedProtocols, publicPosition, publicOpportunity } = core;

  /** The position's own price row (read with it) as a PriceBook: the same staleness rule as a price read alone. */
  const pricedBy = (r: repo.ValuedPosition) => ledger.priceBookOf(r.price ? [r.price] : []);

  return {
    accruedVault,

    async listPositions(db, who, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listValuedPositions(db, who.walletId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(
        rows,
        limit,
        (r) => r,
        (r) => encodeKeyset(r.position),
      );
      return { ...page, items: await Promise.all(page.items.map((r) => publicPosition(db, r.position, r.vault, pricedBy(r)))) };
    },

    async getPosition(db, who, id) {
      const p = await repo.findValuedPosition(db, who.walletId, id);
      if (!p) throw new ApiError('not_found', 'earn position not found');
      return publicPosition(db, p.position, p.vault, pricedBy(p));
    },

    async valueUsd(db, who, positions) {
      let total = 0n;
      for (const { position: p, vault: v, price } of positions ?? (await repo.listAllValuedPositions(db, who.walletId))) {
        const shares = BigInt(p.shares);
        if (shares <= 0n) continue;
        if (!price) continue;
        const asset = await assetOf(db, v.asset_symbol);
        total += mulDiv(erc.previewRedeem(accruedVault(v).state, shares), BigInt(price.usd_e8), 10n ** BigInt(asset.decimals));
      }
      return total;
    },

    async listOpportunities(db, who, query) {
      const limit = pageLimit(query.limit);
      const after = decodeKey(query.cursor);
      const allowed = await allowedProtocols(db, who.agentId);
      const vaults = (await repo.listVaults(db, { activeOnly: true })).filter((v) => allowed(v.protocol_id, v.asset_symbol));
      const keyOf = (v: VaultRow) => `${String(100_000 - v.apy_bps).padStart(6, '0')}:${v.id}`;
      const rows = vaults.filter((v) => after === undefined || keyOf(v) > after).slice(0, limit + 1);
      const page = toPage(
        rows,
        limit,
        (r) => r,
        (r) => encodeKey(keyOf(r)),
      );
      return { ...page, items: await Promise.all(page.items.map((v) => publicOpportunity(db, v))) };
    },

    async addVault(db, input) {
      const asset = await ledger.requireAsset(db, input.asset);
      const offset = input.decimalsOffset ?? (asset.decimals <= 8 ? 6 : 0);
      const capacity = input.capacity === undefined || input.capacity === null ? null : ledger.parseAssetAmount(asset, input.capacity, 'capacity');
      const rewardAsset = input.rewardAsset ? (await ledger.requireAsset(db, input.rewardAsset)).symbol : null;
      const rewardRate = rewardAsset && input.rewardBps ? (erc.RAY * BigInt(input.rewardBps)) / erc.BPS / 10n ** BigInt(offset) : 0n;
      if (!Number.isInteger(input.apyBps) || input.apyBps < 0 || input.apyBps > 100_000) throw new ApiError('validation_failed', 'apy_bps must be an integer in [0, 100000]');
      const id = newId();
      const address = input.address ?? `0x${id.replace(/-/g, '').padEnd(40, '0').slice(0, 40)}`;
      if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new ApiError('validation_failed', 'address must be a 0x-prefixed 20-byte hex address');
      const v = await repo.insertVault(db, {
        id,
        name: input.name,
        protocol_id: input.protocol,
        asset_symbol: asset.symbol,
        address,
        apy_bps: input.apyBps,
        decimals_offset: offset,
        capacity,
        reward_asset_symbol: rewardAsset,
        reward_rate_ray: rewardRate,
        created_at: clock.now(),
      });
      return publicOpportunity(db, v);
    },

    async listVaults(db) {
      return Promise.all((await repo.listVaults(db)).map(async (v) => ({ ...(await publicOpportunity(db, v)), active: v.active })));
    },

    findVaultByAddress: (db, address) => repo.findVaultByAddress(db, address),
  };
}
