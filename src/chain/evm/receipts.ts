// The evm adapter's receipts: an operation's recorded transactions are tracked until one is mined with enough
// confirmations, whose receipt (and the venue's own events) decides the outcome; past CHAIN_SUBMIT_TIMEOUT_MS a
// zero-value self-transfer replaces the pending one, and whichever of them is mined decides.
import type { TransactionReceipt } from 'viem';
import { devWethAbi } from '../../../contracts/artifacts/DevWeth.js';
import { viem } from '../../lib/viem.js';
import * as repo from '../../db/repositories/chain.repository.js';
import type { Address, Chain, OnchainView, TrackResult } from '../port.js';
import { swapRouterAbi } from '../dex.js';
import { morphoEventsAbi } from '../lending.js';
import { devVaultAbi, rewardsDistributorAbi } from '../vaults.js';
import { usdCoinAbi } from '../token.js';
import type { OnchainLendingDetails } from './lending.js';
import type { OnchainSwapDetails, OnchainWrapDetails } from './swaps.js';
import type { EvmChainDeps, EvmTransactions } from './transactions.js';
import { earnDrawsOf } from './vaults.js';

function transferLogIndex(receipt: TransactionReceipt, token: string | null): number | null {
  if (!token) return null;
  const logs = viem().parseEventLogs({ abi: usdCoinAbi, eventName: 'Transfer', logs: receipt.logs.filter((l) => l.address.toLowerCase() === token.toLowerCase()) });
  return logs[0]?.logIndex ?? null;
}

