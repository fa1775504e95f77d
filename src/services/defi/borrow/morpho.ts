// Borrow on chain (evm mode, the development Morpho Blue market): WETH collateral, USDC debt, the protocol's own figures.
import { viem } from '../../../lib/viem.js';
import type { OnchainLendingDetails } from '../../../chain/evm/index.js';
import { accountData, type LendingContracts, type LendingPosition, toAssetsUp, toSharesUp } from '../../../chain/lending.js';
import type { Address } from '../../../chain/port.js';
import { findWalletByAgent } from '../../../db/repositories/agent.repository.js';
import { type Db, type Knex, withTransaction } from '../../../db/knex.js';
import { type AssetRow, findPrice } from '../../../db/repositories/ledger.repository.js';
import * as repo from '../../../db/repositories/market.repository.js';
import type { MarketRow } from '../../../db/repositories/market.repository.js';
import * as aave from '../../../lib/defi/aave.js';
import { ApiError } from '../../../lib/errors.js';
import type { Refusal } from '../../../lib/refusal.js';
import { formatAmount, mulDiv } from '../../../lib/money.js';
import type { OwnerRef, WriteResponse } from '../../ledger/operations.js';
import { type BorrowCore, ratio, usd } from './markets.js';
import { recordWrite } from '../record.js';
import type { Schema } from '../../../lib/contract.js';

export interface OnchainMarket {
  c: LendingContracts & { router: Address };
  collateral: AssetRow;
  loan: AssetRow;
}

export type BorrowKit = BorrowCore & ReturnType<typeof createMorpho>;

