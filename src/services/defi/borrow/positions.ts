// Borrow reads: the account summary (Aave-style on the ledger, Morpho's own on chain), its USD totals, collateral; markets (admin).
import * as repo from '../../../db/repositories/market.repository.js';
import * as aave from '../../../lib/defi/aave.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount, parseAmount } from '../../../lib/money.js';
import { decodeKey, encodeKey, pageLimit, toPage } from '../../cursor.js';
import { USD_DECIMALS } from '../../ledger/ledger.js';
import type { BorrowService } from './types.js';
import { ratio, usd, wadToNumber } from './markets.js';
import type { BorrowKit } from './morpho.js';
import type { Schema } from '../../../lib/contract.js';

export function createBorrowPositions(kit: BorrowKit): Pick<BorrowService, 'summary' | 'totalsUsd' | 'listCollateral' | 'addMarket'> {
  const { clock, ledger, snapshot, collateralInputs, debtInputs, onchainMarket, onchainSummary } = kit;
  const positions: Pick<BorrowService, 'summary' | 'totalsUsd' | 'listCollateral' | 'addMarket'> = {
    async summary(db, who) {
      const om = await onchainMarket(db);
      if (om) return onchainSummary(db, om, who);
      const s = await snapshot(db, who, false);
      const cols = collateralInputs(s);
      const data = aave.calculateAccountData(cols, debtInputs(s));
      const collateral: Schema<'Collateral'>[] = cols.map((c) => ({
        asset_symbol: c.symbol,
        amount: formatAmount(c.amount, c.decimals),
        amount_usd: usd(aave.valueUsd(c.amount, c.priceE8, c.decimals, 'down')),
        price_usd: usd(c.priceE8),
        max_ltv: ratio(c.ltvBps),
        liquidation_threshold: ratio(c.liquidationThresholdBps),
      }));
      const debts: Schema<'BorrowSummary'>['debts'][number][] = [...s.debts].map(([symbol, d]) => ({
        asset_symbol: symbol,
        amount: formatAmount(d.owed, s.assets.get(symbol)!.decimals),
        amount_usd: usd(aave.valueUsd(d.owed, s.prices.get(symbol)!, s.assets.get(symbol)!.decimals, 'up')),
        borrow_apr: ratio(s.markets.get(symbol)!.borrow_apr_bps),
      }));
      const liquidationPrice = cols.length === 1 ? aave.liquidationPrice(cols, 0, data.totalDebtUsd) : null;
      return {
        collateral_value_usd: usd(data.totalCollateralUsd),
        debt_usd: usd(data.totalDebtUsd),
        ltv: data.totalDebtUsd === 0n ? 0 : data.totalCollateralUsd === 0n ? 1 : wadToNumber(data.currentLtvWad),
        max_ltv: ratio(data.avgLtvBps),
        liquidation_threshold: ratio(data.avgLiquidationThresholdBps),
        health_factor: data.totalDebtUsd === 0n ? null : wadToNumber(data.healthFactorWad),
        available_to_borrow_usd: usd(data.availableBorrowsUsd),
        liquidation_price_usd: liquidationPrice === null ? null : usd(liquidationPrice),
        debts,
        collateral,
      };
    },

    async totalsUsd(db, who, held) {
      const om = await onchainMarket(db);
      if (om) {
        const sum = await onchainSummary(db, om, who);
        return { collateralUsd: parseAmount(sum.collateral_value_usd, USD_DECIMALS), debtUsd: parseAmount(sum.debt_usd, USD_DECIMALS) };
      }
      const s = await snapshot(db, who, false, held);
      const data = aave.calculateAccountData(collateralInputs(s), debtInputs(s));
      return { collateralUsd: data.totalCollateralUsd, debtUsd: data.totalDebtUsd };
    },

    async listCollateral(db, who, query) {
      const limit = pageLimit(query.limit);
      const after = decodeKey(query.cursor);
      const summary = await positions.summary(db, who);
      const rows = summary.collateral.filter((c) => after === undefined || c.asset_symbol > after).slice(0, limit + 1);
      return toPage(
        rows,
        limit,
        (r) => r,
        (r) => encodeKey(r.asset_symbol),
      );
    },

    async addMarket(db, input) {
      const asset = await ledger.requireAsset(db, input.asset);
      if (!(input.ltvBps >= 0 && input.ltvBps < input.liquidationThresholdBps && input.liquidationThresholdBps <= 10_000)) {
        throw new ApiError('validation_failed', 'need 0 <= ltv_bps < liquidation_threshold_bps <= 10000');
      }
      const m = await repo.insertMarket(db, {
        id: newId(),
        protocol_id: input.protocol ?? 'aave-v3',
        asset_symbol: asset.symbol,
        collateral_enabled: input.collateralEnabled ?? true,
        borrow_enabled: input.borrowEnabled ?? true,
        ltv_bps: input.ltvBps,
        liquidation_threshold_bps: input.liquidationThresholdBps,
        borrow_apr_bps: input.borrowAprBps,
        created_at: clock.now(),
      });
      return {
        market_id: m.id,
        asset: m.asset_symbol,
        protocol: m.protocol_id,
        ltv_bps: m.ltv_bps,
        liquidation_threshold_bps: m.liquidation_threshold_bps,
        borrow_apr_bps: m.borrow_apr_bps,
        collateral_enabled: m.collateral_enabled,
        borrow_enabled: m.borrow_enabled,
      };
    },
  };
  return positions;
}
