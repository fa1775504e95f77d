// Collateral: adding (optionally bought from another asset) and removing, within the LTV limits.
import * as repo from '../../../db/repositories/market.repository.js';
import * as aave from '../../../lib/defi/aave.js';
import { ApiError } from '../../../lib/errors.js';
import { formatAmount } from '../../../lib/money.js';
import type { BorrowService } from './types.js';
import { ratio } from './markets.js';
import type { BorrowKit } from './morpho.js';

export function createCollateral(kit: BorrowKit): Pick<BorrowService, 'addCollateral' | 'removeCollateral'> {
  const {
    recordOnMarket,
    accountWrite,
    clock,
    ledger,
    snapshot,
    collateralInputs,
    debtInputs,
    ltvBpsOf,
    ltvTooHigh,
    ratioBps,
    resolveAmount,
    market,
    walletAccount,
    collateralAccount,
    payFromWallet,
    sourceCost,
    position,
    lendingDetails,
    checkOnchain,
    createOnchain,
    noConversion,
  } = kit;
  return {
    async addCollateral(db, who, body, idempotencyKey) {
      return accountWrite(
        db,
        who,
        body.asset,
        'collateral',
        async (trx, asset, om) => {
          if (om) {
            noConversion(body.source_asset, asset.symbol);
            // Issue 30: ETH (an account's, accountWrite checked) is wrapped into the market's WETH in the same lane call.
            const wraps = asset.symbol === 'ETH' && om.collateral.symbol !== 'ETH';
            const m = await market(trx, om.collateral.symbol, 'collateral', false);
            const amount = (await resolveAmount(trx, asset, body)) as bigint;
            const details = lendingDetails(om, 'supply_collateral', amount);
            if (wraps) details.onchain_lending.wrap_input = true;
            return createOnchain(trx, who, om, {
              type: 'collateral.add',
              resourceType: 'collateral',
              resourceId: m.id,
              asset,
              amount,
              details,
              extra: { source_asset: asset.symbol, ...(wraps ? { collateral_asset: om.collateral.symbol } : {}) },
              humanMessage: `Adding ${formatAmount(amount, asset.decimals)} ${asset.symbol} as collateral on Morpho Blue`,
              idempotencyKey,
            });
          }
          const m = await market(trx, asset.symbol, 'collateral', false);
          const source = body.source_asset ? await ledger.requireAsset(trx, body.source_asset, 'source_asset') : asset;
          if (source.symbol !== asset.symbol && body.allow_conversion !== true)
            throw new ApiError('validation_failed', `adding ${asset.symbol} from ${source.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
          const amount = (await resolveAmount(trx, asset, body)) as bigint;
          const cost = source.symbol === asset.symbol ? amount : await sourceCost(trx, source, asset, amount);
          return recordOnMarket(
            trx,
            who,
            m,
            {
              type: 'collateral.add',
              resource: 'collateral',
              asset: asset.symbol,
              amount,
              details: { source_asset: source.symbol, source_amount: cost.toString() },
              humanMessage: `Adding ${formatAmount(amount, asset.decimals)} ${asset.symbol} as collateral`,
              idempotencyKey,
            },
            async (operation) => {
              await repo.addCollateral(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: amount, at: clock.now() });
              await ledger.post(trx, { operationId: operation.id, entryType: 'collateral.add', postings: payFromWallet(who, source, cost, asset, amount, collateralAccount(m)) });
            },
          );
        },
        { wrapsEth: true },
      );
    },

    async removeCollateral(db, who, body, idempotencyKey) {
      return accountWrite(db, who, body.asset, 'collateral', async (trx, asset, om) => {
        if (om) {
          const m = await market(trx, asset.symbol, 'collateral', false);
          const requested = await resolveAmount(trx, asset, body, { name: 'remove_all', value: body.remove_all });
          const p = await position(trx, om, who);
          const amount = requested === 'all' ? p.collateral : requested;
          if (amount <= 0n || amount > p.collateral)
            throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is ${formatAmount(p.collateral, asset.decimals)}`, {
              asset: asset.symbol,
              collateral: formatAmount(p.collateral, asset.decimals),
            });
          const { ltvBps, ltv } = checkOnchain({ ...p, collateral: p.collateral - amount }, ratioBps(body.max_ltv_after), `removing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
          return createOnchain(trx, who, om, {
            type: 'collateral.remove',
            resourceType: 'collateral',
            resourceId: m.id,
            asset,
            amount,
            details: lendingDetails(om, 'withdraw_collateral', amount),
            holds: [],
            ltvBps,
            extra: { ltv_after: ltv },
            humanMessage: `Removing ${formatAmount(amount, asset.decimals)} ${asset.symbol} of collateral from Morpho Blue`,
            idempotencyKey,
          });
        }
        const m = await market(trx, asset.symbol, 'collateral', false);
        const requested = await resolveAmount(trx, asset, body, { name: 'remove_all', value: body.remove_all });
        const maxAfter = ratioBps(body.max_ltv_after);
        const s = await snapshot(trx, who, true);
        const held = s.collateral.get(asset.symbol) ?? 0n;
        const amount = requested === 'all' ? held : requested;
        if (amount <= 0n || amount > held)
          throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is ${formatAmount(held, asset.decimals)}`, { asset: asset.symbol, collateral: formatAmount(held, asset.decimals) });
        const after = new Map(s.collateral);
        after.set(asset.symbol, held - amount);
        const check = aave.checkPosition(collateralInputs(s, after), debtInputs(s), maxAfter);
        if (!check.ok) throw ltvTooHigh(check, `removing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
        return recordOnMarket(
          trx,
          who,
          m,
          {
            type: 'collateral.remove',
            resource: 'collateral',
            asset: asset.symbol,
            amount,
            ltvBps: ltvBpsOf(check.data),
            details: { ltv_after: ratio(ltvBpsOf(check.data)) },
            eventData: { ltv_after: ratio(ltvBpsOf(check.data)) },
            humanMessage: `Removing ${formatAmount(amount, asset.decimals)} ${asset.symbol} of collateral`,
            idempotencyKey,
          },
          async (operation) => {
            if (!(await repo.addCollateral(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: -amount, at: clock.now() }))) {
              throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is smaller than ${formatAmount(amount, asset.decimals)}`, { asset: asset.symbol });
            }
            await ledger.post(trx, {
              operationId: operation.id,
              entryType: 'collateral.remove',
              postings: [
                { account: collateralAccount(m), asset: asset.symbol, amount: -amount },
                { account: walletAccount(who), asset: asset.symbol, amount },
              ],
            });
          },
        );
      });
    },
  };
}
