// The evm adapter's lending venue: Morpho Blue actions through the BorrowRouter, on a permit or the wallet's Morpho
// authorization of the router.
import type { PrivateKeyAccount } from 'viem';
import type { Knex } from '../../db/knex.js';
import { viem } from '../../lib/viem.js';
import { borrowRouterAbi, marketTuple, morphoAbi, type MarketParams } from '../lending.js';
import type { Address, Hex } from '../port.js';
import type { EvmChainDeps, EvmTransactions, Submitted } from './transactions.js';

/** Gas limit of a Morpho Blue action through the BorrowRouter (a first borrow also sets the authorization: about 250k). */
export const LENDING_GAS = 500_000n;

/** What a borrow operation acting on the Morpho Blue market records in its details (see borrow.service.ts). */
export interface OnchainLendingDetails {
  onchain_lending: {
    router: Address;
    morpho: Address;
    market_id: Hex;
    params: MarketParams;
    action: 'supply_collateral' | 'withdraw_collateral' | 'borrow' | 'repay';
    /** Collateral or loan units; repay by shares: 0. */
    assets: string;
    /** repay by shares (repay_all): the borrow shares repaid. */
    shares?: string;
    /** repay: the most loan units the router may pull from the wallet (the rest returns). */
    max_assets?: string;
    /** Issue 30: supply_collateral of the account's ETH, wrapped into the market's WETH in the same lane call. */
    wrap_input?: boolean;
  };
}

const morphoAuthorizationTypes = {
  Authorization: [
    { name: 'authorizer', type: 'address' },
    { name: 'authorized', type: 'address' },
    { name: 'isAuthorized', type: 'bool' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;

export function createLendingCalls({ config, chainId, client, relayer, clock }: EvmChainDeps, tx: EvmTransactions) {
  /**
   * A Morpho Blue action through the BorrowRouter: a permit of the collateral (supply) or loan token (repay) to the
   * router, or the wallet's Morpho authorization of the router (borrow, withdraw). Simulated first: a call Morpho
   * would refuse (unhealthy, no liquidity) is refused here, before anything is recorded.
   */
  async function submitLendingCall(trx: Knex.Transaction, operationId: string, account: PrivateKeyAccount, details: OnchainLendingDetails): Promise<Submitted> {
    const c = details.onchain_lending;
    const router = viem().getAddress(c.router);
    const market = marketTuple(c.params);
    const assets = BigInt(c.assets);
    let data: Hex;
    let token: Address | null = null;
    let value = assets;
    let deadline: bigint;
    let inFlight = false;
    if (c.action === 'supply_collateral' || c.action === 'repay') {
      token = viem().getAddress(c.action === 'repay' ? c.params.loanToken : c.params.collateralToken);
      value = c.action === 'repay' ? BigInt(c.max_assets!) : assets;
      const signed = await tx.signPermit(trx, account, token, router, value);
      ({ deadline, inFlight } = signed);
      data =
        c.action === 'repay'
          ? viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'repayWithPermit', args: [account.address, market, assets, BigInt(c.shares ?? '0'), value, signed.permit] })
          : viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'supplyCollateralWithPermit', args: [account.address, market, assets, signed.permit] });
    } else {
      const morpho = viem().getAddress(c.morpho);
      const nonce = await tx.node(() => client.readContract({ address: morpho, abi: morphoAbi, functionName: 'nonce', args: [account.address] }));
      deadline = BigInt(Math.floor(clock.now().getTime() / 1000) + config.authorizationTtlSeconds);
      const auth = { authorizer: account.address, authorized: router, isAuthorized: true, nonce, deadline };
      const signature = await account.signTypedData({ domain: { chainId, verifyingContract: morpho }, types: morphoAuthorizationTypes, primaryType: 'Authorization', message: auth });
      const { v, r, s: sigS } = viem().parseSignature(signature);
      const sig = { v: Number(v), r, s: sigS };
      data =
        c.action === 'borrow'
          ? viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'borrowWithSig', args: [account.address, market, assets, auth, sig] })
          : viem().encodeFunctionData({ abi: borrowRouterAbi, functionName: 'withdrawCollateralWithSig', args: [account.address, market, assets, auth, sig] });
    }
    if (!inFlight) {
      const reverted = await tx.revertOf(() => client.call({ to: router, data, account: relayer.address }));
      if (reverted !== null) return { ok: false, code: 'settlement_failed', message: `the market ${c.action} would revert: ${reverted}` };
    }
    const hash = await tx.recordRelayerCall(trx, router, data, LENDING_GAS, {
      operation_id: operationId,
      kind: 'lending',
      attempt: 0,
      token_address: token?.toLowerCase() ?? null,
      transfer_to: account.address.toLowerCase(),
      transfer_value: value,
      authorization_nonce: null,
      valid_before: deadline,
    });
    return { ok: true, hash };
  }

  return { submitLendingCall };
}
