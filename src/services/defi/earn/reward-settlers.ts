// On-chain reward claims: the settler credits what the distributor paid; a failed claim returns the accrual to its positions.
import * as repo from '../../../db/repositories/vault.repository.js';
import type { EarnCore } from './vaults.js';

/** Registers the settler of on-chain reward claims and their failure hook. */
export function registerRewardSettlers(core: EarnCore): void {
  const { clock, ledger, operations, walletAddress } = core;
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
      await repo.updatePosition(trx, p.id, {
        shares: BigInt(p.shares),
        principal: BigInt(p.principal),
        reward_checkpoint_ray: BigInt(p.reward_checkpoint_ray),
        rewards_accrued: BigInt(p.rewards_accrued) + BigInt(c.amount),
        updated_at: clock.now(),
      });
    }
  });
}
