// Borrow: Aave v3-style markets on the ledger. Collateral valued at the price feed (rounded down),
// debt as scaled amounts on a compounding borrow index (rounded up); every borrow and collateral
// removal keeps D / C within min(market LTV, max_ltv_after, policy max_ltv_bps) exactly.
import type { Db } from '../../../db/knex.js';
import type { Refusal } from '../../../lib/refusal.js';
import type { ListPage } from '../../cursor.js';
import type { OwnerRef, WriteResponse } from '../../operation.service.js';
import { type BorrowDeps, createBorrowCore } from './markets.js';
import { type BorrowKit, createMorpho } from './morpho.js';
import { createBorrowRepay } from './borrow-repay.js';
import { registerBorrowSettlers } from './chain-settlers.js';
import { createCollateral } from './collateral.js';
import { createDeleverage } from './deleverage.js';
import { createBorrowPositions } from './positions.js';

export { BORROW_CONVERSION_FEE_BPS } from './markets.js';

export interface PublicCollateral {
  asset_symbol: string;
  amount: string;
  amount_usd: string;
  price_usd: string;
  max_ltv: number;
  liquidation_threshold: number;
  /** On a real chain: the lending market holding it. */
  market_address?: string;
}

export interface PublicDebt {
  asset_symbol: string;
  amount: string;
  amount_usd: string;
  borrow_apr: number;
}

export interface BorrowSummary {
  collateral_value_usd: string;
  debt_usd: string;
  ltv: number;
  max_ltv: number;
  liquidation_threshold: number;
  health_factor: number | null;
  available_to_borrow_usd: string;
  liquidation_price_usd: string | null;
  debts: PublicDebt[];
  collateral: PublicCollateral[];
  onchain?: OnchainLendingSummary;
}

/** The wallet's Morpho Blue position, the protocol's own figures (strings of base units and WADs). */
export interface OnchainLendingSummary {
  market_address: string;
  market_id: string;
  collateral_asset: string;
  loan_asset: string;
  collateral_units: string;
  borrow_shares: string;
  borrowed_units: string;
  oracle_price: string;
  lltv_wad: string;
  ltv_wad: string;
  health_factor_wad: string | null;
}

type AmountBody = { amount?: string; amount_usd?: string };
export interface BorrowBody extends AmountBody { asset: string; max_ltv_after?: number }
export interface RepayBody extends AmountBody { asset: string; repay_all?: boolean; source_asset?: string; allow_conversion?: boolean }
export interface DeleverageBody { target_ltv: number; max_repay_amount_usd?: string; source_asset?: string; use_available_cash_first?: boolean; allow_conversion?: boolean; allow_partial?: boolean }
export interface AddCollateralBody extends AmountBody { asset: string; source_asset?: string; allow_conversion?: boolean }
export interface RemoveCollateralBody extends AmountBody { asset: string; remove_all?: boolean; max_ltv_after?: number }

export interface AddMarketInput {
  asset: string;
  protocol?: string;
  ltvBps: number;
  liquidationThresholdBps: number;
  borrowAprBps: number;
  collateralEnabled?: boolean;
  borrowEnabled?: boolean;
}

export interface BorrowService {
  summary(db: Db, who: OwnerRef): Promise<BorrowSummary>;
  /** Collateral and debt in USD (8 decimals) at the last known prices, as the summary values them. */
  totalsUsd(db: Db, who: OwnerRef): Promise<{ collateralUsd: bigint; debtUsd: bigint }>;
  listCollateral(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicCollateral>>;
  borrow(db: Db, who: OwnerRef, body: BorrowBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  repay(db: Db, who: OwnerRef, body: RepayBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  deleverage(db: Db, who: OwnerRef, body: DeleverageBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addCollateral(db: Db, who: OwnerRef, body: AddCollateralBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  removeCollateral(db: Db, who: OwnerRef, body: RemoveCollateralBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addMarket(db: Db, input: AddMarketInput): Promise<Record<string, unknown>>;
}

export function createBorrowService(deps: BorrowDeps): BorrowService {
  const core = createBorrowCore(deps);
  const kit: BorrowKit = { ...core, ...createMorpho(core) };
  const service: BorrowService = { ...createBorrowPositions(kit), ...createBorrowRepay(kit), ...createCollateral(kit), ...createDeleverage(kit) };
  registerBorrowSettlers(kit);
  return service;
}
