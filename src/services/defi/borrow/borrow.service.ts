// Borrow: Aave v3-style markets on the ledger. Collateral valued at the price feed (rounded down),
// debt as scaled amounts on a compounding borrow index (rounded up); every borrow and collateral
// removal keeps D / C within min(market LTV, max_ltv_after, policy max_ltv_bps) exactly.
import { type BorrowDeps, createBorrowCore } from './markets.js';
import { type BorrowKit, createMorpho } from './morpho.js';
import { createBorrowRepay } from './borrow-repay.js';
import { registerBorrowSettlers } from './chain-settlers.js';
import { createCollateral } from './collateral.js';
import { createDeleverage } from './deleverage.js';
import { createBorrowPositions } from './positions.js';

export { BORROW_CONVERSION_FEE_BPS } from './markets.js';

/** The wallet's Morpho Blue position, the protocol's own figures (strings of base units and WADs). */
export type { OnchainLendingSummary, AddMarketInput, BorrowService } from './types.js';
import type { BorrowService } from './types.js';

export function createBorrowService(deps: BorrowDeps): BorrowService {
  const core = createBorrowCore(deps);
  const kit: BorrowKit = { ...core, ...createMorpho(core) };
  const service: BorrowService = { ...createBorrowPositions(kit), ...createBorrowRepay(kit), ...createCollateral(kit), ...createDeleverage(kit) };
  registerBorrowSettlers(kit);
  return service;
}
