// Earn: ERC-4626 vaults on the ledger. Deposits mint shares (rounded down), withdrawals burn shares
// (rounded up) or redeem them (assets rounded down); interest accrues lazily as a rising share price
// from the vault's APY and the injectable clock; rewards accrue per share and are claimed by protocol.
import type { Db, Knex } from '../../../db/knex.js';
import type { VaultRow } from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import type { Refusal } from '../../../lib/refusal.js';
import type { ListPage } from '../../cursor.js';
import type { OwnerRef, WriteResponse } from '../../operation.service.js';
import { createEarnCore, type EarnDeps } from './vaults.js';
import { createEarnDeposits } from './deposit.js';
import { createEarnPositions } from './positions.js';
import { createEarnRewards } from './rewards.js';
import { createEarnWithdrawals } from './withdraw-move.js';
import { registerEarnSettlers } from './chain-settlers.js';
import { registerRewardSettlers } from './reward-settlers.js';
import type { Schema } from '../../../lib/contract.js';

export { WITHDRAW_CONVERSION_FEE_BPS } from './vaults.js';






export interface AddVaultInput {
  name: string;
  protocol: string;
  asset: string;
  apyBps: number;
  address?: string;
  decimalsOffset?: number;
  capacity?: string | null;
  rewardAsset?: string | null;
  /** Reward units per share per year as a ratio of the deposit (bps), converted to a per-share rate. */
  rewardBps?: number;
}

export interface EarnService {
  listPositions(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'EarnPosition'>>>;
  getPosition(db: Db, who: OwnerRef, id: string): Promise<Schema<'EarnPosition'>>;
  /** USD value (8 decimals) of every position of the wallet at the last known prices (unpriced assets count 0). */
  valueUsd(db: Db, who: OwnerRef): Promise<bigint>;
  listOpportunities(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'EarnOpportunity'>>>;
  deposit(db: Db, who: OwnerRef, body: Schema<'EarnDepositRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  withdraw(db: Db, who: OwnerRef, body: Schema<'EarnWithdrawRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  move(db: Db, who: OwnerRef, body: Schema<'EarnMoveRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  claimRewards(db: Db, who: OwnerRef, body: Schema<'ClaimRewardsRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;

  addVault(db: Db, input: AddVaultInput): Promise<Schema<'EarnOpportunity'>>;
  /** Every vault (the owner's view, no policy filter), highest APY first. */
  listVaults(db: Db): Promise<(Schema<'EarnOpportunity'> & { active: boolean })[]>;
  findVaultByAddress(db: Db, address: string): Promise<VaultRow | undefined>;
  /** Pays exactly `assets` out of the wallet's position in the vault into its available balance (caller holds the locks). */
  redeemAssetsToWallet(trx: Knex.Transaction, who: OwnerRef, vaultId: string, assets: bigint, operationId: string | null): Promise<{ shares: bigint }>;
  /** Deposits `assets` from the wallet's available balance into the vault. */
  depositFromWallet(trx: Knex.Transaction, who: OwnerRef, vaultId: string, assets: bigint, operationId: string | null): Promise<{ positionId: string; shares: bigint }>;
  /** The vault's state accrued to now, without writing (for reads). */
  accruedVault(v: VaultRow): AccruedVault;
}

export interface AccruedVault {
  state: erc.VaultState;
  accRewardRay: bigint;
  at: Date;
}

export function createEarnService(deps: EarnDeps): EarnService {
  const core = createEarnCore(deps);
  const service: EarnService = { ...createEarnPositions(core), ...createEarnDeposits(core), ...createEarnWithdrawals(core), ...createEarnRewards(core) };
  registerEarnSettlers(core);
  registerRewardSettlers(core);
  return service;
}
