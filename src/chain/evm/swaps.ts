// The evm adapter's swaps: a conversion through the dev DEX's SwapRouter, on the wallet's EIP-2612 permit of the input.
import type { PrivateKeyAccount } from 'viem';
import type { Knex } from '../../db/knex.js';
import { viem } from '../../lib/viem.js';
import { swapRouterAbi } from '../dex.js';
import type { Address } from '../port.js';
import type { EvmChainDeps, EvmTransactions, Submitted } from './transactions.js';

/** Gas limit of a routed swap with its permit (about 110k per hop + 60k; fixed, so a swap that would revert is still mined and fails visibly). */
export const SWAP_GAS = 400_000n;

/** What a conversion executed on chain records in its operation's details (see conversion.service.ts). */
export interface OnchainSwapDetails {
  onchain_route: { router: Address; pairs: Address[]; path: Address[] };
  min_amount_out: string;
  /** Issue 30: the input is the account's ETH, wrapped into `path[0]` (WETH) in the same lane call before the swap. */
  wrap_input?: boolean;
  /** Issue 30: the output is ETH: the swap's WETH output (`path[last]`) is unwrapped in the same lane call, all of it. */
  unwrap_output?: boolean;
}

/** Issue 30: an account's ETH -> WETH (or WETH -> ETH) conversion, one lane call `wrapEth(weth, amount, unwrap)`. */
export interface OnchainWrapDetails {
  onchain_wrap: { weth: Address; unwrap: boolean };
}

export function createSwaps({ relayer, client }: EvmChainDeps, tx: EvmTransactions) {
  /**
   * A conversion: the wallet signs an EIP-2612 permit of the input to the router and the relayer submits
   * `swapExactInWithPermit` (one transaction: the input leaves the wallet, every hop swaps, and it reverts below the
   * minimum output). A swap that would revert at the current reserves is refused here, before anything is recorded.
   */
  async function submitSwap(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, amountIn: bigint, details: OnchainSwapDetails): Promise<Submitted> {
    const { router, pairs, path } = details.onchain_route;
    const minOut = BigInt(details.min_amount_out);
    const tokenIn = viem().getAddress(path[0]!);
    const { permit, deadline, inFlight } = await tx.signPermit(trx, account, tokenIn, router, amountIn);
    const args = [account.address, pairs, path, amountIn, minOut, permit] as const;
    if (!inFlight) {
      // Nothing of this wallet in flight: the swap can be tried against the current state.
      const reverted = await tx.revertOf(() => client.simulateContract({ address: router, abi: swapRouterAbi, functionName: 'swapExactInWithPermit', args, account: relayer.address }));
      if (reverted !== null) {
        const slippage = /InsufficientOutputAmount/.test(reverted);
        return {
          ok: false,
          code: slippage ? 'slippage_exceeded' : 'settlement_failed',
          message: slippage ? `the reserves moved: the swap would return less than the minimum ${minOut}` : `the swap would revert: ${reverted}`,
        };
      }
    }
    const data = viem().encodeFunctionData({ abi: swapRouterAbi, functionName: 'swapExactInWithPermit', args });
    const hash = await tx.recordRelayerCall(trx, router, data, SWAP_GAS * BigInt(pairs.length), {
      operation_id: operationId,
      kind: 'swap',
      attempt: 0,
      token_address: tokenIn.toLowerCase(),
      transfer_to: account.address.toLowerCase(),
      transfer_value: amountIn,
      authorization_nonce: null,
      valid_before: deadline,
    });
    return { ok: true, hash };
  }

  return { submitSwap };
}
