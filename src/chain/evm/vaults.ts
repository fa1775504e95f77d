// The evm adapter's earn venue: ERC-4626 vault actions through the EarnRouter, and rewards claims at the
// RewardsDistributor.
import type { PrivateKeyAccount } from 'viem';
import type { Knex } from '../../db/knex.js';
import { viem } from '../../lib/viem.js';
import type { Address } from '../port.js';
import { devVaultAbi, earnRouterAbi, rewardsDistributorAbi } from '../vaults.js';
import type { EvmChainDeps, EvmTransactions, Submitted } from './transactions.js';

/** Gas limit of a vault action through the EarnRouter (a move redeems and deposits: about 200k). */
export const VAULT_GAS = 500_000n;
/** Gas limit of a rewards claim at the RewardsDistributor (credit + transfer: about 80k). */
export const REWARDS_GAS = 200_000n;

/** What an earn operation acting on an ERC-4626 vault records in its details (see earn.service.ts). */
export interface OnchainVaultDetails {
  onchain_vault: {
    router: Address;
    action: 'deposit' | 'redeem' | 'move';
    vault: Address;
    /** move: the vault receiving the assets. */
    to_vault?: Address;
    /** deposit: assets; redeem and move: shares of `vault`. */
    amount: string;
    /** deposit and move: the least shares minted; redeem: the least assets paid. */
    minimum: string;
  };
}

/**
 * The on-chain positions a payment draws on (its `details.drawn_from_earn` entries marked `onchain`, see
 * services/defi/earn/draw.ts): each redeemed (`shares`, at least `amount` assets) before the transfer, in one account call.
 */
export function earnDrawsOf(op: { details: unknown }): { vault: Address; shares: bigint; minimum: bigint }[] {
  const drawn = (op.details as { drawn_from_earn?: { vault: string; shares: string; amount: string; onchain?: boolean }[] } | null)?.drawn_from_earn ?? [];
  return drawn.filter((d) => d.onchain).map((d) => ({ vault: viem().getAddress(d.vault), shares: BigInt(d.shares), minimum: BigInt(d.amount) }));
}

/** What an earn rewards claim paid by the rewards distributor records in its details (see earn.service.ts). */
export interface OnchainRewardsDetails {
  onchain_rewards: {
    distributor: Address;
    /** The reward token the distributor pays. */
    token: Address;
    /** Reward units: the ledger's accrual, credited on chain and paid in the same transaction. */
    amount: string;
  };
}

export function createVaultCalls({ relayer, client }: EvmChainDeps, tx: EvmTransactions) {
  /** A vault action through the EarnRouter on the wallet's permit (asset for deposits, shares otherwise), simulated first. */
  async function submitVaultCall(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, details: OnchainVaultDetails): Promise<Submitted> {
    const c = details.onchain_vault;
    const vault = viem().getAddress(c.vault);
    const amount = BigInt(c.amount);
    const minimum = BigInt(c.minimum);
    const token = c.action === 'deposit' ? viem().getAddress(await tx.node(() => client.readContract({ address: vault, abi: devVaultAbi, functionName: 'asset' }))) : vault;
    const { permit, deadline, inFlight } = await tx.signPermit(trx, account, token, c.router, amount);
    const data =
      c.action === 'deposit'
        ? viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'depositWithPermit', args: [account.address, vault, amount, minimum, permit] })
        : c.action === 'redeem'
          ? viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'redeemWithPermit', args: [account.address, vault, amount, minimum, permit] })
          : viem().encodeFunctionData({ abi: earnRouterAbi, functionName: 'moveWithPermit', args: [account.address, vault, viem().getAddress(c.to_vault!), amount, minimum, permit] });
    if (!inFlight) {
      const reverted = await tx.revertOf(() => client.call({ to: c.router, data, account: relayer.address }));
      if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the vault ${c.action} would revert: ${reverted}` };
    }
    const hash = await tx.recordRelayerCall(trx, c.router, data, VAULT_GAS, {
      operation_id: operationId,
      kind: 'vault',
      attempt: 0,
      token_address: token.toLowerCase(),
      transfer_to: account.address.toLowerCase(),
      transfer_value: amount,
      authorization_nonce: null,
      valid_before: deadline,
    });
    return { ok: true, hash };
  }

  /**
   * A rewards claim: the relayer credits the wallet's claimable at the distributor with the ledger's accrual and pays
   * it in one transaction (`creditAndClaim`); nothing of the wallet is signed (the money only comes in). Simulated first.
   */
  async function submitRewardsClaim(trx: Knex.Transaction, operationId: string, wallet: Address, details: OnchainRewardsDetails): Promise<Submitted> {
    const c = details.onchain_rewards;
    const distributor = viem().getAddress(c.distributor);
    const amount = BigInt(c.amount);
    const data = viem().encodeFunctionData({ abi: rewardsDistributorAbi, functionName: 'creditAndClaim', args: [wallet, amount] });
    const reverted = await tx.revertOf(() => client.call({ to: distributor, data, account: relayer.address }));
    if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the rewards claim would revert: ${reverted}` };
    const hash = await tx.recordRelayerCall(trx, distributor, data, REWARDS_GAS, {
      operation_id: operationId,
      kind: 'rewards',
      attempt: 0,
      token_address: c.token.toLowerCase(),
      transfer_to: wallet.toLowerCase(),
      transfer_value: amount,
      authorization_nonce: null,
      valid_before: null,
    });
    return { ok: true, hash };
  }

  return { submitVaultCall, submitRewardsClaim };
}
