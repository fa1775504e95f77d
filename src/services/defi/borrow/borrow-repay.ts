// Borrowing and repaying (optionally from another asset, converted at the feed).
import * as repo from '../../../db/repositories/market.repository.js';
import * as aave from '../../../lib/defi/aave.js';
import { ApiError } from '../../../lib/errors.js';
import { formatAmount } from '../../../lib/money.js';
import type { BorrowService } from './types.js';
import { ratio } from './markets.js';
import type { BorrowKit } from './morpho.js';

export function createBorrowRepay(kit: BorrowKit): Pick<BorrowService, 'borrow' | 'repay'> {
  const {
    recordOnMarket,
    accountWrite,
    clock,
    ledger,
    snapshot,
    withPrice,
    collateralInputs,
    debtInputs,
    ltvBpsOf,
    ltvTooHigh,
    ratioBps,
    resolveAmount,
    market,
    walletAccount,
    poolAccount,
    payFromWallet,
    sourceCost,
    position,
    lendingDetails,
    afterBorrow,
    checkOnchain,
    createOnchain,
    noConversion,
    repayOnchain,
  } = kit;
  return {
    async borrow(db, who, body, idempotencyKey) {
      return accountWrite(db, who, body.asset, 'borrow', async (trx, asset, om) => {
        if (om) {
          const m = await market(trx, asset.symbol, 'borrow', false);
          const amount = (await resolveAmount(trx, asset, body)) as bigint;
          const what = `borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`;
          const { ltvBps, ltv } = checkOnchain(afterBorrow(await position(trx, om, who), amount), ratioBps(body.max_ltv_after), what);
          return createOnchain(trx, who, om, {
            type: 'debt.borrow',
            resourceType: 'debt',
            resourceId: m.id,
            asset,
            amount,
            details: lendingDetails(om, 'borrow', amount),
            holds: [],
            ltvBps,
            extra: { ltv_after: ltv },
            humanMessage: `Borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol} on Morpho Blue (${om.c.market.name})`,
            idempotencyKey,
          });
        }
        const m = await market(trx, asset.symbol, 'borrow', true);
        const amount = (await resolveAmount(trx, asset, body)) as bigint;
        const maxAfter = ratioBps(body.max_ltv_after);
        const s = await snapshot(trx, who, true);
        await withPrice(trx, s, asset.symbol);
        const owed = new Map([...s.debts].map(([k, v]) => [k, v.owed]));
        owed.set(asset.symbol, (owed.get(asset.symbol) ?? 0n) + amount);
        const check = aave.checkPosition(collateralInputs(s), debtInputs(s, owed), maxAfter);
        if (!check.ok) throw ltvTooHigh(check, `borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
        return recordOnMarket(
          trx,
          who,
          m,
          {
            type: 'debt.borrow',
            resource: 'debt',
            asset: asset.symbol,
            amount,
            ltvBps: ltvBpsOf(check.data),
            details: { ltv_after: ratio(ltvBpsOf(check.data)), borrow_index_ray: m.index.toString() },
            eventData: { ltv_after: ratio(ltvBpsOf(check.data)) },
            humanMessage: `Borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol} on ${m.protocol_id}`,
            idempotencyKey,
          },
          async (operation) => {
            await repo.addScaledDebt(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: aave.scaledForBorrow(amount, m.index), at: clock.now() });
            await ledger.post(trx, {
              operationId: operation.id,
              entryType: 'debt.borrow',
              postings: [
                { account: poolAccount(m), asset: asset.symbol, amount: -amount },
                { account: walletAccount(who), asset: asset.symbol, amount },
              ],
            });
          },
        );
      });
    },

    async repay(db, who, body, idempotencyKey) {
      return accountWrite(db, who, body.asset, 'borrow', async (trx, asset, om) => {
        if (om) {
          noConversion(body.source_asset, asset.symbol);
          const m = await market(trx, asset.symbol, 'borrow', false);
          const requested = await resolveAmount(trx, asset, body, { name: 'repay_all', value: body.repay_all });
          return repayOnchain(
            trx,
            who,
            om,
            await position(trx, om, who),
            requested,
            'debt.repay',
            m,
            { source_asset: asset.symbol },
            (units) => `Repaying ${formatAmount(units, asset.decimals)} ${asset.symbol} on Morpho Blue`,
            idempotencyKey,
          );
        }
        const m = await market(trx, asset.symbol, 'borrow', true);
        const source = body.source_asset ? await ledger.requireAsset(trx, body.source_asset, 'source_asset') : asset;
        if (source.symbol !== asset.symbol && body.allow_conversion !== true)
          throw new ApiError('validation_failed', `repaying ${asset.symbol} with ${source.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        const requested = await resolveAmount(trx, asset, body, { name: 'repay_all', value: body.repay_all });
        const s = await snapshot(trx, who, true);
        const debt = s.debts.get(asset.symbol);
        if (!debt || debt.owed === 0n) throw new ApiError('invalid_state_transition', `there is no ${asset.symbol} debt to repay`, { asset: asset.symbol });
        // Aave caps a repayment at the debt; repaying it all clears the scaled balance exactly.
        const all = requested === 'all' || requested >= debt.owed;
        const amount = all ? debt.owed : (requested as bigint);
        const scaledDelta = all ? debt.scaled : aave.scaledForRepay(amount, m.index);
        const cost = source.symbol === asset.symbol ? amount : await sourceCost(trx, source, asset, amount);
        return recordOnMarket(
          trx,
          who,
          m,
          {
            type: 'debt.repay',
            resource: 'debt',
            asset: asset.symbol,
            amount,
            details: { source_asset: source.symbol, source_amount: cost.toString(), repaid_all: all },
            eventData: { repaid_all: all },
            humanMessage: `Repaying ${formatAmount(amount, asset.decimals)} ${asset.symbol}${source.symbol !== asset.symbol ? ` with ${formatAmount(cost, source.decimals)} ${source.symbol}` : ''}`,
            idempotencyKey,
          },
          async (operation) => {
            await repo.addScaledDebt(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: -scaledDelta, at: clock.now() });
            await ledger.post(trx, { operationId: operation.id, entryType: 'debt.repay', postings: payFromWallet(who, source, cost, asset, amount, poolAccount(m)) });
          },
        );
      });
    },
  };
}
