// Earn deposits: into a vault (on the ledger, or held for the worker on an on-chain vault), and from the wallet for a conversion.
import type { Address } from '../../../chain/port.js';
import { withTransaction } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount } from '../../../lib/money.js';
import type { EarnService } from './types.js';
import type { EarnCore } from './vaults.js';
import { recordWrite } from '../record.js';

export function createEarnDeposits(core: EarnCore): Pick<EarnService, 'deposit' | 'depositFromWallet'> {
  const { ledger, operations, policy, venue, onchain, onchainDetails, accruedVault, lockedVault, assetOf, resolveAmount, bestVault, mintInto, lockBalances, vaultAccount } = core;

  return {
    async deposit(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await policy.lock(trx, who.agentId);
        const asset = await assetOf(trx, body.asset);
        const hasVault = body.vault_id !== undefined && body.vault_id !== null;
        if (hasVault === (body.use_best_available === true))
          throw new ApiError('validation_failed', 'give exactly one of vault_id and use_best_available: true', { fields: ['vault_id', 'use_best_available'] });
        const amount = (await resolveAmount(trx, asset, body)) as bigint;
        const candidate = hasVault ? await repo.findVault(trx, body.vault_id!) : await bestVault(trx, who.agentId, asset.symbol, amount);
        if (!candidate || !candidate.active) throw new ApiError('not_found', 'vault not found', { vault_id: body.vault_id });
        if (candidate.asset_symbol !== asset.symbol) throw new ApiError('validation_failed', `vault ${candidate.id} holds ${candidate.asset_symbol}, not ${asset.symbol}`, { field: 'asset' });
        // The vault row is read, not locked: an on-chain deposit only holds the amount here, and a ledger deposit locks
        // it last, for its mint alone (below).
        const v = candidate;
        const isOnchain = await onchain(trx, v);
        // The wallet's position in the vault names the operation's resource. A position is never deleted nor renamed, so
        // an existing one needs no lock; a first deposit locks its balance row first (vault.repository's lock order), so
        // that no settlement (a conversion into this vault takes that row first) creates the row before its mint.
        let existing = await repo.findPositionByVault(trx, who.walletId, v.id);
        if (!existing && !isOnchain) {
          await lockBalances(trx, who.walletId, [asset.symbol]);
          existing = await repo.findPositionByVault(trx, who.walletId, v.id);
        }
        const positionId = existing?.id ?? newId();
        const deposit = {
          principal: who,
          type: 'earn.deposit',
          resource: { type: 'earn_position', id: positionId },
          asset: asset.symbol,
          amount,
          policy: { protocol: v.protocol_id },
          toAddress: v.address,
          eventData: { vault_id: v.id, position_id: positionId },
          humanMessage: `Depositing ${formatAmount(amount, asset.decimals)} ${asset.symbol} into ${v.name}`,
          idempotencyKey,
        };
        if (isOnchain) {
          // Settled by the worker on chain: the amount is held now, the shares are what the vault's Deposit event says.
          const estimate = await venue!.previewDeposit(v.address as Address, amount);
          if (estimate <= 0n) throw new ApiError('validation_failed', 'the amount is too small to mint a vault share', { field: 'amount' });
          return recordWrite(operations, trx, {
            ...deposit,
            details: {
              vault_id: v.id,
              position_id: positionId,
              shares: estimate.toString(),
              ...(await onchainDetails(trx, { action: 'deposit', vault: v.address as Address, amount: amount.toString(), minimum: '0' })),
            },
          });
        }
        // A ledger vault (issue 30): every depositor shares its row, so it is locked last and held for one statement
        // and the COMMIT. The policy decides and the operation is recorded first (its public shape and events carry no
        // shares), then the wallet pays (its balance row), then the vault row is locked and the shares
        // it prices go into the vault, the position and the operation's details in one statement (repo.mintShares).
        return recordWrite(
          operations,
          trx,
          {
            ...deposit,
            settlement: 'immediate',
            details: { vault_id: v.id, position_id: positionId },
          },
          async (operation) => {
            if (operation.status === 'execution_failed') return;
            await ledger.post(trx, {
              operationId: operation.id,
              entryType: 'earn.deposit',
              postings: [
                { account: { kind: 'available', walletId: who.walletId }, asset: asset.symbol, amount: -amount },
                { account: vaultAccount(v), asset: asset.symbol, amount },
              ],
            });
            const locked = await lockedVault(trx, v.id);
            const { position } = await mintInto(trx, who, locked, accruedVault(locked), amount, positionId, operation.id);
            // The wallet's one row in the vault, read above: another id would be a bug.
            if (position.id !== positionId) throw new Error(`the deposit's position ${positionId} is ${position.id} in vault ${v.id}`);
          },
        );
      });
    },

    async depositFromWallet(trx, who, vaultId, assets, operationId) {
      // The wallet's balance row before the vault row (vault.repository's lock order).
      const v = await repo.findVault(trx, vaultId);
      if (!v) throw new ApiError('not_found', 'vault not found', { vault_id: vaultId });
      await ledger.post(trx, {
        operationId,
        entryType: 'earn.deposit',
        postings: [
          { account: { kind: 'available', walletId: who.walletId }, asset: v.asset_symbol, amount: -assets },
          { account: vaultAccount(v), asset: v.asset_symbol, amount: assets },
        ],
      });
      const locked = await lockedVault(trx, vaultId);
      const { position, shares } = await mintInto(trx, who, locked, accruedVault(locked), assets);
      return { positionId: position.id, shares };
    },
  };
}
