// Earn's shared core: vault accrual (interest and rewards, lazily from the clock), share minting and burning,
// the public shapes of positions and opportunities, and the on-chain vault reads; the noun files build on it.
import type { OnchainVaultDetails } from '../../../chain/evm/index.js';
import type { Address } from '../../../chain/port.js';
import type { EarnVenue } from '../../../chain/vaults.js';
import { findWalletByAgent } from '../../../db/repositories/agent.repository.js';
import type { Db } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import type { PositionRow, VaultRow } from '../../../db/repositories/vault.repository.js';
import { lockBalanceRows, type AssetRow } from '../../../db/repositories/ledger.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import type { Clock } from '../../../lib/clock.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount, mulDiv } from '../../../lib/money.js';
import { type LedgerService, type PriceBook, USD_DECIMALS } from '../../ledger/ledger.js';
import type { OperationService, OwnerRef } from '../../ledger/operations.js';
import type { PolicyService } from '../../ledger/policy.js';
import type { AccruedVault } from './types.js';
import type { Schema } from '../../../lib/contract.js';

/** Swap fee (bps) when a withdrawal is paid out in another asset (`destination_asset` + `allow_conversion`). */
export const WITHDRAW_CONVERSION_FEE_BPS = 30n;

export const bpsToFraction = (bps: number): number => bps / 10_000;

export interface EarnDeps {
  clock: Clock;
  ledger: LedgerService;
  operations: OperationService;
  policy: PolicyService;
  venue?: EarnVenue | null;
}

export type EarnCore = ReturnType<typeof createEarnCore>;