export function createMorpho(core: BorrowCore) {
  const { ledger, lockAccount, operations, lending } = core;
  async function onchainMarket(db: Db): Promise<OnchainMarket | null> {
    if (!lending) return null;
    const c = await lending.contracts(db);
    if (!c) return null;
    const assets = [...(await ledger.assets(db)).values()];
    const at = (address: string) => assets.find((a) => a.contract_address?.toLowerCase() === address.toLowerCase());
    const collateral = at(c.market.params.collateralToken);
    const loan = at(c.market.params.loanToken);
    return collateral && loan ? { c, collateral, loan } : null;
  }
  async function ownerAddress(db: Db, agentId: string): Promise<Address> {
    const w = await findWalletByAgent(db, agentId);
    if (!w?.address) throw new ApiError('invalid_state_transition', 'the wallet has no on-chain address');
    return w.address as Address;
  }
  /** The wallet's Morpho position; a wallet without an on-chain address has none (reads), and cannot act (writes refuse). */
  async function position(db: Db, om: OnchainMarket, who: OwnerRef, write = true): Promise<LendingPosition> {
    // The zero address holds no position: the market's and oracle's figures stay real.
    if (!write && !(await findWalletByAgent(db, who.agentId))?.address) return lending!.position(om.c, viem().zeroAddress);
    return lending!.position(om.c, await ownerAddress(db, who.agentId));
  }
  /** On chain the market takes one collateral and lends one asset: anything else is refused, not booked beside it. */
  function onchainAsset(om: OnchainMarket, symbol: string, role: 'collateral' | 'borrow', wrapsEth = false): void {
    const want = role === 'collateral' ? om.collateral.symbol : om.loan.symbol;
    // Issue 30: an account's ETH collateral is wrapped into the market's WETH in the lane call that posts it.
    if (wrapsEth && symbol === 'ETH' && want === 'WETH') return;
    if (symbol !== want) {
      throw new ApiError(
        'validation_failed',
        `on this chain the lending market (${om.c.market.name}) takes ${om.collateral.symbol} as collateral and lends ${om.loan.symbol}${symbol === 'ETH' ? ': ETH collateral is posted as WETH' : ''}`,
        { field: 'asset', market_address: om.c.morpho },
      );
    }
  }
  const wadRatio = (wad: bigint) => Number(wad / 10n ** 10n) / 1e8;
  const wadToBps = (wad: bigint) => Number((wad * 10_000n + 10n ** 18n - 1n) / 10n ** 18n);
  function lendingDetails(om: OnchainMarket, action: OnchainLendingDetails['onchain_lending']['action'], assets: bigint, extra: { shares?: bigint; maxAssets?: bigint } = {}): OnchainLendingDetails {
    return {
      onchain_lending: {
        router: om.c.router,
        morpho: om.c.morpho,
        market_id: om.c.market.id,
        params: om.c.market.params,
        action,
        assets: assets.toString(),
        ...(extra.shares !== undefined ? { shares: extra.shares.toString() } : {}),
        ...(extra.maxAssets !== undefined ? { max_assets: extra.maxAssets.toString() } : {}),
      },
    };
  }
  /** The position after borrowing `assets` (Morpho's borrow: shares rounded up, then toAssetsUp on the new totals). */
  function afterBorrow(p: LendingPosition, assets: bigint): LendingPosition {
    const shares = toSharesUp(assets, p.totalBorrowAssets, p.totalBorrowShares);
    const totalBorrowAssets = p.totalBorrowAssets + assets;
    const totalBorrowShares = p.totalBorrowShares + shares;
    const borrowShares = p.borrowShares + shares;
    return { ...p, borrowShares, totalBorrowAssets, totalBorrowShares, borrowed: toAssetsUp(borrowShares, totalBorrowAssets, totalBorrowShares) };
  }
  /** Refuses (ltv_too_high) a position Morpho would find unhealthy, or above max_ltv_after, before anything is submitted. */
  function checkOnchain(p: LendingPosition, maxAfterBps: bigint | null, what: string): { ltvBps: number; ltv: number } {
    const d = accountData(p);
    const ltvBps = p.borrowed === 0n ? 0 : d.collateralValue === 0n ? 10_000 : wadToBps(d.ltvWad);
    const ltv = p.borrowed === 0n ? 0 : wadRatio(d.ltvWad);
    const unhealthy = d.maxBorrow < p.borrowed;
    if (unhealthy || (maxAfterBps !== null && p.borrowed > 0n && d.ltvWad * 10_000n > maxAfterBps * 10n ** 18n)) {
      const limit = unhealthy ? wadRatio(p.lltv) : ratio(maxAfterBps!);
      throw new ApiError('ltv_too_high', `${what} would take the LTV to ${(ltv * 100).toFixed(2)} %, above the ${unhealthy ? "market's liquidation LTV" : 'limit'} of ${(limit * 100).toFixed(2)} %`, {
        ltv_after: ltv,
        limit,
        max_ltv: wadRatio(p.lltv),
      });
    }
    return { ltvBps, ltv };
  }

  async function onchainSummary(db: Db, om: OnchainMarket, who: OwnerRef): Promise<Schema<'BorrowSummary'>> {
    const p = await position(db, om, who, false);
    const d = accountData(p);
    const priceOf = async (symbol: string) => {
      const row = await findPrice(db, symbol);
      if (!row) throw new ApiError('price_stale', `no price for ${symbol}`, { asset: symbol });
      return BigInt(row.usd_e8);
    };
    const [collPrice, loanPrice] = await Promise.all([priceOf(om.collateral.symbol), priceOf(om.loan.symbol)]);
    const collateralUsd = aave.valueUsd(p.collateral, collPrice, om.collateral.decimals, 'down');
    const debtUsd = aave.valueUsd(p.borrowed, loanPrice, om.loan.decimals, 'up');
    const room = d.maxBorrow > p.borrowed ? d.maxBorrow - p.borrowed : 0n;
    const lltv = wadRatio(p.lltv);
    // The collateral price (USD) at which Morpho's maxBorrow falls to the debt.
    const liquidationPrice = p.collateral > 0n && p.borrowed > 0n ? mulDiv(debtUsd * 10n ** BigInt(om.collateral.decimals), 10n ** 18n, p.collateral * p.lltv, 'up') : null;
    const debtRow = await repo.findMarketByAsset(db, om.loan.symbol);
    return {
      collateral_value_usd: usd(collateralUsd),
      debt_usd: usd(debtUsd),
      ltv: p.borrowed === 0n ? 0 : wadRatio(d.ltvWad),
      max_ltv: lltv,
      liquidation_threshold: lltv,
      health_factor: d.healthFactorWad === null ? null : wadRatio(d.healthFactorWad),
      available_to_borrow_usd: usd(aave.valueUsd(room, loanPrice, om.loan.decimals, 'down')),
      liquidation_price_usd: liquidationPrice === null ? null : usd(liquidationPrice),
      debts:
        p.borrowShares === 0n
          ? []
          : [{ asset_symbol: om.loan.symbol, amount: formatAmount(p.borrowed, om.loan.decimals), amount_usd: usd(debtUsd), borrow_apr: debtRow ? ratio(debtRow.borrow_apr_bps) : 0 }],
      collateral:
        p.collateral === 0n
          ? []
          : [
              {
                asset_symbol: om.collateral.symbol,
                amount: formatAmount(p.collateral, om.collateral.decimals),
                amount_usd: usd(collateralUsd),
                price_usd: usd(collPrice),
                max_ltv: lltv,
                liquidation_threshold: lltv,
                market_address: om.c.morpho,
              },
            ],
      onchain: {
        market_address: om.c.morpho,
        market_id: om.c.market.id,
        collateral_asset: om.collateral.symbol,
        loan_asset: om.loan.symbol,
        collateral_units: p.collateral.toString(),
        borrow_shares: p.borrowShares.toString(),
        borrowed_units: p.borrowed.toString(),
        oracle_price: p.price.toString(),
        lltv_wad: p.lltv.toString(),
        ltv_wad: d.ltvWad.toString(),
        health_factor_wad: d.healthFactorWad === null ? null : d.healthFactorWad.toString(),
      },
    };
  }

  /** Settled by the worker on chain: the operation records the market call; its settler books what Morpho's events say. */
  async function createOnchain(
    trx: Db,
    who: OwnerRef,
    om: OnchainMarket,
    input: {
      type: string;
      resourceType: 'collateral' | 'debt';
      resourceId: string;
      asset: AssetRow;
      amount: bigint;
      details: OnchainLendingDetails;
      holds?: { asset: string; amount: bigint }[];
      ltvBps?: number;
      extra?: Record<string, unknown>;
      humanMessage: string;
      idempotencyKey: string | null;
    },
  ): Promise<WriteResponse | Refusal> {
    return recordWrite(operations, trx, {
      principal: who,
      type: input.type,
      resource: { type: input.resourceType, id: input.resourceId },
      asset: input.asset.symbol,
      amount: input.amount,
      policy: { protocol: 'morpho', ...(input.ltvBps !== undefined ? { ltvBps: input.ltvBps } : {}) },
      toAddress: om.c.morpho,
      ...(input.holds ? { holds: input.holds } : {}),
      details: { ...input.extra, market_address: om.c.morpho, ...input.details },
      eventData: { market_address: om.c.morpho, ...input.extra },
      humanMessage: input.humanMessage,
      idempotencyKey: input.idempotencyKey,
    });
  }

  const onchainPool = (om: OnchainMarket) => ({ kind: 'external' as const, name: `borrow:morpho:${om.loan.symbol}` });
  const onchainCollateral = { kind: 'external' as const, name: 'collateral:morpho' };
  function noConversion(source: string | undefined, symbol: string): void {
    if (source !== undefined && source !== symbol) throw new ApiError('validation_failed', `on chain the market is paid in ${symbol} itself: convert first`, { field: 'source_asset' });
  }

  /** Repays `assets` (or every borrow share when `all`) from the wallet's loan-asset balance; the hold covers at most `maxAssets`. */
  async function repayOnchain(
    trx: Db,
    who: OwnerRef,
    om: OnchainMarket,
    p: LendingPosition,
    requested: bigint | 'all',
    type: 'debt.repay' | 'debt.deleverage',
    m: MarketRow,
    extra: Record<string, unknown>,
    humanMessage: (units: bigint) => string,
    idempotencyKey: string | null,
  ): Promise<WriteResponse | Refusal> {
    if (p.borrowShares === 0n) throw new ApiError('invalid_state_transition', `there is no ${om.loan.symbol} debt to repay`, { asset: om.loan.symbol });
    const all = requested === 'all' || requested >= p.borrowed;
    const { available } = await ledger.balance(trx, who.walletId, om.loan.symbol);
    // By shares, Morpho takes toAssetsUp(shares) at the accrued totals: a margin for the interest until it is mined; the rest returns.
    const expected = all ? p.borrowed : (requested as bigint);
    let maxAssets = all ? expected + expected / 1000n + 1n : expected;
    if (all && maxAssets > available && available >= expected) maxAssets = available;
    if (available < maxAssets)
      throw new ApiError('insufficient_funds', `repaying needs ${formatAmount(maxAssets, om.loan.decimals)} ${om.loan.symbol}; the wallet holds ${formatAmount(available, om.loan.decimals)}`, {
        asset: om.loan.symbol,
      });
    const details = all ? lendingDetails(om, 'repay', 0n, { shares: p.borrowShares, maxAssets }) : lendingDetails(om, 'repay', expected, { maxAssets });
    return createOnchain(trx, who, om, {
      type,
      resourceType: 'debt',
      resourceId: m.id,
      asset: om.loan,
      amount: expected,
      details,
      holds: [{ asset: om.loan.symbol, amount: maxAssets }],
      extra: { ...extra, repaid_all: all },
      humanMessage: humanMessage(expected),
      idempotencyKey,
    });
  }

  /**
   * A write of the borrow area: one transaction, the account locked (policy row, then wallet: the lock order every DeFi
   * write shares), the asset, and the chain's lending market when there is one (which must take the asset in `role`).
   */
  async function accountWrite<T>(
    db: Db,
    who: OwnerRef,
    symbol: string,
    role: 'collateral' | 'borrow',
    write: (trx: Knex.Transaction, asset: AssetRow, om: OnchainMarket | null) => Promise<T>,
    opts: { wrapsEth?: boolean } = {},
  ): Promise<T> {
    return withTransaction(db, async (trx) => {
      await lockAccount(trx, who);
      const asset = await ledger.requireAsset(trx, symbol);
      const om = await onchainMarket(trx);
      const wrapsEth = opts.wrapsEth === true && asset.symbol === 'ETH' && (await findWalletByAgent(trx, who.agentId))?.custody === 'account';
      if (om) onchainAsset(om, asset.symbol, role, wrapsEth);
      return write(trx, asset, om);
    });
  }

  return {
    accountWrite,
    onchainMarket,
    ownerAddress,
    position,
    onchainAsset,
    wadRatio,
    wadToBps,
    lendingDetails,
    afterBorrow,
    checkOnchain,
    onchainSummary,
    createOnchain,
    onchainPool,
    onchainCollateral,
    noConversion,
    repayOnchain,
  };
}
