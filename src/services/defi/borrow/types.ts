// The borrow service's shapes, apart from its composition so its noun files import no circle.
import type { Db } from '../../../db/knex.js';
import type { PricedHoldings } from '../../../db/repositories/market.repository.js';
import type { Refusal } from '../../../lib/refusal.js';
import type { ListPage } from '../../cursor.js';
import type { OwnerRef, WriteResponse } from '../../ledger/operations.js';
import type { Schema } from '../../../lib/contract.js';

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
  /** `held`: the wallet's priced holdings when already read (the account summary reads them with the earn positions). */
  totalsUsd(db: Db, who: OwnerRef, held?: PricedHoldings): Promise<{ collateralUsd: bigint; debtUsd: bigint }>;
  listCollateral(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'Collateral'>>>;
  borrow(db: Db, who: OwnerRef, body: Schema<'BorrowRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  repay(db: Db, who: OwnerRef, body: Schema<'RepayRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  deleverage(db: Db, who: OwnerRef, body: Schema<'DeleverageRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addCollateral(db: Db, who: OwnerRef, body: Schema<'AddCollateralRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  removeCollateral(db: Db, who: OwnerRef, body: Schema<'RemoveCollateralRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addMarket(db: Db, input: AddMarketInput): Promise<Record<string, unknown>>;
}
