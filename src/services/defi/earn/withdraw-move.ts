// Earn withdrawals (optionally paid out in another asset) and moves between vaults; redemption into the wallet for a conversion.
import type { Address } from '../../../chain/port.js';
import { withTransaction } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import { convertAtPrice } from '../../../lib/defi/pricing.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount } from '../../../lib/money.js';
import type { EarnService } from './types.js';
import { type EarnCore, WITHDRAW_CONVERSION_FEE_BPS } from './vaults.js';
import { recordWrite } from '../record.js';

export function createEarnWithdrawals(core: EarnCore): Pick<EarnService, 'withdraw' | 'move' | 'redeemAssetsToWallet'> {
  const {
    ledger,
    operations,
    policy,
    onchain,
    onchainDetails,
    onchainWithdrawal,
    accruedVault,
    lockedVault,
    assetOf,
    resolveAmount,
    bestVault,
    mintInto,
    burnFrom,
    vaultAccount,
    withdrawalOf,
    lockOwnPosition,
    lockBalances,
  } = core;

  return {
    async withdraw(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await policy.lock(trx, who.agentId);
        const found = await lockOwnPosition(trx, who, body.position_id);
        const source = (await repo.findVault(trx, found.vault_id))!;
        const asset = await assetOf(trx, source.asset_symbol);
        const destination = body.destination_asset ? await ledger.requireAsset(trx, body.destination_asset, 'destination_asset') : asset;
        if (destination.symbol !== asset.symbol && body.allow_conversion !== true) {
          throw new ApiError('validation_failed', `the position holds ${asset.symbol}; paying out ${destination.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        }
        // On chain the vault's own contract prices the redemption (the worker settles it): the ledger's vault row is
        // not locked, least of all across the node's calls. A ledger vault: the balance rows the payout credits, then
        // the vault row (vault.repository's lock order), then the position.
        const isOnchain = await onchain(trx, source);
        if (!isOnchain) await lockBalances(trx, who.walletId, [asset.symbol, destination.symbol]);
        const v = isOnchain ? source : await lockedVault(trx, found.vault_id);
        const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
        const amount = await resolveAmount(trx, asset, body, { name: 'withdraw_all', value: body.withdraw_all });
        const withdrawal = {
          principal: who,
          type: 'earn.withdraw',
          resource: { type: 'earn_position', id: p.id },
          asset: asset.symbol,
          policy: { protocol: v.protocol_id },
          toAddress: v.address,
          eventData: { vault_id: v.id, position_id: p.id },
          idempotencyKey,
        };
        if (isOnchain) {
          if (destination.symbol !== asset.symbol) throw new ApiError('validation_failed', `an on-chain vault pays out ${asset.symbol} only; convert afterwards`, { field: 'destination_asset' });
          const w = await onchainWithdrawal(trx, who, v, p, amount, 'withdraw');
          return recordWrite(operations, trx, {
            ...withdrawal,
            amount: w.assets,
            holds: [],
            details: {
              vault_id: v.id,
              position_id: p.id,
              shares: w.shares.toString(),
              destination_asset: asset.symbol,
              amount_out: w.assets.toString(),
              ...(await onchainDetails(trx, { action: 'redeem', vault: v.address as Address, amount: w.shares.toString(), minimum: w.minimum.toString() })),
            },
            humanMessage: `Withdrawing ${formatAmount(w.assets, asset.decimals)} ${asset.symbol} from ${v.name}`,
          });
        }
        const a = accruedVault(v);
        const { shares, assets } = withdrawalOf(a, p, amount);
        if (assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to withdraw', { position_id: p.id });
        const converted =
          destination.symbol === asset.symbol
            ? null
            : convertAtPrice(
                assets,
                { ...asset, priceE8: (await ledger.price(trx, asset.symbol)).usdE8 },
                { ...destination, priceE8: (await ledger.price(trx, destination.symbol)).usdE8 },
                WITHDRAW_CONVERSION_FEE_BPS,
              );
        return recordWrite(
          operations,
          trx,
          {
            ...withdrawal,
            amount: assets,
            settlement: 'immediate',
            details: { vault_id: v.id, position_id: p.id, shares: shares.toString(), destination_asset: destination.symbol, amount_out: (converted?.netOut ?? assets).toString() },
            humanMessage: `Withdrawing ${formatAmount(assets, asset.decimals)} ${asset.symbol} from ${v.name}${converted ? ` as ${formatAmount(converted.netOut, destination.decimals)} ${destination.symbol}` : ''}`,
          },
          async (operation) => {
            if (operation.status === 'execution_failed') return;
            await burnFrom(trx, v, a, p, shares, assets);
            const postings = [
              { account: vaultAccount(v), asset: asset.symbol, amount: -assets },
              { account: { kind: 'available' as const, walletId: who.walletId }, asset: asset.symbol, amount: assets },
            ];
            if (converted) {
              postings.push(
                { account: { kind: 'available', walletId: who.walletId }, asset: asset.symbol, amount: -assets },
                { account: { kind: 'external', name: 'conversion' }, asset: asset.symbol, amount: assets },
                { account: { kind: 'external', name: 'conversion' }, asset: destination.symbol, amount: -converted.netOut },
                { account: { kind: 'available', walletId: who.walletId }, asset: destination.symbol, amount: converted.netOut },
              );
            }
            await ledger.post(trx, { operationId: operation.id, entryType: 'earn.withdraw', postings });
          },
        );
      });
    },

    async move(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await policy.lock(trx, who.agentId);
        const found = await lockOwnPosition(trx, who, body.from_position_id);
        const source = (await repo.findVault(trx, found.vault_id))!;
        const hasTarget = body.to_vault_id !== undefined && body.to_vault_id !== null;
        if (hasTarget === (body.to_best_available === true))
          throw new ApiError('validation_failed', 'give exactly one of to_vault_id and to_best_available: true', { fields: ['to_vault_id', 'to_best_available'] });
        const asset = await assetOf(trx, source.asset_symbol);
        const amount = await resolveAmount(trx, asset, body, { name: 'move_all', value: body.move_all });
        const target = hasTarget ? await repo.findVault(trx, body.to_vault_id!) : await bestVault(trx, who.agentId, asset.symbol, amount === 'all' ? null : amount, source.id);
        if (!target || !target.active) throw new ApiError('not_found', 'vault not found', { vault_id: body.to_vault_id });
        if (target.id === source.id) throw new ApiError('validation_failed', 'the position is already in that vault', { field: 'to_vault_id' });
        if (target.asset_symbol !== source.asset_symbol)
          throw new ApiError('validation_failed', `vault ${target.id} holds ${target.asset_symbol}, not ${source.asset_symbol}`, { field: 'to_vault_id' });
        const [fromOnchain, toOnchain] = [await onchain(trx, source), await onchain(trx, target)];
        if (fromOnchain !== toOnchain) throw new ApiError('validation_failed', 'a position moves between two on-chain vaults or two ledger vaults only', { field: 'to_vault_id' });
        // A move posts to the two vault accounts only (no balance row); the vault rows are locked for ledger vaults only
        // (on chain the worker settles what the vaults report, and the node is called below).
        const locked = fromOnchain ? [source, target] : await repo.lockVaults(trx, [source.id, target.id]);
        const from = locked.find((x) => x.id === source.id)!;
        const to = locked.find((x) => x.id === target.id)!;
        const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
        const existing = await repo.findPositionByVault(trx, who.walletId, to.id);
        const positionId = existing?.id ?? newId();
        const moving = {
          principal: who,
          type: 'earn.move',
          resource: { type: 'earn_position', id: positionId },
          asset: asset.symbol,
          policy: { protocol: to.protocol_id },
          toAddress: to.address,
          eventData: { from_position_id: p.id, position_id: positionId, from_vault_id: from.id, to_vault_id: to.id },
          idempotencyKey,
        };
        if (fromOnchain) {
          const w = await onchainWithdrawal(trx, who, from, p, amount, 'move');
          return recordWrite(operations, trx, {
            ...moving,
            amount: w.assets,
            holds: [],
            details: {
              from_vault_id: from.id,
              to_vault_id: to.id,
              from_position_id: p.id,
              position_id: positionId,
              shares_burned: w.shares.toString(),
              ...(await onchainDetails(trx, { action: 'move', vault: from.address as Address, to_vault: to.address as Address, amount: w.shares.toString(), minimum: '0' })),
            },
            humanMessage: `Moving ${formatAmount(w.assets, asset.decimals)} ${asset.symbol} from ${from.name} to ${to.name}`,
          });
        }
        const fromState = accruedVault(from);
        const { shares, assets } = withdrawalOf(fromState, p, amount);
        if (assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to move', { position_id: p.id });
        return recordWrite(
          operations,
          trx,
          {
            ...moving,
            amount: assets,
            settlement: 'immediate',
            details: { from_vault_id: from.id, to_vault_id: to.id, from_position_id: p.id, position_id: positionId, shares_burned: shares.toString() },
            humanMessage: `Moving ${formatAmount(assets, asset.decimals)} ${asset.symbol} from ${from.name} to ${to.name}`,
          },
          async (operation) => {
            if (operation.status === 'execution_failed') return;
            // A move out of a vault the policy no longer allows is fine; into one it does not allow is refused above by create.
            await burnFrom(trx, from, fromState, p, shares, assets);
            await mintInto(trx, who, to, accruedVault(to), assets, positionId);
            await ledger.post(trx, {
              operationId: operation.id,
              entryType: 'earn.move',
              postings: [
                { account: vaultAccount(from), asset: asset.symbol, amount: -assets },
                { account: vaultAccount(to), asset: asset.symbol, amount: assets },
              ],
            });
          },
        );
      });
    },

    async redeemAssetsToWallet(trx, who, vaultId, assets, operationId) {
      const source = await repo.findVault(trx, vaultId);
      if (!source) throw new ApiError('not_found', 'vault not found', { vault_id: vaultId });
      // The balance row the redemption credits, then the vault row (vault.repository's lock order).
      await lockBalances(trx, who.walletId, [source.asset_symbol]);
      const v = await lockedVault(trx, vaultId);
      const found = await repo.findPositionByVault(trx, who.walletId, v.id);
      if (!found) throw new ApiError('insufficient_funds', `the wallet has no position in vault ${v.address}`, { vault_address: v.address });
      const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
      const a = accruedVault(v);
      const { shares } = withdrawalOf(a, p, assets);
      await burnFrom(trx, v, a, p, shares, assets);
      await ledger.post(trx, {
        operationId,
        entryType: 'earn.withdraw',
        postings: [
          { account: vaultAccount(v), asset: v.asset_symbol, amount: -assets },
          { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: assets },
        ],
      });
      return { shares };
    },
  };
}
