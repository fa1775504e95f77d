// Earn rewards: claims by protocol (on the ledger, or paid by the on-chain distributor), their settler and failure hook.
import { withTransaction } from '../../../db/knex.js';
import * as repo from '../../../db/repositories/vault.repository.js';
import type { PositionRow, VaultRow } from '../../../db/repositories/vault.repository.js';
import { ApiError } from '../../../lib/errors.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount } from '../../../lib/money.js';
import type { AccruedVault, EarnService } from './types.js';
import type { EarnCore } from './vaults.js';
import { recordWrite } from '../record.js';

export function createEarnRewards(core: EarnCore): Pick<EarnService, 'claimRewards'> {
  const { clock, ledger, operations, policy, venue, onchain, accruedVault, saveVault, settleRewards, assetOf, allowedProtocols, lockBalances } = core;

  return {
    async claimRewards(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await policy.lock(trx, who.agentId);
        const wanted = body.protocols && body.protocols.length > 0 ? body.protocols : null;
        const positions = await repo.listAllPositions(trx, who.walletId);
        // The balance rows a claim credits (the vaults' reward assets), then the vault rows (vault.repository's lock order).
        const rewardAssets = (await repo.listVaults(trx)).filter((v) => v.reward_asset_symbol && positions.some((p) => p.vault_id === v.id)).map((v) => v.reward_asset_symbol!);
        await lockBalances(trx, who.walletId, rewardAssets);
        const vaults = await repo.lockVaults(
          trx,
          positions.map((p) => p.vault_id),
        );
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
        const claim = {
          principal: who,
          type: 'earn.rewards_claim',
          resource: { type: 'earn_rewards_claim', id: claimId },
          policy: { protocol: policyProtocol },
          eventData: { protocols, rewards: rewardList },
          idempotencyKey,
        };
        const distributor = venue && claims.length > 0 ? await venue.rewards(trx) : null;
        const onchainClaims = distributor ? await Promise.all(claims.map((c) => onchain(trx, c.v))) : [];
        if (onchainClaims.some((x) => x)) {
          const d = distributor!;
          if (onchainClaims.some((x) => !x) || claims.some((c) => c.v.reward_asset_symbol !== d.asset)) {
            const named = (pick: boolean) => [...new Set(claims.filter((_, i) => onchainClaims[i] === pick).map((c) => c.v.protocol_id))];
            throw new ApiError(
              'validation_failed',
              `rewards of on-chain vaults (${named(true).join(', ')}) and of ledger vaults (${named(false).join(', ')}) are claimed separately: name the protocols`,
              { field: 'protocols' },
            );
          }
          const total = single![1];
          // The ledger's accrual leaves the positions now (so no second claim can take it); the worker credits the
          // wallet with what the distributor's Claimed event paid, which is this same amount set on chain.
          return recordWrite(
            operations,
            trx,
            {
              ...claim,
              asset: d.asset,
              amount: total,
              holds: [],
              toAddress: d.distributor,
              details: {
                protocols,
                rewards: { [d.asset]: total.toString() },
                claims: claims.map((c) => ({ position_id: c.p.id, protocol: c.v.protocol_id, asset: c.v.reward_asset_symbol!, amount: c.rewards.toString() })),
                onchain_rewards: { distributor: d.distributor, token: d.token, amount: total.toString() },
              },
              humanMessage: `Claiming ${rewardList.map((r) => `${r.amount} ${r.asset_symbol}`).join(' and ')} rewards from ${protocols.join(', ')}`,
            },
            async (operation) => {
              if (operation.status === 'execution_failed') return;
              const now = clock.now();
              for (const c of claims) {
                await repo.updatePosition(trx, c.p.id, { shares: BigInt(c.p.shares), principal: BigInt(c.p.principal), reward_checkpoint_ray: c.a.accRewardRay, rewards_accrued: 0n, updated_at: now });
                await saveVault(trx, c.v, c.a);
              }
            },
          );
        }
        return recordWrite(
          operations,
          trx,
          {
            ...claim,
            asset: single ? single[0] : null,
            amount: single ? single[1] : null,
            settlement: 'immediate',
            details: { protocols, rewards: Object.fromEntries([...totals].map(([k, x]) => [k, x.toString()])) },
            humanMessage: `Claiming ${rewardList.map((r) => `${r.amount} ${r.asset_symbol}`).join(' and ') || 'no'} rewards from ${protocols.join(', ') || (wanted ?? []).join(', ') || 'earn protocols'}`,
          },
          async (operation) => {
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
          },
        );
      });
    },
  };
}
