// The evm adapter (CHAIN_RPC_URL set): payments, crypto withdrawals and DeFi actions settle on a real node through
// viem. This file composes its rooms: transactions.ts (nonces, signing, recording, broadcast, fee bumps), receipts.ts
// (tracking, confirmations), reads.ts (state reads), one module per venue (transfers, swaps, vaults, lending) and
// account-lane.ts (an agent account's lane, issue 24, with ../evm-custody.ts).
import { viem } from '../../lib/viem.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import { findAsset, type AssetRow } from '../../db/repositories/ledger.repository.js';
import { openWalletAccount } from '../../lib/wallet-keys.js';
import type { Chain } from '../port.js';
import { createDex } from '../dex.js';
import { createLendingVenue } from '../lending.js';
import { createEarnVenue } from '../vaults.js';
import { createEvmCustody } from '../evm-custody.js';
import { createAccountLane } from './account-lane.js';
import { createLendingCalls, type OnchainLendingDetails } from './lending.js';
import { createReads } from './reads.js';
import { createReceipts } from './receipts.js';
import { createSwaps, type OnchainSwapDetails, type OnchainWrapDetails } from './swaps.js';
import { createTransactions, type EvmChainDeps, type Submitted } from './transactions.js';
import { createTransfers, isNative } from './transfers.js';
import { createVaultCalls, type OnchainRewardsDetails, type OnchainVaultDetails } from './vaults.js';

export type { EvmChainDeps } from './transactions.js';
export type { OnchainLendingDetails } from './lending.js';
export type { OnchainSwapDetails, OnchainWrapDetails } from './swaps.js';
export type { OnchainRewardsDetails, OnchainVaultDetails } from './vaults.js';

const CHAIN_SETTLED_TYPES = new Set(['payment', 'withdrawal.crypto']);

export function createEvmChain(deps: EvmChainDeps): Chain {
  const { config, chainId, client, relayer, sealer, clock } = deps;
  const tx = createTransactions(deps);
  const { node, nextNonce, currentFees, record } = tx;
  const custody = createEvmCustody({ config, chainId, client, relayer, sealer, clock, node, nextNonce, currentFees, record });
  const transfers = createTransfers(deps, tx);
  const swaps = createSwaps(deps, tx);
  const vaults = createVaultCalls(deps, tx);
  const lending = createLendingCalls(deps, tx);
  const lane = createAccountLane(custody, vaults);

  const chain: Chain = {
    mode: 'evm',
    chainId,
    dex: createDex({ client, chainId }),
    earn: createEarnVenue({ client, chainId }),
    lending: createLendingVenue({ client, chainId }),
    custody: custody.port,

    settlesOnChain(op, asset) {
      // An account wallet's one-off payment is a cheque issued in the account (issue 24).
      if (op.type === 'one_off_payment.create') return Boolean((op.details as { cheque_id?: string } | null)?.cheque_id);
      if (op.type.startsWith('collateral.') || op.type.startsWith('debt.')) return Boolean((op.details as Partial<OnchainLendingDetails> | null)?.onchain_lending);
      if (op.type === 'conversion') {
        const d = op.details as Partial<OnchainSwapDetails & OnchainWrapDetails> | null;
        return Boolean(d?.onchain_route ?? d?.onchain_wrap);
      }
      if (op.type === 'earn.rewards_claim') return Boolean((op.details as Partial<OnchainRewardsDetails> | null)?.onchain_rewards);
      if (op.type.startsWith('earn.')) return Boolean((op.details as Partial<OnchainVaultDetails> | null)?.onchain_vault);
      if (!asset || !CHAIN_SETTLED_TYPES.has(op.type)) return false;
      const deliverAs = (op.details as { deliver_as?: string } | null)?.deliver_as;
      if (deliverAs && deliverAs !== asset.symbol) return false; // a conversion on delivery keeps its present settlement
      if (isNative(asset)) return asset.symbol === 'ETH';
      return asset.eip712_name !== null && (asset.symbol === 'USDC' || asset.symbol in config.assetAddresses);
    },

    gasReserve: (asset) => (isNative(asset) ? config.ethGasReserveWei : 0n),

    async submit(trx, op) {
      const asset = (await findAsset(trx, op.asset_symbol!))!;
      const wallet = await findWalletByAgent(trx, op.agent_id);
      if (!wallet?.sealed_private_key) return { ok: false, code: 'settlement_failed', message: 'the wallet has no key' };
      let call: Submitted;
      if (wallet.custody === 'account') {
        // Issue 24: the agent's AgentAccount, through its lane.
        call = await lane.submitThroughAccount(trx, op, { agentId: op.agent_id, address: viem().getAddress(wallet.address!), sealedLaneKey: wallet.sealed_private_key }, asset);
      } else {
        const account = openWalletAccount(sealer, wallet.sealed_private_key);
        const amount = BigInt(op.amount!);
        const to = viem().getAddress(op.to_address!);
        if ((op.details as Partial<OnchainRewardsDetails> | null)?.onchain_rewards) call = await vaults.submitRewardsClaim(trx, op.id, account.address, op.details as unknown as OnchainRewardsDetails);
        else if ((op.details as Partial<OnchainLendingDetails> | null)?.onchain_lending) call = await lending.submitLendingCall(trx, op.id, account, op.details as unknown as OnchainLendingDetails);
        else if (op.type === 'conversion') call = await swaps.submitSwap(trx, op.id, account, amount, op.details as unknown as OnchainSwapDetails);
        else if (op.type.startsWith('earn.')) call = await vaults.submitVaultCall(trx, op.id, account, op.details as unknown as OnchainVaultDetails);
        else if (isNative(asset)) call = await transfers.submitNative(trx, op.id, account, to, amount);
        else call = await transfers.submitTokenTransfer(trx, op.id, account, asset, to, amount);
      }
      if (!call.ok) return call;
      return { ok: true, txHash: call.hash, recheckAt: new Date(clock.now().getTime() + config.pollMs) };
    },

    ...createReceipts(deps, tx),
    pump: tx.pump,
    ...createReads(deps, tx),
  };
  return chain;
}

export type { AssetRow };
