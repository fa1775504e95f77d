// Earn: ERC-4626 vaults on the ledger. Deposits mint shares (rounded down), withdrawals burn shares
// (rounded up) or redeem them (assets rounded down); interest accrues lazily as a rising share price
// from the vault's APY and the injectable clock; rewards accrue per share and are claimed by protocol.
import type { OnchainVaultDetails } from '../chain/evm.js';
import type { Address } from '../chain/port.js';
import type { EarnVenue } from '../chain/vaults.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { findHeldByOperation } from '../db/repositories/ledger.repository.js';
import type { Db, Knex } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import { lockPolicy, type OperationRow } from '../db/repositories/operation.repository.js';
import * as repo from '../db/repositories/vault.repository.js';
import type { PositionRow, VaultRow } from '../db/repositories/vault.repository.js';
import { findPrice, type AssetRow } from '../db/repositories/ledger.repository.js';
import * as erc from '../lib/defi/erc4626.js';
import { convertAtPrice } from '../lib/defi/pricing.js';
import type { Clock } from '../lib/clock.js';
import { ApiError } from '../lib/errors.js';
import { isRefusal, type Refusal } from '../lib/refusal.js';
import { newId } from '../lib/ids.js';
import { formatAmount, mulDiv } from '../lib/money.js';
import { decodeKey, decodeKeyset, encodeKey, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';
import { USD_DECIMALS, type LedgerService } from './ledger.service.js';
import type { OperationService, OwnerRef, WriteResponse } from './operation.service.js';
import type { PolicyService } from './policy.service.js';

/** Swap fee (bps) when a withdrawal is paid out in another asset (`destination_asset` + `allow_conversion`). */
export const WITHDRAW_CONVERSION_FEE_BPS = 30n;

export interface PublicPosition {
  id: string;
  vault_id: string;
  vault_address: string;
  protocol: string;
  asset_symbol: string;
  shares: string;
  value: string;
  value_usd: string | null;
  principal: string;
  earned: string;
  apy: number;
  pending_rewards: { asset_symbol: string; amount: string }[];
  created_at: string;
  updated_at: string;
}

export interface PublicOpportunity {
  vault_id: string;
  vault_address: string;
  name: string;
  protocol: string;
  asset_symbol: string;
  apy: number;
  tvl: string;
  capacity: string | null;
  available_capacity: string | null;
}

export interface DepositBody {
  asset: string;
  vault_id?: string;
  use_best_available?: boolean;
  amount?: string;
  amount_usd?: string;
}

export interface WithdrawBody {
  position_id: string;
  withdraw_all?: boolean;
  destination_asset?: string;
  allow_conversion?: boolean;
  amount?: string;
  amount_usd?: string;
}

export interface MoveBody {
  from_position_id: string;
  move_all?: boolean;
  to_vault_id?: string;
  to_best_available?: boolean;
  amount?: string;
  amount_usd?: string;
}

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
  listPositions(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicPosition>>;
  getPosition(db: Db, who: OwnerRef, id: string): Promise<PublicPosition>;
  /** USD value (8 decimals) of every position of the wallet at the last known prices (unpriced assets count 0). */
  valueUsd(db: Db, who: OwnerRef): Promise<bigint>;
  listOpportunities(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicOpportunity>>;
  deposit(db: Db, who: OwnerRef, body: DepositBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  withdraw(db: Db, who: OwnerRef, body: WithdrawBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  move(db: Db, who: OwnerRef, body: MoveBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  claimRewards(db: Db, who: OwnerRef, body: { protocols?: string[] }, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;

  addVault(db: Db, input: AddVaultInput): Promise<PublicOpportunity>;
  /** Every vault (the owner's view, no policy filter), highest APY first. */
  listVaults(db: Db): Promise<(PublicOpportunity & { active: boolean })[]>;
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

const bpsToFraction = (bps: number): number => bps / 10_000;

export function createEarnService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService; venue?: EarnVenue | null }): EarnService {
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
  async function onchainWithdrawal(db: Db, who: OwnerRef, v: VaultRow, p: PositionRow, amount: bigint | 'all'): Promise<{ shares: bigint; assets: bigint; minimum: bigint }> {
    const vault = v.address as Address;
    const held = await venue!.sharesOf(vault, await walletAddress(db, who.agentId));
    if (amount === 'all') return { shares: held, assets: await venue!.previewRedeem(vault, held), minimum: 0n };
    const shares = await venue!.previewWithdraw(vault, amount);
    if (shares > held) throw new ApiError('insufficient_funds', 'the position is worth less than the amount requested', { position_id: p.id });
    return { shares, assets: amount, minimum: amount };
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

  async function publicPosition(db: Db, p: PositionRow, vault?: VaultRow): Promise<PublicPosition> {
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
      valueUsd = formatAmount(await ledger.usdValue(db, asset, value), USD_DECIMALS);
    } catch {
      valueUsd = null; // a stale price leaves the USD value unknown; the position itself still reads
    }
    const pending: PublicPosition['pending_rewards'] = [];
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

  async function publicOpportunity(db: Db, v: VaultRow): Promise<PublicOpportunity> {
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

  /** Mints shares for `assets` into the wallet's position; the caller moved the money and holds the vault lock. */
  async function mintInto(trx: Db, who: OwnerRef, v: VaultRow, a: AccruedVault, assets: bigint, positionId?: string): Promise<{ position: PositionRow; shares: bigint; accrued: AccruedVault }> {
    const room = erc.maxDeposit(a.state, v.capacity === null ? null : BigInt(v.capacity));
    if (room !== null && room < assets) {
      throw new ApiError('limit_exceeded', `the vault has room for ${formatAmount(room, (await assetOf(trx, v.asset_symbol)).decimals)} ${v.asset_symbol} only`, { limit: 'vault_capacity', vault_id: v.id });
    }
    const shares = erc.previewDeposit(a.state, assets);
    if (shares <= 0n) throw new ApiError('validation_failed', 'the amount is too small to mint a vault share', { field: 'amount' });
    const now = clock.now();
    const position = await repo.ensurePosition(trx, { id: positionId ?? newId(), agent_id: who.agentId, wallet_id: who.walletId, vault_id: v.id, reward_checkpoint_ray: a.accRewardRay, at: now });
    const { rewards, checkpoint } = settleRewards(position, a.accRewardRay);
    await repo.updatePosition(trx, position.id, { shares: BigInt(position.shares) + shares, principal: BigInt(position.principal) + assets, reward_checkpoint_ray: checkpoint, rewards_accrued: rewards, updated_at: now });
    const accrued: AccruedVault = { ...a, state: erc.afterDeposit(a.state, assets, shares) };
    await saveVault(trx, v, accrued);
    return { position, shares, accrued };
  }

  /** Burns shares of a position for `assets` (both already computed); the caller moves the money. */
  async function burnFrom(trx: Db, v: VaultRow, a: AccruedVault, p: PositionRow, shares: bigint, assets: bigint): Promise<void> {
    const held = BigInt(p.shares);
    if (shares > held) throw new ApiError('insufficient_funds', 'the position holds fewer shares than the withdrawal needs', { position_id: p.id });
    const { rewards, checkpoint } = settleRewards(p, a.accRewardRay);
    const principal = BigInt(p.principal);
    // Principal leaves in proportion to the shares burned (rounded up, so `earned` is never overstated).
    const principalOut = shares === held ? principal : mulDiv(principal, shares, held, 'up');
    await repo.updatePosition(trx, p.id, { shares: held - shares, principal: principal > principalOut ? principal - principalOut : 0n, reward_checkpoint_ray: checkpoint, rewards_accrued: rewards, updated_at: clock.now() });
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

  const service: EarnService = {
    accruedVault,

    async listPositions(db, who, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listPositions(db, who.walletId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      return { ...page, items: await Promise.all(page.items.map((r) => publicPosition(db, r))) };
    },

    async getPosition(db, who, id) {
      const p = await repo.findPosition(db, who.walletId, id);
      if (!p) throw new ApiError('not_found', 'earn position not found');
      return publicPosition(db, p);
    },

    async valueUsd(db, who) {
      let total = 0n;
      for (const p of await repo.listAllPositions(db, who.walletId)) {
        const shares = BigInt(p.shares);
        if (shares <= 0n) continue;
        const v = (await repo.findVault(db, p.vault_id))!;
        const price = await findPrice(db, v.asset_symbol);
        if (!price) continue;
        const asset = await assetOf(db, v.asset_symbol);
        total += mulDiv(erc.previewRedeem(accruedVault(v).state, shares), BigInt(price.usd_e8), 10n ** BigInt(asset.decimals));
      }
      return total;
    },

    async listOpportunities(db, who, query) {
      const limit = pageLimit(query.limit);
      const after = decodeKey(query.cursor);
      const allowed = await allowedProtocols(db, who.agentId);
      const vaults = (await repo.listVaults(db, { activeOnly: true })).filter((v) => allowed(v.protocol_id, v.asset_symbol));
      const keyOf = (v: VaultRow) => `${String(100_000 - v.apy_bps).padStart(6, '0')}:${v.id}`;
      const rows = vaults.filter((v) => after === undefined || keyOf(v) > after).slice(0, limit + 1);
      const page = toPage(rows, limit, (r) => r, (r) => encodeKey(keyOf(r)));
      return { ...page, items: await Promise.all(page.items.map((v) => publicOpportunity(db, v))) };
    },

    async deposit(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockPolicy(trx, who.agentId);
        const asset = await assetOf(trx, body.asset);
        const hasVault = body.vault_id !== undefined && body.vault_id !== null;
        if (hasVault === (body.use_best_available === true)) throw new ApiError('validation_failed', 'give exactly one of vault_id and use_best_available: true', { fields: ['vault_id', 'use_best_available'] });
        const amount = (await resolveAmount(trx, asset, body)) as bigint;
        const candidate = hasVault ? await repo.findVault(trx, body.vault_id!) : await bestVault(trx, who.agentId, asset.symbol, amount);
        if (!candidate || !candidate.active) throw new ApiError('not_found', 'vault not found', { vault_id: body.vault_id });
        if (candidate.asset_symbol !== asset.symbol) throw new ApiError('validation_failed', `vault ${candidate.id} holds ${candidate.asset_symbol}, not ${asset.symbol}`, { field: 'asset' });
        const v = await lockedVault(trx, candidate.id);
        const a = accruedVault(v);
        const existing = await repo.findPositionByVault(trx, who.walletId, v.id);
        const positionId = existing?.id ?? newId();
        if (await onchain(trx, v)) {
          // Settled by the worker on chain: the amount is held now, the shares are what the vault's Deposit event says.
          const estimate = await venue!.previewDeposit(v.address as Address, amount);
          if (estimate <= 0n) throw new ApiError('validation_failed', 'the amount is too small to mint a vault share', { field: 'amount' });
          const created = await operations.create(trx, {
            principal: who,
            type: 'earn.deposit',
            resource: { type: 'earn_position', id: positionId },
            asset: asset.symbol,
            amount,
            policy: { protocol: v.protocol_id },
            toAddress: v.address,
            details: { vault_id: v.id, position_id: positionId, shares: estimate.toString(), ...(await onchainDetails(trx, { action: 'deposit', vault: v.address as Address, amount: amount.toString(), minimum: '0' })) },
            eventData: { vault_id: v.id, position_id: positionId },
            humanMessage: `Depositing ${formatAmount(amount, asset.decimals)} ${asset.symbol} into ${v.name}`,
            idempotencyKey,
          });
          if (isRefusal(created)) return created;
          const { operation } = created;
          return operations.writeResponse(operation);
        }
        const shares = erc.previewDeposit(a.state, amount);
        const created = await operations.create(trx, {
          principal: who,
          type: 'earn.deposit',
          resource: { type: 'earn_position', id: positionId },
          asset: asset.symbol,
          amount,
          policy: { protocol: v.protocol_id },
          settlement: 'immediate',
          toAddress: v.address,
          details: { vault_id: v.id, position_id: positionId, shares: shares.toString() },
          eventData: { vault_id: v.id, position_id: positionId },
          humanMessage: `Depositing ${formatAmount(amount, asset.decimals)} ${asset.symbol} into ${v.name}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        if (operation.status === 'execution_failed') return operations.writeResponse(operation);
        await ledger.post(trx, {
          operationId: operation.id,
          entryType: 'earn.deposit',
          postings: [
            { account: { kind: 'available', walletId: who.walletId }, asset: asset.symbol, amount: -amount },
            { account: vaultAccount(v), asset: asset.symbol, amount },
          ],
        });
        await mintInto(trx, who, v, a, amount, positionId);
        return operations.writeResponse(operation);
      });
    },

    async withdraw(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockPolicy(trx, who.agentId);
        const found = await lockOwnPosition(trx, who, body.position_id);
        const v = await lockedVault(trx, found.vault_id);
        const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
        const asset = await assetOf(trx, v.asset_symbol);
        const destination = body.destination_asset ? await ledger.requireAsset(trx, body.destination_asset, 'destination_asset') : asset;
        if (destination.symbol !== asset.symbol && body.allow_conversion !== true) {
          throw new ApiError('validation_failed', `the position holds ${asset.symbol}; paying out ${destination.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        }
        const amount = await resolveAmount(trx, asset, body, { name: 'withdraw_all', value: body.withdraw_all });
        if (await onchain(trx, v)) {
          if (destination.symbol !== asset.symbol) throw new ApiError('validation_failed', `an on-chain vault pays out ${asset.symbol} only; convert afterwards`, { field: 'destination_asset' });
          const w = await onchainWithdrawal(trx, who, v, p, amount);
          if (w.shares <= 0n || w.assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to withdraw', { position_id: p.id });
          const created = await operations.create(trx, {
            principal: who,
            type: 'earn.withdraw',
            resource: { type: 'earn_position', id: p.id },
            asset: asset.symbol,
            amount: w.assets,
            holds: [],
            policy: { protocol: v.protocol_id },
            toAddress: v.address,
            details: { vault_id: v.id, position_id: p.id, shares: w.shares.toString(), destination_asset: asset.symbol, amount_out: w.assets.toString(), ...(await onchainDetails(trx, { action: 'redeem', vault: v.address as Address, amount: w.shares.toString(), minimum: w.minimum.toString() })) },
            eventData: { vault_id: v.id, position_id: p.id },
            humanMessage: `Withdrawing ${formatAmount(w.assets, asset.decimals)} ${asset.symbol} from ${v.name}`,
            idempotencyKey,
          });
          if (isRefusal(created)) return created;
          const { operation } = created;
          return operations.writeResponse(operation);
        }
        const a = accruedVault(v);
        const { shares, assets } = withdrawalOf(a, p, amount);
        if (assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to withdraw', { position_id: p.id });
        const converted = destination.symbol === asset.symbol ? null : convertAtPrice(assets, { ...asset, priceE8: (await ledger.price(trx, asset.symbol)).usdE8 }, { ...destination, priceE8: (await ledger.price(trx, destination.symbol)).usdE8 }, WITHDRAW_CONVERSION_FEE_BPS);
        const created = await operations.create(trx, {
          principal: who,
          type: 'earn.withdraw',
          resource: { type: 'earn_position', id: p.id },
          asset: asset.symbol,
          amount: assets,
          policy: { protocol: v.protocol_id },
          settlement: 'immediate',
          toAddress: v.address,
          details: { vault_id: v.id, position_id: p.id, shares: shares.toString(), destination_asset: destination.symbol, amount_out: (converted?.netOut ?? assets).toString() },
          eventData: { vault_id: v.id, position_id: p.id },
          humanMessage: `Withdrawing ${formatAmount(assets, asset.decimals)} ${asset.symbol} from ${v.name}${converted ? ` as ${formatAmount(converted.netOut, destination.decimals)} ${destination.symbol}` : ''}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        if (operation.status === 'execution_failed') return operations.writeResponse(operation);
        await burnFrom(trx, v, a, p, shares, assets);
        const postings = [
          { account: vaultAccount(v), asset: asset.symbol, amount: -assets },
          { account: { kind: 'available' as const, walletId: who.walletId }, asset: asset.symbol, amount: assets },
        ];
        if (converted) {
          postings.push(
            { account: { kind: 'available', walletId: who.walletId }, asset: asset.symbol, amount: -assets },
            { account: { kind: 'external', name: 'conversion' }, asset: asset.symbol, amount: assets },
            { account: { kind: 'external', name: 'conversion' }, asset: destination.symbol, amount: -converted.netOut },
            { account: { kind: 'available', walletId: who.walletId }, asset: destination.symbol, amount: converted.netOut },
          );
        }
        await ledger.post(trx, { operationId: operation.id, entryType: 'earn.withdraw', postings });
        return operations.writeResponse(operation);
      });
    },

    async move(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockPolicy(trx, who.agentId);
        const found = await lockOwnPosition(trx, who, body.from_position_id);
        const source = (await repo.findVault(trx, found.vault_id))!;
        const hasTarget = body.to_vault_id !== undefined && body.to_vault_id !== null;
        if (hasTarget === (body.to_best_available === true)) throw new ApiError('validation_failed', 'give exactly one of to_vault_id and to_best_available: true', { fields: ['to_vault_id', 'to_best_available'] });
        const asset = await assetOf(trx, source.asset_symbol);
        const amount = await resolveAmount(trx, asset, body, { name: 'move_all', value: body.move_all });
        const target = hasTarget ? await repo.findVault(trx, body.to_vault_id!) : await bestVault(trx, who.agentId, asset.symbol, amount === 'all' ? null : amount, source.id);
        if (!target || !target.active) throw new ApiError('not_found', 'vault not found', { vault_id: body.to_vault_id });
        if (target.id === source.id) throw new ApiError('validation_failed', 'the position is already in that vault', { field: 'to_vault_id' });
        if (target.asset_symbol !== source.asset_symbol) throw new ApiError('validation_failed', `vault ${target.id} holds ${target.asset_symbol}, not ${source.asset_symbol}`, { field: 'to_vault_id' });
        const locked = await repo.lockVaults(trx, [source.id, target.id]);
        const from = locked.find((x) => x.id === source.id)!;
        const to = locked.find((x) => x.id === target.id)!;
        const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
        const [fromOnchain, toOnchain] = [await onchain(trx, from), await onchain(trx, to)];
        if (fromOnchain !== toOnchain) throw new ApiError('validation_failed', 'a position moves between two on-chain vaults or two ledger vaults only', { field: 'to_vault_id' });
        if (fromOnchain) {
          const w = await onchainWithdrawal(trx, who, from, p, amount);
          if (w.shares <= 0n || w.assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to move', { position_id: p.id });
          const existingTo = await repo.findPositionByVault(trx, who.walletId, to.id);
          const toPositionId = existingTo?.id ?? newId();
          const created = await operations.create(trx, {
            principal: who,
            type: 'earn.move',
            resource: { type: 'earn_position', id: toPositionId },
            asset: asset.symbol,
            amount: w.assets,
            holds: [],
            policy: { protocol: to.protocol_id },
            toAddress: to.address,
            details: { from_vault_id: from.id, to_vault_id: to.id, from_position_id: p.id, position_id: toPositionId, shares_burned: w.shares.toString(), ...(await onchainDetails(trx, { action: 'move', vault: from.address as Address, to_vault: to.address as Address, amount: w.shares.toString(), minimum: '0' })) },
            eventData: { from_position_id: p.id, position_id: toPositionId, from_vault_id: from.id, to_vault_id: to.id },
            humanMessage: `Moving ${formatAmount(w.assets, asset.decimals)} ${asset.symbol} from ${from.name} to ${to.name}`,
            idempotencyKey,
          });
          if (isRefusal(created)) return created;
          const { operation } = created;
          return operations.writeResponse(operation);
        }
        const fromState = accruedVault(from);
        const { shares, assets } = withdrawalOf(fromState, p, amount);
        if (assets <= 0n) throw new ApiError('insufficient_funds', 'the position has nothing to move', { position_id: p.id });
        const existing = await repo.findPositionByVault(trx, who.walletId, to.id);
        const positionId = existing?.id ?? newId();
        const created = await operations.create(trx, {
          principal: who,
          type: 'earn.move',
          resource: { type: 'earn_position', id: positionId },
          asset: asset.symbol,
          amount: assets,
          policy: { protocol: to.protocol_id },
          settlement: 'immediate',
          toAddress: to.address,
          details: { from_vault_id: from.id, to_vault_id: to.id, from_position_id: p.id, position_id: positionId, shares_burned: shares.toString() },
          eventData: { from_position_id: p.id, position_id: positionId, from_vault_id: from.id, to_vault_id: to.id },
          humanMessage: `Moving ${formatAmount(assets, asset.decimals)} ${asset.symbol} from ${from.name} to ${to.name}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        if (operation.status === 'execution_failed') return operations.writeResponse(operation);
        // A move out of a vault the policy no longer allows is fine; into one it does not allow is refused above by create.
        await burnFrom(trx, from, fromState, p, shares, assets);
        await mintInto(trx, who, to, accruedVault(to), assets, positionId);
        await ledger.post(trx, {
          operationId: operation.id,
          entryType: 'earn.move',
          postings: [
            { account: vaultAccount(from), asset: asset.symbol, amount: -assets },
            { account: vaultAccount(to), asset: asset.symbol, amount: assets },
          ],
        });
        return operations.writeResponse(operation);
      });
    },

    async claimRewards(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockPolicy(trx, who.agentId);
        const wanted = body.protocols && body.protocols.length > 0 ? body.protocols : null;
        const positions = await repo.listAllPositions(trx, who.walletId);
        const vaults = await repo.lockVaults(trx, positions.map((p) => p.vault_id));
        const byVault = new Map(vaults.map((v) => [v.id, v]));
        const claims: { p: PositionRow; v: VaultRow; a: AccruedVault; rewards: bigint }[] = [];
        for (const p of positions) {
          const v = byVault.get(p.vault_id)!;
          if (!v.reward_asset_symbol || (wanted && !wanted.includes(v.protocol_id))) continue;
          const a = accruedVault(v);
          const { rewards } = settleRewards((await repo.lockPosition(trx, who.walletId, p.id))!, a.accRewardRay);
          if (rewards > 0n) claims.push({ p, v, a, rewards });
        }
        const protocols = [...new Set(claims.map((c) => c.v.protocol_id))];
        const allowed = await allowedProtocols(trx, who.agentId);
        // The policy decides first: a refused protocol is named, else the first one claimed from.
        const policyProtocol = (wanted ?? protocols).find((x) => !allowed(x, null)) ?? protocols[0] ?? wanted?.[0] ?? null;
        const totals = new Map<string, bigint>();
        for (const c of claims) totals.set(c.v.reward_asset_symbol!, (totals.get(c.v.reward_asset_symbol!) ?? 0n) + c.rewards);
        const single = totals.size === 1 ? [...totals.entries()][0]! : null;
        const rewardList = await Promise.all([...totals].map(async ([k, x]) => ({ asset_symbol: k, amount: formatAmount(x, (await assetOf(trx, k)).decimals) })));
        const claimId = newId();
        // On chain (evm, distributor deployed): rewards of positions in on-chain vaults are paid by the distributor.
        const distributor = venue && claims.length > 0 ? await venue.rewards(trx) : null;
        const onchainClaims = distributor ? await Promise.all(claims.map((c) => onchain(trx, c.v))) : [];
        if (onchainClaims.some((x) => x)) {
          const d = distributor!;
          if (onchainClaims.some((x) => !x) || claims.some((c) => c.v.reward_asset_symbol !== d.asset)) {
            const named = (pick: boolean) => [...new Set(claims.filter((_, i) => onchainClaims[i] === pick).map((c) => c.v.protocol_id))];
            throw new ApiError('validation_failed', `rewards of on-chain vaults (${named(true).join(', ')}) and of ledger vaults (${named(false).join(', ')}) are claimed separately: name the protocols`, { field: 'protocols' });
          }
          const total = single![1];
          // The ledger's accrual leaves the positions now (so no second claim can take it); the worker credits the
          // wallet with what the distributor's Claimed event paid, which is this same amount set on chain.
          const created = await operations.create(trx, {
            principal: who,
            type: 'earn.rewards_claim',
            resource: { type: 'earn_rewards_claim', id: claimId },
            asset: d.asset,
            amount: total,
            holds: [],
            policy: { protocol: policyProtocol },
            toAddress: d.distributor,
            details: {
              protocols,
              rewards: { [d.asset]: total.toString() },
              claims: claims.map((c) => ({ position_id: c.p.id, protocol: c.v.protocol_id, asset: c.v.reward_asset_symbol!, amount: c.rewards.toString() })),
              onchain_rewards: { distributor: d.distributor, token: d.token, amount: total.toString() },
            },
            eventData: { protocols, rewards: rewardList },
            humanMessage: `Claiming ${rewardList.map((r) => `${r.amount} ${r.asset_symbol}`).join(' and ')} rewards from ${protocols.join(', ')}`,
            idempotencyKey,
          });
          if (isRefusal(created)) return created;
          const { operation } = created;
          if (operation.status === 'execution_failed') return operations.writeResponse(operation);
          const now = clock.now();
          for (const c of claims) {
            await repo.updatePosition(trx, c.p.id, { shares: BigInt(c.p.shares), principal: BigInt(c.p.principal), reward_checkpoint_ray: c.a.accRewardRay, rewards_accrued: 0n, updated_at: now });
            await saveVault(trx, c.v, c.a);
          }
          return operations.writeResponse(operation);
        }
        const created = await operations.create(trx, {
          principal: who,
          type: 'earn.rewards_claim',
          resource: { type: 'earn_rewards_claim', id: claimId },
          asset: single ? single[0] : null,
          amount: single ? single[1] : null,
          policy: { protocol: policyProtocol },
          settlement: 'immediate',
          details: { protocols, rewards: Object.fromEntries([...totals].map(([k, x]) => [k, x.toString()])) },
          eventData: { protocols, rewards: rewardList },
          humanMessage: `Claiming ${rewardList.map((r) => `${r.amount} ${r.asset_symbol}`).join(' and ') || 'no'} rewards from ${protocols.join(', ') || (wanted ?? []).join(', ') || 'earn protocols'}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        if (claims.length === 0) throw new ApiError('invalid_state_transition', 'there are no pending rewards to claim', { protocols: wanted ?? [] });
        const now = clock.now();
        for (const c of claims) {
          await repo.updatePosition(trx, c.p.id, { shares: BigInt(c.p.shares), principal: BigInt(c.p.principal), reward_checkpoint_ray: c.a.accRewardRay, rewards_accrued: 0n, updated_at: now });
          await saveVault(trx, c.v, c.a);
          await ledger.post(trx, {
            operationId: operation.id,
            entryType: 'earn.rewards_claim',
            postings: [
              { account: { kind: 'external', name: `rewards:${c.v.protocol_id}` }, asset: c.v.reward_asset_symbol!, amount: -c.rewards },
              { account: { kind: 'available', walletId: who.walletId }, asset: c.v.reward_asset_symbol!, amount: c.rewards },
            ],
          });
        }
        return operations.writeResponse(operation);
      });
    },

    async addVault(db, input) {
      const asset = await ledger.requireAsset(db, input.asset);
      const offset = input.decimalsOffset ?? (asset.decimals <= 8 ? 6 : 0);
      const capacity = input.capacity === undefined || input.capacity === null ? null : ledger.parseAssetAmount(asset, input.capacity, 'capacity');
      const rewardAsset = input.rewardAsset ? (await ledger.requireAsset(db, input.rewardAsset)).symbol : null;
      const rewardRate = rewardAsset && input.rewardBps ? (erc.RAY * BigInt(input.rewardBps)) / erc.BPS / 10n ** BigInt(offset) : 0n;
      if (!Number.isInteger(input.apyBps) || input.apyBps < 0 || input.apyBps > 100_000) throw new ApiError('validation_failed', 'apy_bps must be an integer in [0, 100000]');
      const id = newId();
      const address = input.address ?? `0x${id.replace(/-/g, '').padEnd(40, '0').slice(0, 40)}`;
      if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new ApiError('validation_failed', 'address must be a 0x-prefixed 20-byte hex address');
      const v = await repo.insertVault(db, { id, name: input.name, protocol_id: input.protocol, asset_symbol: asset.symbol, address, apy_bps: input.apyBps, decimals_offset: offset, capacity, reward_asset_symbol: rewardAsset, reward_rate_ray: rewardRate, created_at: clock.now() });
      return publicOpportunity(db, v);
    },

    async listVaults(db) {
      return Promise.all((await repo.listVaults(db)).map(async (v) => ({ ...(await publicOpportunity(db, v)), active: v.active })));
    },

    findVaultByAddress: (db, address) => repo.findVaultByAddress(db, address),

    async redeemAssetsToWallet(trx, who, vaultId, assets, operationId) {
      const v = await lockedVault(trx, vaultId);
      const found = await repo.findPositionByVault(trx, who.walletId, v.id);
      if (!found) throw new ApiError('insufficient_funds', `the wallet has no position in vault ${v.address}`, { vault_address: v.address });
      const p = (await repo.lockPosition(trx, who.walletId, found.id))!;
      const a = accruedVault(v);
      const { shares } = withdrawalOf(a, p, assets);
      await burnFrom(trx, v, a, p, shares, assets);
      await ledger.post(trx, {
        operationId,
        entryType: 'earn.withdraw',
        postings: [
          { account: vaultAccount(v), asset: v.asset_symbol, amount: -assets },
          { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: assets },
        ],
      });
      return { shares };
    },

    async depositFromWallet(trx, who, vaultId, assets, operationId) {
      const v = await lockedVault(trx, vaultId);
      await ledger.post(trx, {
        operationId,
        entryType: 'earn.deposit',
        postings: [
          { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: -assets },
          { account: vaultAccount(v), asset: v.asset_symbol, amount: assets },
        ],
      });
      const { position, shares } = await mintInto(trx, who, v, accruedVault(v), assets);
      return { positionId: position.id, shares };
    },
  };

  // --- on-chain settlement: the ledger follows the vaults' own Deposit and Withdraw events ---
  interface VaultEvent {
    event: 'Deposit' | 'Withdraw';
    vault: string;
    assets: string;
    shares: string;
  }
  const eventsOf = (details: Record<string, unknown>) => (details.vault_events ?? []) as VaultEvent[];
  const findEvent = (events: VaultEvent[], event: VaultEvent['event'], vault: string) => {
    const e = events.find((x) => x.event === event && x.vault.toLowerCase() === vault.toLowerCase());
    if (!e) throw new Error(`no ${event} event of vault ${vault} in the receipt`);
    return { assets: BigInt(e.assets), shares: BigInt(e.shares) };
  };
  /**
   * Adds (or removes) shares and principal on the wallet's position in `v`; principal leaves in proportion to the
   * shares. Rewards accrue on the ledger as for any vault (per share, from the clock): the position's accrual is
   * settled at the vault's accumulator before its shares change, and the vault row counts the shares the ledger
   * booked (`vaultAssets`: the assets that entered (+) or left (-) the vault on chain).
   */
  async function shiftPosition(trx: Knex.Transaction, op: OperationRow, v: VaultRow, positionId: string, shares: bigint, assets: bigint, vaultAssets: bigint): Promise<void> {
    const now = clock.now();
    const a = accruedVault((await repo.findVault(trx, v.id))!);
    const totalShares = a.state.totalShares + shares;
    const totalAssets = a.state.totalAssets + vaultAssets;
    await saveVault(trx, v, { ...a, state: { ...a.state, totalShares: totalShares > 0n ? totalShares : 0n, totalAssets: totalAssets > 0n ? totalAssets : 0n } });
    const p = await repo.ensurePosition(trx, { id: positionId, agent_id: op.agent_id, wallet_id: op.wallet_id, vault_id: v.id, reward_checkpoint_ray: a.accRewardRay, at: now });
    const { rewards, checkpoint } = settleRewards(p, a.accRewardRay);
    const held = BigInt(p.shares);
    const principal = BigInt(p.principal);
    let next: { shares: bigint; principal: bigint };
    if (shares >= 0n) next = { shares: held + shares, principal: principal + assets };
    else {
      const burned = -shares;
      const principalOut = burned >= held ? principal : mulDiv(principal, burned, held, 'up');
      next = { shares: held > burned ? held - burned : 0n, principal: principal > principalOut ? principal - principalOut : 0n };
    }
    await repo.updatePosition(trx, p.id, { ...next, reward_checkpoint_ray: checkpoint, rewards_accrued: rewards, updated_at: now });
  }

  operations.registerChainSettler('earn.deposit', async (trx, op, tracked) => {
    const d = op.details as { vault_id: string; position_id: string };
    const v = await lockedVault(trx, d.vault_id);
    const minted = findEvent(eventsOf(tracked), 'Deposit', v.address);
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, hold.id, vaultAccount(v), 'earn.deposit');
    await shiftPosition(trx, op, v, d.position_id, minted.shares, minted.assets, minted.assets);
    return { ok: true, details: { ...tracked, shares: minted.shares.toString() } };
  });
  operations.registerChainSettler('earn.withdraw', async (trx, op, tracked) => {
    const d = op.details as { vault_id: string; position_id: string };
    const v = await lockedVault(trx, d.vault_id);
    const redeemed = findEvent(eventsOf(tracked), 'Withdraw', v.address);
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'earn.withdraw',
      postings: [
        { account: vaultAccount(v), asset: v.asset_symbol, amount: -redeemed.assets },
        { account: { kind: 'available', walletId: op.wallet_id }, asset: v.asset_symbol, amount: redeemed.assets },
      ],
    });
    await shiftPosition(trx, op, v, d.position_id, -redeemed.shares, 0n, -redeemed.assets);
    return { ok: true, details: { ...tracked, amount_out: redeemed.assets.toString(), shares: redeemed.shares.toString() } };
  });
  operations.registerChainSettler('earn.move', async (trx, op, tracked) => {
    const d = op.details as { from_vault_id: string; to_vault_id: string; from_position_id: string; position_id: string };
    const [from, to] = await Promise.all([repo.findVault(trx, d.from_vault_id), repo.findVault(trx, d.to_vault_id)]);
    await repo.lockVaults(trx, [d.from_vault_id, d.to_vault_id]);
    const redeemed = findEvent(eventsOf(tracked), 'Withdraw', from!.address);
    const minted = findEvent(eventsOf(tracked), 'Deposit', to!.address);
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'earn.move',
      postings: [
        { account: vaultAccount(from!), asset: from!.asset_symbol, amount: -redeemed.assets },
        { account: vaultAccount(to!), asset: to!.asset_symbol, amount: minted.assets },
      ],
    });
    await shiftPosition(trx, op, from!, d.from_position_id, -redeemed.shares, 0n, -redeemed.assets);
    await shiftPosition(trx, op, to!, d.position_id, minted.shares, minted.assets, minted.assets);
    return { ok: true, details: { ...tracked, shares_burned: redeemed.shares.toString(), shares_minted: minted.shares.toString() } };
  });
  operations.registerChainSettler('earn.rewards_claim', async (trx, op, tracked) => {
    const d = op.details as { claims: { protocol: string; asset: string; amount: string }[] };
    const wallet = (await walletAddress(trx, op.agent_id)).toLowerCase();
    const paid = ((tracked.rewards_events ?? []) as { account: string; amount: string }[]).filter((e) => e.account.toLowerCase() === wallet).reduce((sum, e) => sum + BigInt(e.amount), 0n);
    // The distributor paid what the service credited on chain from the ledger's accrual: anything else is a fault.
    if (paid !== BigInt(op.amount!)) throw new Error(`the distributor paid ${paid}, not the ${op.amount} claimed`);
    for (const c of d.claims) {
      await ledger.post(trx, {
        operationId: op.id,
        entryType: 'earn.rewards_claim',
        postings: [
          { account: { kind: 'external', name: `rewards:${c.protocol}` }, asset: c.asset, amount: -BigInt(c.amount) },
          { account: { kind: 'available', walletId: op.wallet_id }, asset: c.asset, amount: BigInt(c.amount) },
        ],
      });
    }
    return { ok: true, details: { ...tracked, amount_paid: paid.toString() } };
  });
  // A claim the chain did not pay (refused before submission, reverted, timed out): the accrual taken from the
  // positions at the claim goes back to them, so it can be claimed again.
  operations.registerFailureHook('earn.rewards_claim', async (trx, op) => {
    const d = op.details as { claims?: { position_id: string; amount: string }[]; onchain_rewards?: unknown };
    if (!d.onchain_rewards) return;
    for (const c of d.claims ?? []) {
      const p = await repo.lockPosition(trx, op.wallet_id, c.position_id);
      if (!p) continue;
      await repo.updatePosition(trx, p.id, { shares: BigInt(p.shares), principal: BigInt(p.principal), reward_checkpoint_ray: BigInt(p.reward_checkpoint_ray), rewards_accrued: BigInt(p.rewards_accrued) + BigInt(c.amount), updated_at: clock.now() });
    }
  });
  return service;
}
