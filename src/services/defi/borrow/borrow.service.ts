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
import type { Schema } from '../../../lib/contract.js';

export { BORROW_CONVERSION_FEE_BPS } from './markets.js';




/** The wallet's Morpho Blue position, the protocol's own figures (strings of base units and WADs). */
export type OnchainLendingSummary = NonNullable<Schema<'BorrowSummary'>['onchain']>;


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
  summary(db: Db, who: OwnerRef): Promise<Schema<'BorrowSummary'>>;
  /** Collateral and debt in USD (8 decimals) at the last known prices, as the summary values them. */
  totalsUsd(db: Db, who: OwnerRef): Promise<{ collateralUsd: bigint; debtUsd: bigint }>;
  listCollateral(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'Collateral'>>>;
  borrow(db: Db, who: OwnerRef, body: Schema<'BorrowRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  repay(db: Db, who: OwnerRef, body: Schema<'RepayRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  deleverage(db: Db, who: OwnerRef, body: Schema<'DeleverageRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addCollateral(db: Db, who: OwnerRef, body: Schema<'AddCollateralRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  removeCollateral(db: Db, who: OwnerRef, body: Schema<'RemoveCollateralRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addMarket(db: Db, input: AddMarketInput): Promise<Record<string, unknown>>;
}

export function createBorrowService(deps: BorrowDeps): BorrowService {
  const core = createBorrowCore(deps);
  const kit: BorrowKit = { ...core, ...createMorpho(core) };
  const service: BorrowService = { ...createBorrowPositions(kit), ...createBorrowRepay(kit), ...createCollateral(kit), ...createDeleverage(kit) };
  registerBorrowSettlers(kit);
  return service;
}
