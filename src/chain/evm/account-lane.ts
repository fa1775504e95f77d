// The evm adapter's route for an account wallet (issue 24): money out as a lane call of its AgentAccount (pay, cheque,
// swap, vault, Morpho), whose proceeds the account itself receives; a rewards claim pays the account as it pays a wallet.
import type { Knex } from '../../db/knex.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import { viem } from '../../lib/viem.js';
import { agentAccountAbi, morphoMarket } from '../custody.js';
import { LANE_GAS, type EvmCustody } from '../evm-custody.js';
import type { AccountWallet, ChainAsset } from '../port.js';
import { LENDING_GAS, type OnchainLendingDetails } from './lending.js';
import { SWAP_GAS, type OnchainSwapDetails, type OnchainWrapDetails } from './swaps.js';
import type { Submitted } from './transactions.js';
import { VAULT_GAS, earnDrawsOf, type OnchainRewardsDetails, type OnchainVaultDetails, type createVaultCalls } from './vaults.js';

/** Gas of a wrap inside a batch (WETH9 deposit, the balance check and the self-call). */
const WRAP_GAS = 120_000n;

/** The operation types an agent account's lane carries (issue 24). */
const LANE_TYPES = new Set(['payment', 'withdrawal.crypto', 'one_off_payment.create']);

export function createAccountLane(custody: EvmCustody, vaults: ReturnType<typeof createVaultCalls>) {
  async function submitThroughAccount(trx: Knex.Transaction, op: OperationRow, wallet: AccountWallet, asset: ChainAsset): Promise<Submitted> {
    const d = op.details as Partial<OnchainSwapDetails & OnchainWrapDetails & OnchainVaultDetails & OnchainLendingDetails & OnchainRewardsDetails> | null;
    if (d?.onchain_rewards) return vaults.submitRewardsClaim(trx, op.id, wallet.address, op.details as unknown as OnchainRewardsDetails);
    const v = viem();
    const encode = (functionName: string, args: readonly unknown[]) => v.encodeFunctionData({ abi: agentAccountAbi, functionName, args } as Parameters<typeof v.encodeFunctionData>[0]);
    if (d?.onchain_route) {
      const { router, pairs, path } = d.onchain_route;
      const swap = encode('swap', [router, pairs, path, BigInt(op.amount!), BigInt(d.min_amount_out!)]);
      // Issue 30, in the same relayed call (AgentAccount.batch): ETH in is wrapped into the route's WETH first; ETH out
      // is the swap's WETH output unwrapped after it (amount 0: exactly what the swap paid, known only on chain).
      const calls = [...(d.wrap_input ? [encode('wrapEth', [path[0], BigInt(op.amount!), false])] : []), swap, ...(d.unwrap_output ? [encode('wrapEth', [path[path.length - 1], 0n, true])] : [])];
      const inner = calls.length > 1 ? encode('batch', [calls]) : swap;
      const gas = SWAP_GAS * BigInt(pairs.length) + LANE_GAS + WRAP_GAS * BigInt(calls.length - 1);
      const call = await custody.submitInner(trx, op, wallet, inner, { kind: 'swap', gas, token: path[0]!.toLowerCase(), value: BigInt(op.amount!) });
      return !call.ok && call.code === 'slippage_exceeded'
        ? { ok: false, code: 'slippage_exceeded', message: `the reserves moved: the swap would return less than the minimum ${d.min_amount_out}` }
        : call;
    }
    if (d?.onchain_wrap) {
      // Issue 30: ETH <-> WETH alone, through the WETH the owner's policy allows (the account checks it and the balances).
      const { weth, unwrap } = d.onchain_wrap;
      const inner = encode('wrapEth', [v.getAddress(weth), BigInt(op.amount!), unwrap]);
      return custody.submitInner(trx, op, wallet, inner, { kind: 'wrap', gas: LANE_GAS + WRAP_GAS, token: unwrap ? weth.toLowerCase() : null, value: BigInt(op.amount!) });
    }
    if (d?.onchain_vault) {
      const c = d.onchain_vault;
      // A move is one lane call (AgentAccount.move): the shares redeemed and the assets deposited in one transaction.
      const inner =
        c.action === 'move'
          ? encode('move', [v.getAddress(c.vault), v.getAddress(c.to_vault!), BigInt(c.amount), BigInt(c.minimum)])
          : encode(c.action === 'deposit' ? 'deposit' : 'redeem', [v.getAddress(c.vault), BigInt(c.amount), BigInt(c.minimum)]);
      return custody.submitInner(trx, op, wallet, inner, { kind: 'vault', gas: VAULT_GAS, token: c.vault.toLowerCase(), value: BigInt(c.amount) });
    }
    if (d?.onchain_lending) {
      const c = d.onchain_lending;
      const market = morphoMarket(c.params as Parameters<typeof morphoMarket>[0]);
      const morpho = v.getAddress(c.morpho);
      const call =
        c.action === 'repay'
          ? encode('repay', [morpho, market, BigInt(c.assets), BigInt(c.shares ?? '0'), BigInt(c.max_assets!)])
          : encode(c.action === 'supply_collateral' ? 'supplyCollateral' : c.action === 'withdraw_collateral' ? 'withdrawCollateral' : 'borrow', [morpho, market, BigInt(c.assets)]);
      // Issue 30: ETH collateral is wrapped into the market's WETH first, in the same relayed call.
      const inner = c.wrap_input ? encode('batch', [[encode('wrapEth', [v.getAddress(c.params.collateralToken), BigInt(c.assets), false]), call]]) : call;
      return custody.submitInner(trx, op, wallet, inner, { kind: 'lending', gas: LENDING_GAS + (c.wrap_input ? WRAP_GAS : 0n), token: null, value: BigInt(c.assets) });
    }
    if (!LANE_TYPES.has(op.type)) return { ok: false, code: 'not_implemented', message: `${op.type} does not go through an agent account's lane` };
    // Issue 26: a payment short of the asset redeems the Earn positions it drew on first, in the same relayed call.
    const draws = op.type === 'payment' ? earnDrawsOf(op) : [];
    const prelude = draws.length > 0 ? { calls: draws.map((d) => encode('redeem', [d.vault, d.shares, d.minimum])), gas: VAULT_GAS * BigInt(draws.length) } : undefined;
    return custody.submitLane(trx, op, wallet, asset, prelude);
  }

  return { submitThroughAccount };
}
