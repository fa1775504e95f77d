// On-chain settlement of earn deposits, withdrawals and moves: the ledger follows the vaults' own events.
import { findHeldByOperation } from '../../../db/repositories/ledger.repository.js';
import type { Knex } from '../../../db/knex.js';
import type { OperationRow } from '../../../db/repositories/operation.repository.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import type { VaultRow } from '../../../db/repositories/vault.repository.js';
import { mulDiv } from '../../../lib/money.js';
import type { EarnCore } from './vaults.js';

/** A vault's ERC-4626 event as the receipt reader records it (chain/evm/receipts.ts `vault_events`). */
export interface VaultEvent {
  event: 'Deposit' | 'Withdraw';
  vault: string;
  assets: string;
  shares: string;
}
export const vaultEventsOf = (details: Record<string, unknown>) => (details.vault_events ?? []) as VaultEvent[];
export function findVaultEvent(events: VaultEvent[], event: VaultEvent['event'], vault: string): { assets: bigint; shares: bigint } {
  const e = events.find((x) => x.event === event && x.vault.toLowerCase() === vault.toLowerCase());
  if (!e) throw new Error(`no ${event} event of vault ${vault} in the receipt`);
  return { assets: BigInt(e.assets), shares: BigInt(e.shares) };
}

/**
 * Adds (or removes) shares and principal on the wallet's position in `v`; principal leaves in proportion to the
 * shares. Rewards accrue on the ledger as for any vault (per share, from the clock): the position's accrual is
 * settled at the vault's accumulator before its shares change, and the vault row counts the shares the ledger
 * booked (`vaultAssets`: the assets that entered (+) or left (-) the vault on chain).
 */
export function createPositionShift(core: EarnCore) {
  const { clock, accruedVault, saveVault, settleRewards } = core;
  return async function shiftPosition(trx: Knex.Transaction, op: OperationRow, v: VaultRow, positionId: string, shares: bigint, assets: bigint, vaultAssets: bigint): Promise<void> {
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
  };
}

/**
 * An on-chain redemption as the ledger books it, in vault.repository's lock order: `credit` (balance rows) moves what
 * the vault's Withdraw event paid out from the vault's account into the wallet; `burn` (the vault row, last) takes
 * the shares the event burned off the position. An earn withdrawal and a payment drawing on Earn both book it so.
 */
export function createRedemptionBooking(core: EarnCore) {
  const { ledger, lockedVault, vaultAccount } = core;
  const shiftPosition = createPositionShift(core);
  return {
    async credit(trx: Knex.Transaction, op: OperationRow, vaultId: string, tracked: Record<string, unknown>): Promise<{ assets: bigint; shares: bigint }> {
      const v = await repo.findVault(trx, vaultId);
      if (!v) throw new Error(`vault ${vaultId} is gone`);
      const redeemed = findVaultEvent(vaultEventsOf(tracked), 'Withdraw', v.address);
      await ledger.post(trx, {
        operationId: op.id,
        entryType: 'earn.withdraw',
        postings: [
          { account: vaultAccount(v), asset: v.asset_symbol, amount: -redeemed.assets },
          { account: { kind: 'available', walletId: op.wallet_id }, asset: v.asset_symbol, amount: redeemed.assets },
        ],
      });
      return redeemed;
    },
    async burn(trx: Knex.Transaction, op: OperationRow, vaultId: string, positionId: string, redeemed: { assets: bigint; shares: bigint }): Promise<void> {
      await shiftPosition(trx, op, await lockedVault(trx, vaultId), positionId, -redeemed.shares, 0n, -redeemed.assets);
    },
  };
}

/** The ledger follows the vaults' own Deposit and Withdraw events (on-chain settlement of earn writes). */
export function registerEarnSettlers(core: EarnCore): void {
  const { ledger, operations, lockedVault, vaultAccount } = core;
  const shiftPosition = createPositionShift(core);
  const vaultOf = async (trx: Knex.Transaction, id: string): Promise<VaultRow> => {
    const v = await repo.findVault(trx, id);
    if (!v) throw new Error(`vault ${id} is gone`);
    return v;
  };

  operations.registerChainSettler('earn.deposit', async (trx, op, tracked) => {
    const d = op.details as { vault_id: string; position_id: string };
    // The wallet's balance rows (the holds' capture) before the vault row (vault.repository's lock order).
    const found = await vaultOf(trx, d.vault_id);
    const minted = findVaultEvent(vaultEventsOf(tracked), 'Deposit', found.address);
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, hold.id, vaultAccount(found), 'earn.deposit');
    const v = await lockedVault(trx, d.vault_id);
    await shiftPosition(trx, op, v, d.position_id, minted.shares, minted.assets, minted.assets);
    return { ok: true, details: { ...tracked, shares: minted.shares.toString() } };
  });
  const redemption = createRedemptionBooking(core);
  operations.registerChainSettler('earn.withdraw', async (trx, op, tracked) => {
    const d = op.details as { vault_id: string; position_id: string };
    const redeemed = await redemption.credit(trx, op, d.vault_id, tracked);
    await redemption.burn(trx, op, d.vault_id, d.position_id, redeemed);
    return { ok: true, details: { ...tracked, amount_out: redeemed.assets.toString(), shares: redeemed.shares.toString() } };
  });
  operations.registerChainSettler('earn.move', async (trx, op, tracked) => {
    const d = op.details as { from_vault_id: string; to_vault_id: string; from_position_id: string; position_id: string };
    const [from, to] = await Promise.all([repo.findVault(trx, d.from_vault_id), repo.findVault(trx, d.to_vault_id)]);
    await repo.lockVaults(trx, [d.from_vault_id, d.to_vault_id]);
    const redeemed = findVaultEvent(vaultEventsOf(tracked), 'Withdraw', from!.address);
    const minted = findVaultEvent(vaultEventsOf(tracked), 'Deposit', to!.address);
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
}
