// The DeFi area's services, wired once on top of the ledger area: earn vaults, conversions (whose
// settler joins the operation service's settlement loop) and borrow markets, whose values join
// the account summary.
import type { Dex } from '../../chain/dex.js';
import type { LendingVenue } from '../../chain/lending.js';
import type { EarnVenue } from '../../chain/vaults.js';
import { readDefiHoldings } from '../../db/repositories/holdings.repository.js';
import type { Clock } from '../../lib/clock.js';
import { createBorrowService, type BorrowService } from './borrow/borrow.service.js';
import { createConversionService, type ConversionService } from './conversions/conversion.service.js';
import { createEarnService, type EarnService } from './earn/earn.service.js';
import type { LedgerArea } from '../ledger/area.js';

export interface DefiArea {
  earn: EarnService;
  conversions: ConversionService;
  borrow: BorrowService;
}

export function createDefiArea(deps: {
  clock: Clock;
  ledger: Pick<LedgerArea, 'ledger' | 'policy' | 'operations' | 'account' | 'payments'>;
  dex?: Dex | null;
  venue?: EarnVenue | null;
  lending?: LendingVenue | null;
}): DefiArea {
  const { clock } = deps;
  const { ledger, policy, operations } = deps.ledger;
  const earn = createEarnService({ clock, ledger, operations, policy, venue: deps.venue });
  const conversions = createConversionService({ clock, ledger, operations, policy, earn, dex: deps.dex });
  const borrow = createBorrowService({ clock, ledger, operations, policy, lending: deps.lending });
  // A payment short of funds draws on the agent's Earn positions (issue 26).
  deps.ledger.payments.registerEarnDraw(earn.drawShortfall, earn.settleOnchainDraw);
  // Earn positions and borrow holdings in one statement: the account summary stays within its round trips.
  deps.ledger.account.registerHoldings(async (db, who) => {
    const held = await readDefiHoldings(db, who.walletId);
    return { earnUsd: await earn.valueUsd(db, who, held.earn), ...(await borrow.totalsUsd(db, who, held.borrow)) };
  });
  return { earn, conversions, borrow };
}
