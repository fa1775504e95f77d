// The earn service's shapes, apart from its composition so its noun files import no circle.
import type { Db, Knex } from '../../../db/knex.js';
import type { ValuedPosition, VaultRow } from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import type { Refusal } from '../../../lib/refusal.js';
import type { ListPage } from '../../cursor.js';
import type { OwnerRef, WriteResponse } from '../../ledger/operations.js';
import type { EarnDraw } from '../../ledger/payments.js';
import type { ChainSettler } from '../../ledger/settling.js';
import type { Schema } from '../../../lib/contract.js';

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
  /** `positions`: the wallet's valued positions when already read (the account summary reads them with the borrow holdings). */
  valueUsd(db: Db, who: OwnerRef, positions?: ValuedPosition[]): Promise<bigint>;
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
  /** Redeems `need.amount` of `need.asset` out of the wallet's positions into its available balance (a payment drawing on Earn); null when they fall short. */
  drawShortfall: EarnDraw;
  /** Settles a payment that redeemed on-chain positions in its account call, from the receipt's vault events. */
  settleOnchainDraw: ChainSettler;
  /** The vault's state accrued to now, without writing (for reads). */
  accruedVault(v: VaultRow): AccruedVault;
}

export interface AccruedVault {
  state: erc.VaultState;
  accRewardRay: bigint;
  at: Date;
}
