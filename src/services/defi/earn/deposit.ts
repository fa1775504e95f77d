// Earn deposits: into a vault (on the ledger, or held for the worker on an on-chain vault), and from the wallet for a conversion.
import type { Address } from '../../../chain/port.js';
import { withTransaction } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import * as erc from '../../../lib/defi/erc4626.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount } from '../../../lib/money.js';
import type { EarnService } from './types.js';
import type { EarnCore } from './vaults.js';
import { recordWrite } from '../record.js';

export function createEarnDeposits(core: EarnCore): Pick<EarnService, 'deposit' | 'depositFromWallet'> {
  const { ledger, operations, policy, venue, onchain, onchainDetails, accruedVault, lockedVault, assetOf, resolveAmount, bestVault, mintInto, vaultAccount } = core;

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
        const v = await lockedVault(trx, candidate.id);
        const a = accruedVault(v);
        const existing = await repo.findPositionByVault(trx, who.walletId, v.id);
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
        if (await onchain(trx, v)) {
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
        const shares = erc.previewDeposit(a.state, amount);
        return recordWrite(
          operations,
          trx,
          {
            ...deposit,
            settlement: 'immediate',
            details: { vault_id: v.id, position_id: positionId, shares: shares.toString() },
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
            await mintInto(trx, who, v, a, amount, positionId);
          },
        );
      });
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
}
