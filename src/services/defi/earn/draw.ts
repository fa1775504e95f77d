// A payment drawing on Earn (issue 26, item 2): the wallet's shortfall redeemed out of the agent's positions in the
// asset, best first, under the payment's operation id. A ledger vault's position is redeemed inside the payment's
// own transaction; an on-chain vault's is redeemed at settlement, in the same account call as the transfer.
import type { Address } from '../../../chain/port.js';
import { findHeldByOperation } from '../../../db/repositories/ledger.repository.js';
import { findWalletByAgent } from '../../../db/repositories/agent.repository.js';
import type { Db, Knex } from '../../../db/knex.js';
import { listOpenOperations, type OperationRow } from '../../../db/repositories/operation.repository.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import type { PositionRow, VaultRow } from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import { ApiError } from '../../../lib/errors.js';
import { formatAmount, mulDiv } from '../../../lib/money.js';
import { onchainDraws, type DrawnFromEarn } from '../../ledger/payments.js';
import { createRedemptionBooking } from './chain-settlers.js';
import type { AccruedVault, EarnService } from './types.js';
import type { EarnCore } from './vaults.js';

/** A position the draw may redeem: on the ledger (its vault's accrued state) or on chain (the shares it may still redeem). */
type Candidate = { v: VaultRow; p: PositionRow; worth: bigint } & ({ kind: 'ledger'; a: AccruedVault } | { kind: 'onchain'; account: Address; shares: bigint });