export function createReceipts({ config, chainId, client, relayer, clock, log }: EvmChainDeps, tx: EvmTransactions): Pick<Chain, 'track' | 'onchain'> {
  const confirmations = BigInt(Math.max(1, config.confirmations));
  return {
    async track(trx, op): Promise<TrackResult> {
      const rows = await repo.listChainTxsByOperation(trx, op.id);
      if (rows.length === 0) return { state: 'failed', code: 'settlement_failed', message: 'no transaction was recorded for this operation', txHash: null, feeUnits: 0n };
      const head = await tx.node(() => client.getBlockNumber({ cacheTime: 0 }));
      for (const row of rows) {
        if (row.status === 'replaced' || row.status === 'dropped') continue;
        const receipt = await tx.receiptOf(row.tx_hash);
        if (!receipt) continue;
        if (head - receipt.blockNumber + 1n < confirmations) return { state: 'pending' };
        const logIndex = transferLogIndex(receipt, row.kind === 'swap' || row.kind === 'wrap' || row.kind === 'vault' || row.kind === 'lending' || row.kind === 'rewards' ? null : row.token_address);
        await repo.markChainTxMined(
          trx,
          row,
          {
            block_number: receipt.blockNumber,
            block_hash: receipt.blockHash,
            receipt_status: receipt.status === 'success' ? 1 : 0,
            gas_used: receipt.gasUsed,
            effective_gas_price: receipt.effectiveGasPrice,
            log_index: logIndex,
          },
          clock.now(),
        );
        const feeUnits = row.from_address.toLowerCase() === relayer.address.toLowerCase() ? 0n : receipt.gasUsed * receipt.effectiveGasPrice;
        if (row.kind === 'cancel') {
          return {
            state: 'failed',
            code: 'submission_timeout',
            message: `not mined within ${config.submitTimeoutMs} ms; replaced on chain by a cancellation (${row.tx_hash})`,
            txHash: row.tx_hash,
            feeUnits,
          };
        }
        if (receipt.status !== 'success') return { state: 'failed', code: 'execution_reverted', message: `transaction ${row.tx_hash} reverted on chain ${chainId}`, txHash: row.tx_hash, feeUnits };
        // The router's Swapped event (an account's lane swap is sent to the account, which calls the router).
        const routerAddress = ((op.details as Partial<OnchainSwapDetails> | null)?.onchain_route?.router ?? row.to_address).toLowerCase();
        const swapped =
          row.kind === 'swap' ? viem().parseEventLogs({ abi: swapRouterAbi, eventName: 'Swapped', logs: receipt.logs.filter((l) => l.address.toLowerCase() === routerAddress) })[0] : undefined;
        if (row.kind === 'swap' && !swapped) return { state: 'failed', code: 'settlement_failed', message: `transaction ${row.tx_hash} emitted no Swapped event`, txHash: row.tx_hash, feeUnits };
        const extra: Record<string, unknown> = swapped ? { settled_amount_out: swapped.args.amountOut.toString() } : {};
        // Issue 30: what the WETH contract wrapped (Deposit) or unwrapped (Withdrawal) for the account is what it received.
        const d = op.details as Partial<OnchainSwapDetails & OnchainWrapDetails> | null;
        const weth = row.kind === 'wrap' ? d?.onchain_wrap?.weth : row.kind === 'swap' && d?.unwrap_output ? d.onchain_route?.path.at(-1) : undefined;
        if (weth) {
          const unwrap = row.kind === 'swap' || Boolean(d?.onchain_wrap?.unwrap);
          const event = viem()
            .parseEventLogs({ abi: devWethAbi, eventName: unwrap ? 'Withdrawal' : 'Deposit', logs: receipt.logs.filter((l) => l.address.toLowerCase() === weth.toLowerCase()) })
            .find((e) => ('src' in e.args ? e.args.src : e.args.dst).toLowerCase() === row.to_address.toLowerCase());
          if (!event)
            return { state: 'failed', code: 'settlement_failed', message: `transaction ${row.tx_hash} emitted no WETH ${unwrap ? 'Withdrawal' : 'Deposit'} event`, txHash: row.tx_hash, feeUnits };
          extra.settled_amount_out = event.args.wad.toString();
        }
        // A payment that redeemed Earn positions in its account call (earnDrawsOf) reads them as a vault action does.
        if (row.kind === 'vault' || (row.kind === 'lane' && earnDrawsOf(op).length > 0)) {
          // The vaults' own ERC-4626 events: what was redeemed (Withdraw) and minted (Deposit), and where.
          const events = viem()
            .parseEventLogs({ abi: devVaultAbi, logs: receipt.logs })
            .filter((e) => e.eventName === 'Deposit' || e.eventName === 'Withdraw');
          extra.vault_events = events.map((e) => ({ event: e.eventName, vault: viem().getAddress(e.address), assets: e.args.assets.toString(), shares: e.args.shares.toString() }));
        }
        if (row.kind === 'rewards') {
          // The distributor's own Claimed events: what it paid, to whom.
          const events = viem().parseEventLogs({ abi: rewardsDistributorAbi, eventName: 'Claimed', logs: receipt.logs.filter((l) => l.address.toLowerCase() === row.to_address.toLowerCase()) });
          extra.rewards_events = events.map((e) => ({ account: viem().getAddress(e.args.account), amount: e.args.amount.toString() }));
        }
        if (row.kind === 'lending') {
          // Morpho's own events: what was supplied, withdrawn, borrowed or repaid (assets and shares), for whom.
          const morpho = String((op.details as Partial<OnchainLendingDetails>).onchain_lending?.morpho ?? '').toLowerCase();
          const events = viem().parseEventLogs({ abi: morphoEventsAbi, logs: receipt.logs.filter((l) => l.address.toLowerCase() === morpho) });
          extra.lending_events = events.map((e) => {
            const a = e.args as { assets: bigint; shares?: bigint; onBehalf: Address };
            return { event: e.eventName, assets: a.assets.toString(), shares: (a.shares ?? 0n).toString(), on_behalf: viem().getAddress(a.onBehalf) };
          });
        }
        return { state: 'confirmed', txHash: row.tx_hash, feeUnits, details: { tx_hash: row.tx_hash, block_number: Number(receipt.blockNumber), ...extra } };
      }
      // Nothing mined yet. Past the deadline, a cancellation at the same nonce is queued (once); the pool then
      // mines either it or the original, and the next pass sees which.
      const submittedAt = op.submitted_at?.getTime() ?? op.created_at.getTime();
      if (clock.now().getTime() - submittedAt > config.submitTimeoutMs && !rows.some((r) => r.kind === 'cancel')) {
        const latest = rows[rows.length - 1]!;
        if (!(await tx.replace(trx, latest, true))) log.warn({ operation_id: op.id }, 'submission timed out but no cancellation fits the fee cap; waiting for the original');
      }
      return { state: 'pending' };
    },

    async onchain(db, op, walletAddress) {
      const rows = await repo.listChainTxsByOperation(db, op.id);
      const row = rows.find((r) => r.status === 'mined') ?? rows.find((r) => r.tx_hash === op.tx_hash) ?? rows[rows.length - 1];
      return {
        chain_id: chainId,
        wallet_address: walletAddress,
        from: row ? viem().getAddress(row.from_address) : null,
        to: row ? viem().getAddress(row.to_address) : null,
        to_address: op.to_address,
        token_address: row?.token_address ?? null,
        tx_hash: row?.tx_hash ?? null,
        block_number: row?.block_number === null || row?.block_number === undefined ? null : Number(row.block_number),
        block_hash: row?.block_hash ?? null,
        log_index: row?.log_index ?? null,
        gas_used: row?.gas_used ?? null,
        effective_gas_price: row?.effective_gas_price ?? null,
        // A lane call goes through the agent's account (the wrapper) and is sent by the relayer.
        agent_wrapper_address: row?.kind === 'lane' ? viem().getAddress(row.to_address) : null,
        agent_sender_address: row ? viem().getAddress(row.from_address) : null,
      } satisfies OnchainView;
    },
  };
}