export function createEarnCore(deps: EarnDeps) {
  const { clock, ledger, operations, policy } = deps;
  const venue = deps.venue ?? null;

  /** Whether the vault is an ERC-4626 contract on the configured chain (evm mode, development bootstrap). */
  const onchain = async (db: Db, v: VaultRow): Promise<boolean> => venue !== null && (await venue.isOnchain(db, v.address));
  async function walletAddress(db: Db, agentId: string): Promise<Address> {
    const w = await findWalletByAgent(db, agentId);
    if (!w?.address) throw new ApiError('invalid_state_transition', 'the wallet has no on-chain address');
    return w.address as Address;
  }
  async function onchainDetails(db: Db, c: Omit<OnchainVaultDetails['onchain_vault'], 'router'>): Promise<OnchainVaultDetails> {
    return { onchain_vault: { router: (await venue!.router(db))!, ...c } };
  }
  /** Shares (and assets) of a withdrawal from an on-chain vault: all the wallet's shares, or the vault's previewWithdraw. */
  async function onchainWithdrawal(
    db: Db,
    who: OwnerRef,
    v: VaultRow,
    p: PositionRow,
    amount: bigint | 'all',
    what: 'withdraw' | 'move',
  ): Promise<{ shares: bigint; assets: bigint; minimum: bigint }> {
    const vault = v.address as Address;
    const held = await venue!.sharesOf(vault, await walletAddress(db, who.agentId));
    const w =
      amount === 'all' ? { shares: held, assets: await venue!.previewRedeem(vault, held), minimum: 0n } : { shares: await venue!.previewWithdraw(vault, amount), assets: amount, minimum: amount };
    if (amount !== 'all' && w.shares > held) throw new ApiError('insufficient_funds', 'the position is worth less than the amount requested', { position_id: p.id });
    if (w.shares <= 0n || w.assets <= 0n) throw new ApiError('insufficient_funds', `the position has nothing to ${what}`, { position_id: p.id });
    return w;
  }

  /** Lazy accrual: whole seconds since last_accrued_at; the sub-second remainder carries over. */
  function accruedVault(v: VaultRow): AccruedVault {
    const now = clock.now();
    const last = v.last_accrued_at ?? now;
    const seconds = BigInt(Math.max(0, Math.floor((now.getTime() - last.getTime()) / 1000)));
    const totalShares = BigInt(v.total_shares);
    let totalAssets = BigInt(v.total_assets);
    let acc = BigInt(v.acc_reward_per_share_ray);
    // Interest and rewards accrue to shareholders: an empty vault earns nothing.
    if (totalShares > 0n && seconds > 0n) {
      totalAssets = erc.accrueTotalAssets(totalAssets, BigInt(v.apy_bps), seconds);
      acc += erc.rewardPerShareDelta(BigInt(v.reward_rate_ray), seconds);
    }
    return {
      state: { totalAssets, totalShares, decimalsOffset: v.decimals_offset },
      accRewardRay: acc,
      at: v.last_accrued_at ? new Date(last.getTime() + Number(seconds) * 1000) : now,
    };
  }

  async function saveVault(trx: Db, v: VaultRow, a: AccruedVault): Promise<void> {
    await repo.updateVaultState(trx, v.id, { total_assets: a.state.totalAssets, total_shares: a.state.totalShares, acc_reward_per_share_ray: a.accRewardRay, last_accrued_at: a.at });
  }

  /** Settles a position's rewards up to the vault's accumulator (Synthetix `updateReward`). */
  function settleRewards(p: PositionRow, acc: bigint): { rewards: bigint; checkpoint: bigint } {
    return { rewards: BigInt(p.rewards_accrued) + erc.earnedRewards(BigInt(p.shares), acc, BigInt(p.reward_checkpoint_ray)), checkpoint: acc };
  }

  async function lockedVault(trx: Db, id: string): Promise<VaultRow> {
    const [v] = await repo.lockVaults(trx, [id]);
    if (!v) throw new ApiError('not_found', 'vault not found', { vault_id: id });
    return v;
  }

  async function assetOf(db: Db, symbol: string): Promise<AssetRow> {
    return ledger.requireAsset(db, symbol);
  }

  const shareDecimals = (asset: AssetRow, v: VaultRow) => asset.decimals + v.decimals_offset;

  const resolveAmount = ledger.resolveAmount;

  /** The agent's allow-lists as a predicate (asset null = protocol only); no policy allows here and is denied by create. */
  async function allowedProtocols(db: Db, agentId: string): Promise<(protocol: string, asset: string | null) => boolean> {
    const p = await policy.get(db, agentId);
    return (protocol, asset) => {
      if (!p) return true;
      const protocolOk = p.allowed_protocols === undefined || p.allowed_protocols === 'all' || p.allowed_protocols.includes(protocol);
      const assetOk = asset === null || p.allowed_assets === undefined || p.allowed_assets === 'all' || p.allowed_assets.includes(asset);
      return protocolOk && assetOk;
    };
  }

  /** Highest-APY active vault for the asset that the policy allows and that has room for `amount`. */
  async function bestVault(trx: Db, agentId: string, asset: string, amount: bigint | null, excludeId?: string): Promise<VaultRow> {
    const allowed = await allowedProtocols(trx, agentId);
    for (const v of await repo.listVaults(trx, { activeOnly: true, asset })) {
      if (v.id === excludeId || !allowed(v.protocol_id, v.asset_symbol)) continue;
      const room = erc.maxDeposit(accruedVault(v).state, v.capacity === null ? null : BigInt(v.capacity));
      if (amount !== null && room !== null && room < amount) continue;
      return v;
    }
    throw new ApiError('not_found', `no eligible ${asset} vault is available`, { asset });
  }

  /** `book`: prices already read (with the position); else the price is read here. */
  async function publicPosition(db: Db, p: PositionRow, vault?: VaultRow, book?: PriceBook): Promise<Schema<'EarnPosition'>> {
    const v = vault ?? (await repo.findVault(db, p.vault_id))!;
    const asset = await assetOf(db, v.asset_symbol);
    const a = accruedVault(v);
    const isOnchain = await onchain(db, v);
    // On chain the position is the wallet's shares, valued by the vault's own convertToAssets.
    const shares = isOnchain ? await venue!.sharesOf(v.address as Address, await walletAddress(db, p.agent_id)) : BigInt(p.shares);
    const value = isOnchain ? await venue!.convertToAssets(v.address as Address, shares) : erc.previewRedeem(a.state, shares);
    const principal = BigInt(p.principal);
    let valueUsd: string | null;
    try {
      valueUsd = formatAmount(book ? book.usdValue(asset, value) : await ledger.usdValue(db, asset, value), USD_DECIMALS);
    } catch {
      valueUsd = null; // a stale price leaves the USD value unknown; the position itself still reads
    }
    const pending: Schema<'EarnPosition'>['pending_rewards'] = [];
    if (v.reward_asset_symbol) {
      const rewardAsset = await assetOf(db, v.reward_asset_symbol);
      const { rewards } = settleRewards(p, a.accRewardRay);
      pending.push({ asset_symbol: rewardAsset.symbol, amount: formatAmount(rewards, rewardAsset.decimals) });
    }
    return {
      id: p.id,
      vault_id: v.id,
      vault_address: v.address,
      protocol: v.protocol_id,
      asset_symbol: v.asset_symbol,
      shares: formatAmount(shares, shareDecimals(asset, v)),
      value: formatAmount(value, asset.decimals),
      value_usd: valueUsd,
      principal: formatAmount(principal, asset.decimals),
      earned: formatAmount(value > principal ? value - principal : 0n, asset.decimals),
      apy: bpsToFraction(v.apy_bps),
      pending_rewards: pending,
      created_at: p.created_at.toISOString(),
      updated_at: p.updated_at.toISOString(),
    };
  }

  async function publicOpportunity(db: Db, v: VaultRow): Promise<Schema<'EarnOpportunity'>> {
    const asset = await assetOf(db, v.asset_symbol);
    const a = accruedVault(v);
    const capacity = v.capacity === null ? null : BigInt(v.capacity);
    const room = erc.maxDeposit(a.state, capacity);
    return {
      vault_id: v.id,
      vault_address: v.address,
      name: v.name,
      protocol: v.protocol_id,
      asset_symbol: v.asset_symbol,
      apy: bpsToFraction(v.apy_bps),
      tvl: formatAmount((await onchain(db, v)) ? await venue!.totalAssets(v.address as Address) : a.state.totalAssets, asset.decimals),
      capacity: capacity === null ? null : formatAmount(capacity, asset.decimals),
      available_capacity: room === null ? null : formatAmount(room, asset.decimals),
    };
  }

  /**
   * Mints shares for `assets` into the wallet's position; the caller moved the money and holds the vault lock. One
   * statement (repo.mintShares) writes the vault, the position and, given `operationId`, the shares into that
   * operation's details: the vault row is held for it and the COMMIT.
   */
  async function mintInto(
    trx: Db,
    who: OwnerRef,
    v: VaultRow,
    a: AccruedVault,
    assets: bigint,
    positionId?: string,
    operationId?: string,
  ): Promise<{ position: PositionRow; shares: bigint; accrued: AccruedVault }> {
    const room = erc.maxDeposit(a.state, v.capacity === null ? null : BigInt(v.capacity));
    if (room !== null && room < assets) {
      throw new ApiError('limit_exceeded', `the vault has room for ${formatAmount(room, (await assetOf(trx, v.asset_symbol)).decimals)} ${v.asset_symbol} only`, {
        limit: 'vault_capacity',
        vault_id: v.id,
      });
    }
    const shares = erc.previewDeposit(a.state, assets);
    if (shares <= 0n) throw new ApiError('validation_failed', 'the amount is too small to mint a vault share', { field: 'amount' });
    const accrued: AccruedVault = { ...a, state: erc.afterDeposit(a.state, assets, shares) };
    const s = accrued.state;
    const position = await repo.mintShares(trx, {
      vault: { id: v.id, total_assets: s.totalAssets, total_shares: s.totalShares, acc_reward_per_share_ray: accrued.accRewardRay, last_accrued_at: accrued.at },
      position: { id: positionId ?? newId(), agent_id: who.agentId, wallet_id: who.walletId, shares, principal: assets, at: clock.now() },
      operation: operationId ? { id: operationId, details: { shares: shares.toString() } } : undefined,
    });
    return { position, shares, accrued };
  }

  /** Locks the wallet's balance rows of `assets` before any vault row (vault.repository's lock order). */
  async function lockBalances(trx: Db, walletId: string, assets: string[]): Promise<void> {
    await lockBalanceRows(trx, walletId, assets, clock.now());
  }

  /** Burns shares of a position for `assets` (both already computed); the caller moves the money. */
  async function burnFrom(trx: Db, v: VaultRow, a: AccruedVault, p: PositionRow, shares: bigint, assets: bigint): Promise<void> {
    const held = BigInt(p.shares);
    if (shares > held) throw new ApiError('insufficient_funds', 'the position holds fewer shares than the withdrawal needs', { position_id: p.id });
    const { rewards, checkpoint } = settleRewards(p, a.accRewardRay);
    const principal = BigInt(p.principal);
    // Principal leaves in proportion to the shares burned (rounded up, so `earned` is never overstated).
    const principalOut = shares === held ? principal : mulDiv(principal, shares, held, 'up');
    await repo.updatePosition(trx, p.id, {
      shares: held - shares,
      principal: principal > principalOut ? principal - principalOut : 0n,
      reward_checkpoint_ray: checkpoint,
      rewards_accrued: rewards,
      updated_at: clock.now(),
    });
    await saveVault(trx, v, { ...a, state: erc.afterWithdraw(a.state, assets, shares) });
  }

  const vaultAccount = (v: VaultRow) => ({ kind: 'external' as const, name: `earn:vault:${v.id}` });

  /** Shares and assets of a withdrawal request against a position: exact assets (shares up) or all shares (assets down). */
  function withdrawalOf(a: AccruedVault, p: PositionRow, amount: bigint | 'all'): { shares: bigint; assets: bigint } {
    if (amount === 'all') {
      const shares = BigInt(p.shares);
      return { shares, assets: erc.previewRedeem(a.state, shares) };
    }
    const shares = erc.previewWithdraw(a.state, amount);
    if (shares > BigInt(p.shares)) throw new ApiError('insufficient_funds', 'the position is worth less than the amount requested', { position_id: p.id });
    return { shares, assets: amount };
  }

  async function lockOwnPosition(trx: Db, who: OwnerRef, id: string): Promise<PositionRow> {
    const p = await repo.findPosition(trx, who.walletId, id);
    if (!p) throw new ApiError('not_found', 'earn position not found', { position_id: id });
    return p;
  }

  return {
    clock,
    ledger,
    operations,
    policy,
    venue,
    onchain,
    walletAddress,
    onchainDetails,
    onchainWithdrawal,
    accruedVault,
    saveVault,
    settleRewards,
    lockedVault,
    assetOf,
    shareDecimals,
    resolveAmount,
    allowedProtocols,
    bestVault,
    publicPosition,
    publicOpportunity,
    mintInto,
    lockBalances,
    burnFrom,
    vaultAccount,
    withdrawalOf,
    lockOwnPosition,
  };
}
