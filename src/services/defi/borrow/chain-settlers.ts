// On-chain settlement of borrow writes: the ledger follows Morpho's own events.
import { findHeldByOperation } from '../../../db/repositories/ledger.repository.js';
import type { OperationRow } from '../../../db/repositories/operation.repository.js';
import type { Knex } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/market.repository.js';
import type { OwnerRef } from '../../ledger/operations.js';
import type { BorrowKit, OnchainMarket } from './morpho.js';

export function registerBorrowSettlers(kit: BorrowKit): void {
  const { clock, ledger, operations, walletAccount, onchainMarket, onchainPool, onchainCollateral } = kit;
  // --- on-chain settlement: the ledger follows Morpho's own events ---
  interface LendingEvent {
    event: string;
    assets: string;
    shares: string;
  }
  const lendingEvent = (details: Record<string, unknown>, event: string) => {
    const e = ((details.lending_events ?? []) as LendingEvent[]).find((x) => x.event === event);
    if (!e) throw new Error(`no ${event} event of the market in the receipt`);
    return { assets: BigInt(e.assets), shares: BigInt(e.shares) };
  };
  const releaseHolds = async (trx: Knex.Transaction, op: OperationRow) => {
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.release(trx, hold.id);
  };
  async function settledMarket(trx: Knex.Transaction): Promise<OnchainMarket> {
    const om = await onchainMarket(trx);
    if (!om) throw new Error('the lending market is not configured on this chain');
    return om;
  }
  const who = (op: OperationRow) => ({ wallet_id: op.wallet_id, agent_id: op.agent_id, at: clock.now() });
  operations.registerChainSettler('collateral.add', async (trx, op, tracked) => {
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'SupplyCollateral');
    // The collateral's hold goes to the market; an ETH input's gas reserve (issue 30: the relayer paid the gas) is released.
    let captured = false;
    for (const hold of await findHeldByOperation(trx, op.id)) {
      if (!captured && hold.amount === op.amount) captured = await ledger.capture(trx, hold.id, onchainCollateral, 'collateral.add');
      else await ledger.release(trx, hold.id);
    }
    // ETH wrapped into the market's WETH (issue 30): the position is WETH, as on chain.
    const asset = (op.details as { collateral_asset?: string } | null)?.collateral_asset ?? op.asset_symbol!;
    await repo.addCollateral(trx, { ...who(op), asset_symbol: asset, delta: e.assets });
    return { ok: true, details: tracked };
  });
  operations.registerChainSettler('collateral.remove', async (trx, op, tracked) => {
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'WithdrawCollateral');
    await repo.addCollateral(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: -e.assets });
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'collateral.remove',
      postings: [
        { account: onchainCollateral, asset: op.asset_symbol!, amount: -e.assets },
        { account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: e.assets },
      ],
    });
    return { ok: true, details: tracked };
  });
  operations.registerChainSettler('debt.borrow', async (trx, op, tracked) => {
    const om = await settledMarket(trx);
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'Borrow');
    // The debt row holds Morpho borrow shares (reconcile compares them with the chain's).
    await repo.addScaledDebt(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: e.shares });
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'debt.borrow',
      postings: [
        { account: onchainPool(om), asset: op.asset_symbol!, amount: -e.assets },
        { account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: e.assets },
      ],
    });
    return { ok: true, details: { ...tracked, borrow_shares: e.shares.toString() } };
  });
  const settleRepay = (entryType: string) => async (trx: Knex.Transaction, op: OperationRow, tracked: Record<string, unknown>) => {
    const om = await settledMarket(trx);
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'Repay');
    await releaseHolds(trx, op);
    await repo.addScaledDebt(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: -e.shares });
    await ledger.post(trx, {
      operationId: op.id,
      entryType,
      postings: [
        { account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: -e.assets },
        { account: onchainPool(om), asset: op.asset_symbol!, amount: e.assets },
      ],
    });
    return { ok: true as const, details: { ...tracked, repaid: e.assets.toString(), repaid_shares: e.shares.toString() } };
  };
  operations.registerChainSettler('debt.repay', settleRepay('debt.repay'));
  operations.registerChainSettler('debt.deleverage', settleRepay('debt.deleverage'));
}
