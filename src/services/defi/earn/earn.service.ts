// Earn: ERC-4626 vaults on the ledger. Deposits mint shares (rounded down), withdrawals burn shares
// (rounded up) or redeem them (assets rounded down); interest accrues lazily as a rising share price
// from the vault's APY and the injectable clock; rewards accrue per share and are claimed by protocol.
import { createEarnCore, type EarnDeps } from './vaults.js';
import { createEarnDeposits } from './deposit.js';
import { createEarnDraw } from './draw.js';
import { createEarnPositions } from './positions.js';
import { createEarnRewards } from './rewards.js';
import { createEarnWithdrawals } from './withdraw-move.js';
import { registerEarnSettlers } from './chain-settlers.js';
import { registerRewardSettlers } from './reward-settlers.js';

export { WITHDRAW_CONVERSION_FEE_BPS } from './vaults.js';

export type { AddVaultInput, EarnService, AccruedVault } from './types.js';
import type { EarnService } from './types.js';

export function createEarnService(deps: EarnDeps): EarnService {
  const core = createEarnCore(deps);
  const service: EarnService = { ...createEarnPositions(core), ...createEarnDeposits(core), ...createEarnWithdrawals(core), ...createEarnRewards(core), ...createEarnDraw(core) };
  registerEarnSettlers(core);
  registerRewardSettlers(core);
  return service;
}