export function createEarnDraw(core: EarnCore): Pick<EarnService, 'drawShortfall' | 'settleOnchainDraw'> {
  const { ledger, onchain, venue, accruedVault, assetOf, burnFrom, vaultAccount, withdrawalOf, lockBalances } = core;
  const redemption = createRedemptionBooking(core);

  /**
   * Shares of each on-chain vault (by lower-case address) that the wallet's open operations will redeem: payments
   * that drew on it and earn withdrawals and moves not yet settled. A draw plans around them, so two payments of
   * one agent never count the same shares (the agent's policy lock orders their acceptance).
   */
  async function sharesInFlight(db: Db, walletId: string): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    const add = (vault: string, shares: string) => out.set(vault.toLowerCase(), (out.get(vault.toLowerCase()) ?? 0n) + BigInt(shares));
    for (const op of await listOpenOperations(db, walletId, ['payment', 'earn.withdraw', 'earn.move'])) {
      for (const d of onchainDraws(op)) add(d.vault, d.shares);
      const c = (op.details as { onchain_vault?: { action: string; vault: string; amount: string } } | null)?.onchain_vault;
      if (c && c.action !== 'deposit') add(c.vault, c.amount);
    }
    return out;
  }

  /** The on-chain positions an account wallet may draw on (a key-held wallet cannot redeem and pay in one transaction). */
  async function onchainCandidates(db: Db, agentId: string, walletId: string, rows: repo.ValuedPosition[]): Promise<Candidate[]> {
    if (rows.length === 0 || !venue) return [];
    const wallet = await findWalletByAgent(db, agentId);
    if (wallet?.custody !== 'account' || !wallet.address) return [];
    const account = wallet.address as Address;
    const reserved = await sharesInFlight(db, walletId);
    const out: Candidate[] = [];
    for (const { vault: v, position: p } of rows) {
      const shares = (await venue.sharesOf(v.address as Address, account)) - (reserved.get(v.address.toLowerCase()) ?? 0n);
      if (shares > 0n) out.push({ kind: 'onchain', v, p, account, shares, worth: await venue.previewRedeem(v.address as Address, shares) });
    }
    return out;
  }

  return {
    /**
     * Null when the positions together are worth less than the shortfall (nothing is written). Locks: the caller holds
     * the agent's policy row (every earn write takes it first), so two payments of one agent never race for a
     * position; for ledger vaults the wallet's balance row of the asset, then the vaults in id order (repo.lockVaults,
     * as every earn write) and positions in id order. A ledger position pays out exact assets for shares rounded up (ERC-4626 `withdraw`), never more than it
     * holds: the wallet receives the shortfall to the unit. An on-chain position is planned, not redeemed: its shares
     * (the vault's own previewWithdraw) are redeemed at settlement with the amount as the least they must return, so
     * the transfer after it never lacks a unit; `onchain` of the result is what the wallet does not hold yet. "Best
     * first" is the order of `use_best_available` (highest APY, then id), across both kinds.
     */
    async drawShortfall(trx, who, need) {
      const held = (await repo.listAllValuedPositions(trx, who.walletId)).filter((r) => r.vault.asset_symbol === need.asset && BigInt(r.position.shares) > 0n);
      const kinds = await Promise.all(held.map((r) => onchain(trx, r.vault)));
      const ledgerRows = held.filter((_, i) => !kinds[i]);
      const plan = await onchainCandidates(
        trx,
        who.agentId,
        who.walletId,
        held.filter((_, i) => kinds[i]),
      );
      if (ledgerRows.length > 0) {
        // The balance row the draw credits, then the vault rows (vault.repository's lock order).
        await lockBalances(trx, who.walletId, [need.asset]);
        const vaults = await repo.lockVaults(
          trx,
          ledgerRows.map((r) => r.vault.id),
        );
        for (const id of ledgerRows.map((r) => r.position.id).sort()) {
          const p = (await repo.lockPosition(trx, who.walletId, id))!;
          const v = vaults.find((x) => x.id === p.vault_id)!;
          const a = accruedVault(v);
          plan.push({ kind: 'ledger', p, v, a, worth: erc.previewRedeem(a.state, BigInt(p.shares)) });
        }
      }
      if (plan.length === 0) return null;
      plan.sort((x, y) => y.v.apy_bps - x.v.apy_bps || (x.v.id < y.v.id ? -1 : 1));
      if (plan.reduce((sum, x) => sum + x.worth, 0n) < need.amount) return null;

      const drawn: DrawnFromEarn[] = [];
      let left = need.amount;
      let pending = 0n;
      for (const c of plan) {
        if (left <= 0n) break;
        const take = c.worth < left ? c.worth : left;
        if (take <= 0n) continue;
        const { p, v } = c;
        if (c.kind === 'onchain') {
          // All of the shares when the position is taken whole; else the vault's own shares for exactly `take` (rounded up).
          const shares = take === c.worth ? c.shares : await venue!.previewWithdraw(v.address as Address, take);
          drawn.push({ position_id: p.id, vault_id: v.id, vault: v.address, amount: take.toString(), shares: shares.toString(), onchain: true });
          pending += take;
          left -= take;
          continue;
        }
        const { shares, assets } = withdrawalOf(c.a, p, take);
        // What the burned shares return may not fall below the amount needed less `slippage_percent` (the ledger
        // vaults' price is deterministic, so only a venue with a moving price could trip this).
        const floor = mulDiv(take, BigInt(10_000 - need.slippageBps), 10_000n);
        if (assets < floor) {
          const { decimals } = await assetOf(trx, v.asset_symbol);
          throw new ApiError('slippage_exceeded', `drawing on ${v.name} would return ${formatAmount(assets, decimals)} ${v.asset_symbol}, below the minimum ${formatAmount(floor, decimals)}`, {
            position_id: p.id,
          });
        }
        await burnFrom(trx, v, c.a, p, shares, assets);
        await ledger.post(trx, {
          operationId: need.operationId,
          entryType: 'earn.withdraw',
          postings: [
            { account: vaultAccount(v), asset: v.asset_symbol, amount: -assets },
            { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: assets },
          ],
        });
        drawn.push({ position_id: p.id, vault_id: v.id, vault: v.address, amount: assets.toString(), shares: shares.toString() });
        left -= assets;
      }
      return { drawn, onchain: pending };
    },

    settleOnchainDraw: settleDraw,
  };

  /**
   * A payment whose account call redeemed positions, then paid (chain/evm-custody.ts submitLane): the ledger follows
   * the vaults' Withdraw events (what each redemption returned, which may exceed the planned amount as the vault
   * grew; the surplus stays in the wallet) into the wallet, then the payment leaves it: its hold (the part the
   * wallet held at acceptance) and the redeemed part, both to the chain. Other holds (none for a token) are released.
   */
  async function settleDraw(trx: Knex.Transaction, op: OperationRow, tracked: Record<string, unknown>) {
    // The wallet's balance rows first (the redemptions in, the payment out), the vault rows last, in id order.
    const redeemed = [];
    for (const d of onchainDraws(op)) redeemed.push({ d, r: await redemption.credit(trx, op, d.vault_id, tracked) });
    const chainAccount = { kind: 'external' as const, name: 'onchain' };
    let fromHold = 0n;
    for (const hold of await findHeldByOperation(trx, op.id)) {
      if (hold.asset_symbol === op.asset_symbol && fromHold === 0n) {
        await ledger.capture(trx, hold.id, chainAccount, 'payment');
        fromHold = BigInt(hold.amount);
      } else await ledger.release(trx, hold.id);
    }
    const rest = BigInt(op.amount!) - fromHold;
    if (rest > 0n) {
      await ledger.post(trx, {
        operationId: op.id,
        entryType: 'payment',
        postings: [
          { account: { kind: 'available', walletId: op.wallet_id }, asset: op.asset_symbol!, amount: -rest },
          { account: chainAccount, asset: op.asset_symbol!, amount: rest },
        ],
      });
    }
    redeemed.sort((x, y) => (x.d.vault_id < y.d.vault_id ? -1 : x.d.vault_id > y.d.vault_id ? 1 : 0));
    for (const { d, r } of redeemed) await redemption.burn(trx, op, d.vault_id, d.position_id, r);
    return { ok: true as const, details: tracked };
  }
}
