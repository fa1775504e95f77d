// Borrow: Aave v3-style markets on the ledger. Collateral valued at the price feed (rounded down),
// debt as scaled amounts on a compounding borrow index (rounded up); every borrow and collateral
// removal keeps D / C within min(market LTV, max_ltv_after, policy max_ltv_bps) exactly.
import { zeroAddress } from 'viem';
import type { OnchainLendingDetails } from '../chain/evm.js';
import { accountData, toAssetsUp, toSharesUp, type LendingContracts, type LendingPosition, type LendingVenue } from '../chain/lending.js';
import type { Address } from '../chain/port.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { findHeldByOperation } from '../db/repositories/ledger.repository.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import type { Knex } from '../db/knex.js';
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import { findPrice, type AssetRow } from '../db/repositories/ledger.repository.js';
import * as repo from '../db/repositories/market.repository.js';
import type { MarketRow } from '../db/repositories/market.repository.js';
import { lockPolicy } from '../db/repositories/operation.repository.js';
import * as aave from '../lib/defi/aave.js';
import { convertAtPrice, inputForOutput } from '../lib/defi/pricing.js';
import type { Clock } from '../lib/clock.js';
import { ApiError } from '../lib/errors.js';
import { isRefusal, type Refusal } from '../lib/refusal.js';
import { newId } from '../lib/ids.js';
import { formatAmount, mulDiv, parseAmount } from '../lib/money.js';
import { decodeKey, encodeKey, pageLimit, toPage, type ListPage } from './cursor.js';
import { USD_DECIMALS, type Account, type LedgerService, type Posting } from './ledger.service.js';
import type { OperationService, OwnerRef, WriteResponse } from './operation.service.js';
import type { PolicyService } from './policy.service.js';

/** Swap fee (bps) when repaying from another asset or selling collateral. */
export const BORROW_CONVERSION_FEE_BPS = 30n;

export interface PublicCollateral {
  asset_symbol: string;
  amount: string;
  amount_usd: string;
  price_usd: string;
  max_ltv: number;
  liquidation_threshold: number;
  /** On a real chain: the lending market holding it. */
  market_address?: string;
}

export interface PublicDebt {
  asset_symbol: string;
  amount: string;
  amount_usd: string;
  borrow_apr: number;
}

export interface BorrowSummary {
  collateral_value_usd: string;
  debt_usd: string;
  ltv: number;
  max_ltv: number;
  liquidation_threshold: number;
  health_factor: number | null;
  available_to_borrow_usd: string;
  liquidation_price_usd: string | null;
  debts: PublicDebt[];
  collateral: PublicCollateral[];
  onchain?: OnchainLendingSummary;
}

/** The wallet's Morpho Blue position, the protocol's own figures (strings of base units and WADs). */
export interface OnchainLendingSummary {
  market_address: string;
  market_id: string;
  collateral_asset: string;
  loan_asset: string;
  collateral_units: string;
  borrow_shares: string;
  borrowed_units: string;
  oracle_price: string;
  lltv_wad: string;
  ltv_wad: string;
  health_factor_wad: string | null;
}

type AmountBody = { amount?: string; amount_usd?: string };
export interface BorrowBody extends AmountBody { asset: string; max_ltv_after?: number }
export interface RepayBody extends AmountBody { asset: string; repay_all?: boolean; source_asset?: string; allow_conversion?: boolean }
export interface DeleverageBody { target_ltv: number; max_repay_amount_usd?: string; source_asset?: string; use_available_cash_first?: boolean; allow_conversion?: boolean; allow_partial?: boolean }
export interface AddCollateralBody extends AmountBody { asset: string; source_asset?: string; allow_conversion?: boolean }
export interface RemoveCollateralBody extends AmountBody { asset: string; remove_all?: boolean; max_ltv_after?: number }

export interface AddMarketInput {
  asset: string;
  protocol?: string;
  ltvBps: number;
  liquidationThresholdBps: number;
  borrowAprBps: number;
  collateralEnabled?: boolean;
  borrowEnabled?: boolean;
}

export interface BorrowService {
  summary(db: Db, who: OwnerRef): Promise<BorrowSummary>;
  /** Collateral and debt in USD (8 decimals) at the last known prices, as the summary values them. */
  totalsUsd(db: Db, who: OwnerRef): Promise<{ collateralUsd: bigint; debtUsd: bigint }>;
  listCollateral(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicCollateral>>;
  borrow(db: Db, who: OwnerRef, body: BorrowBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  repay(db: Db, who: OwnerRef, body: RepayBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  deleverage(db: Db, who: OwnerRef, body: DeleverageBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addCollateral(db: Db, who: OwnerRef, body: AddCollateralBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  removeCollateral(db: Db, who: OwnerRef, body: RemoveCollateralBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addMarket(db: Db, input: AddMarketInput): Promise<Record<string, unknown>>;
}

interface Snapshot {
  markets: Map<string, MarketRow & { index: bigint }>;
  assets: Map<string, AssetRow>;
  prices: Map<string, bigint>;
  collateral: Map<string, bigint>;
  /** Scaled debt and the debt owed now. */
  debts: Map<string, { scaled: bigint; owed: bigint }>;
}

const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);
const ratio = (bps: bigint | number) => Number(bps) / 10_000;
const wadToNumber = (wad: bigint) => Number(wad / 10n ** 10n) / 1e8;

export function createBorrowService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService; lending?: LendingVenue | null }): BorrowService {
  const { clock, ledger, operations } = deps;
  const lending = deps.lending ?? null;

  function accruedIndex(m: MarketRow): bigint {
    const now = clock.now();
    const last = m.last_accrued_at ?? now;
    const seconds = BigInt(Math.max(0, Math.floor((now.getTime() - last.getTime()) / 1000)));
    return aave.accrueIndex(BigInt(m.borrow_index_ray), BigInt(m.borrow_apr_bps), seconds);
  }

  /** The wallet's collateral and debt valued now. Writes pass `strict` (a stale price refuses); reads use the last price. */
  async function snapshot(db: Db, who: OwnerRef, strict: boolean): Promise<Snapshot> {
    const markets = new Map((await repo.listMarkets(db)).map((m) => [m.asset_symbol, { ...m, index: accruedIndex(m) }]));
    const assets = await ledger.assets(db);
    const prices = new Map<string, bigint>();
    const priceOf = async (symbol: string) => {
      if (!prices.has(symbol)) {
        if (strict) prices.set(symbol, (await ledger.price(db, symbol)).usdE8);
        else {
          const row = await findPrice(db, symbol);
          if (!row) throw new ApiError('price_stale', `no price for ${symbol}`, { asset: symbol });
          prices.set(symbol, BigInt(row.usd_e8));
        }
      }
    };
    const collateral = new Map<string, bigint>();
    for (const c of await repo.listCollateral(db, who.walletId)) {
      collateral.set(c.asset_symbol, BigInt(c.amount));
      await priceOf(c.asset_symbol);
    }
    const debts = new Map<string, { scaled: bigint; owed: bigint }>();
    for (const d of await repo.listDebts(db, who.walletId)) {
      const m = markets.get(d.asset_symbol)!;
      const scaled = BigInt(d.scaled_amount);
      debts.set(d.asset_symbol, { scaled, owed: aave.debtOf(scaled, m.index) });
      await priceOf(d.asset_symbol);
    }
    return { markets, assets, prices, collateral, debts };
  }

  async function withPrice(db: Db, s: Snapshot, symbol: string): Promise<bigint> {
    if (!s.prices.has(symbol)) s.prices.set(symbol, (await ledger.price(db, symbol)).usdE8);
    return s.prices.get(symbol)!;
  }

  function collateralInputs(s: Snapshot, collateral = s.collateral): (aave.CollateralInput & { symbol: string })[] {
    const out: (aave.CollateralInput & { symbol: string })[] = [];
    for (const [symbol, amount] of collateral) {
      if (amount <= 0n) continue;
      const m = s.markets.get(symbol);
      const usable = m && m.collateral_enabled;
      out.push({ symbol, amount, decimals: s.assets.get(symbol)!.decimals, priceE8: s.prices.get(symbol)!, ltvBps: usable ? BigInt(m.ltv_bps) : 0n, liquidationThresholdBps: usable ? BigInt(m.liquidation_threshold_bps) : 0n });
    }
    return out;
  }

  function debtInputs(s: Snapshot, owed = new Map([...s.debts].map(([k, v]) => [k, v.owed]))): aave.DebtInput[] {
    const out: aave.DebtInput[] = [];
    for (const [symbol, amount] of owed) if (amount > 0n) out.push({ amount, decimals: s.assets.get(symbol)!.decimals, priceE8: s.prices.get(symbol)! });
    return out;
  }

  /** LTV in bps rounded up (what the policy's max_ltv_bps compares against). */
  const ltvBpsOf = (data: aave.AccountData): number => (data.totalDebtUsd === 0n ? 0 : data.totalCollateralUsd === 0n ? 10_000 : Number(mulDiv(data.totalDebtUsd, aave.BPS, data.totalCollateralUsd, 'up')));

  function ltvTooHigh(check: aave.PositionCheck, what: string): ApiError {
    return new ApiError('ltv_too_high', `${what} would take the LTV to ${(ltvBpsOf(check.data) / 100).toFixed(2)} %, above the limit of ${(Number(check.limitBps) / 100).toFixed(2)} %`, {
      ltv_after: ratio(ltvBpsOf(check.data)),
      limit: ratio(check.limitBps),
      max_ltv: ratio(check.data.avgLtvBps),
    });
  }

  function ratioBps(value: number | undefined, field: string): bigint | null {
    if (value === undefined || value === null) return null;
    try {
      return aave.ratioToBps(value);
    } catch {
      throw new ApiError('validation_failed', `${field} must be a ratio in [0, 1)`, { field });
    }
  }

  const resolveAmount = ledger.resolveAmount;

  function parseUsd(value: string, field: string): bigint {
    try {
      return parseAmount(value, USD_DECIMALS);
    } catch {
      throw new ApiError('validation_failed', `${field} must be a decimal string with at most ${USD_DECIMALS} decimals`, { field });
    }
  }

  async function market(db: Db, symbol: string, role: 'collateral' | 'borrow', lock: boolean): Promise<MarketRow & { index: bigint }> {
    const m = lock ? await repo.lockMarket(db, symbol) : await repo.findMarketByAsset(db, symbol);
    if (!m || (role === 'collateral' ? !m.collateral_enabled : !m.borrow_enabled)) {
      throw new ApiError('validation_failed', `${symbol} cannot be ${role === 'collateral' ? 'used as collateral' : 'borrowed'}`, { field: 'asset' });
    }
    const index = accruedIndex(m);
    if (lock) await repo.updateMarketIndex(db, symbol, index, clock.now());
    return { ...m, index };
  }

  /** Locks the agent's policy row, then the wallet: the lock order every DeFi write shares. */
  async function lockAccount(trx: Db, who: OwnerRef): Promise<void> {
    await lockPolicy(trx, who.agentId);
    await repo.lockWallet(trx, who.walletId);
  }

  const walletAccount = (who: OwnerRef) => ({ kind: 'available' as const, walletId: who.walletId });
  const poolAccount = (m: MarketRow) => ({ kind: 'external' as const, name: `borrow:${m.protocol_id}:${m.asset_symbol}` });
  const collateralAccount = (m: MarketRow) => ({ kind: 'external' as const, name: `collateral:${m.protocol_id}` });
  const conversionAccount = { kind: 'external' as const, name: 'conversion' };

  /**
   * The wallet pays `amount` of `asset` into `to`: directly, or by spending `cost` of `source`
   * through the conversion account when the two assets differ (balanced per asset).
   */
  const payFromWallet = (who: OwnerRef, source: AssetRow, cost: bigint, asset: AssetRow, amount: bigint, to: Account): Posting[] =>
    source.symbol === asset.symbol
      ? [{ account: walletAccount(who), asset: asset.symbol, amount: -amount }, { account: to, asset: asset.symbol, amount }]
      : [
          { account: walletAccount(who), asset: source.symbol, amount: -cost },
          { account: conversionAccount, asset: source.symbol, amount: cost },
          { account: conversionAccount, asset: asset.symbol, amount: -amount },
          { account: to, asset: asset.symbol, amount },
        ];

  /** Source-asset units that buy `amount` of `asset` at the feed (for repay / add with allow_conversion). */
  async function sourceCost(db: Db, source: AssetRow, target: AssetRow, amount: bigint): Promise<bigint> {
    const ps = (await ledger.price(db, source.symbol)).usdE8;
    const pt = (await ledger.price(db, target.symbol)).usdE8;
    return inputForOutput(amount, { ...source, priceE8: ps }, { ...target, priceE8: pt }, BORROW_CONVERSION_FEE_BPS);
  }


  // --- on chain (evm mode, the development Morpho Blue market): WETH collateral, USDC debt, the protocol's figures ---
  interface OnchainMarket {
    c: LendingContracts & { router: Address };
    collateral: AssetRow;
    loan: AssetRow;
  }
  /** The market when this server's chain has one (null in the ledger-only mode). */
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
    if (!write && !(await findWalletByAgent(db, who.agentId))?.address) return lending!.position(om.c, zeroAddress);
    return lending!.position(om.c, await ownerAddress(db, who.agentId));
  }
  /** On chain the market takes one collateral and lends one asset: anything else is refused, not booked beside it. */
  function onchainAsset(om: OnchainMarket, symbol: string, role: 'collateral' | 'borrow'): void {
    const want = role === 'collateral' ? om.collateral.symbol : om.loan.symbol;
    if (symbol !== want) {
      throw new ApiError('validation_failed', `on this chain the lending market (${om.c.market.name}) takes ${om.collateral.symbol} as collateral and lends ${om.loan.symbol}${symbol === 'ETH' ? ': ETH collateral is posted as WETH' : ''}`, { field: 'asset', market_address: om.c.morpho });
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

  async function onchainSummary(db: Db, om: OnchainMarket, who: OwnerRef): Promise<BorrowSummary> {
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
      debts: p.borrowShares === 0n ? [] : [{ asset_symbol: om.loan.symbol, amount: formatAmount(p.borrowed, om.loan.decimals), amount_usd: usd(debtUsd), borrow_apr: debtRow ? ratio(debtRow.borrow_apr_bps) : 0 }],
      collateral: p.collateral === 0n ? [] : [{ asset_symbol: om.collateral.symbol, amount: formatAmount(p.collateral, om.collateral.decimals), amount_usd: usd(collateralUsd), price_usd: usd(collPrice), max_ltv: lltv, liquidation_threshold: lltv, market_address: om.c.morpho }],
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
  async function createOnchain(trx: Db, who: OwnerRef, om: OnchainMarket, input: { type: string; resourceType: 'collateral' | 'debt'; resourceId: string; asset: AssetRow; amount: bigint; details: OnchainLendingDetails; holds?: { asset: string; amount: bigint }[]; ltvBps?: number; extra?: Record<string, unknown>; humanMessage: string; idempotencyKey: string | null }): Promise<WriteResponse | Refusal> {
    const created = await operations.create(trx, {
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
    if (isRefusal(created)) return created;
    const { operation } = created;
    return operations.writeResponse(operation);
  }

  const onchainPool = (om: OnchainMarket) => ({ kind: 'external' as const, name: `borrow:morpho:${om.loan.symbol}` });
  const onchainCollateral = { kind: 'external' as const, name: 'collateral:morpho' };
  function noConversion(source: string | undefined, symbol: string): void {
    if (source !== undefined && source !== symbol) throw new ApiError('validation_failed', `on chain the market is paid in ${symbol} itself: convert first`, { field: 'source_asset' });
  }

  /** Repays `assets` (or every borrow share when `all`) from the wallet's loan-asset balance; the hold covers at most `maxAssets`. */
  async function repayOnchain(trx: Db, who: OwnerRef, om: OnchainMarket, p: LendingPosition, requested: bigint | 'all', type: 'debt.repay' | 'debt.deleverage', m: MarketRow, extra: Record<string, unknown>, humanMessage: (units: bigint) => string, idempotencyKey: string | null): Promise<WriteResponse | Refusal> {
    if (p.borrowShares === 0n) throw new ApiError('invalid_state_transition', `there is no ${om.loan.symbol} debt to repay`, { asset: om.loan.symbol });
    const all = requested === 'all' || requested >= p.borrowed;
    const { available } = await ledger.balance(trx, who.walletId, om.loan.symbol);
    // By shares, Morpho takes toAssetsUp(shares) at the accrued totals: a margin for the interest until it is mined; the rest returns.
    const expected = all ? p.borrowed : (requested as bigint);
    let maxAssets = all ? expected + expected / 1000n + 1n : expected;
    if (all && maxAssets > available && available >= expected) maxAssets = available;
    if (available < maxAssets) throw new ApiError('insufficient_funds', `repaying needs ${formatAmount(maxAssets, om.loan.decimals)} ${om.loan.symbol}; the wallet holds ${formatAmount(available, om.loan.decimals)}`, { asset: om.loan.symbol });
    const details = all ? lendingDetails(om, 'repay', 0n, { shares: p.borrowShares, maxAssets }) : lendingDetails(om, 'repay', expected, { maxAssets });
    return createOnchain(trx, who, om, { type, resourceType: 'debt', resourceId: m.id, asset: om.loan, amount: expected, details, holds: [{ asset: om.loan.symbol, amount: maxAssets }], extra: { ...extra, repaid_all: all }, humanMessage: humanMessage(expected), idempotencyKey });
  }

  const service: BorrowService = {
    async summary(db, who) {
      const om = await onchainMarket(db);
      if (om) return onchainSummary(db, om, who);
      const s = await snapshot(db, who, false);
      const cols = collateralInputs(s);
      const data = aave.calculateAccountData(cols, debtInputs(s));
      const collateral: PublicCollateral[] = cols.map((c) => ({
        asset_symbol: c.symbol,
        amount: formatAmount(c.amount, c.decimals),
        amount_usd: usd(aave.valueUsd(c.amount, c.priceE8, c.decimals, 'down')),
        price_usd: usd(c.priceE8),
        max_ltv: ratio(c.ltvBps),
        liquidation_threshold: ratio(c.liquidationThresholdBps),
      }));
      const debts: PublicDebt[] = [...s.debts].map(([symbol, d]) => ({
        asset_symbol: symbol,
        amount: formatAmount(d.owed, s.assets.get(symbol)!.decimals),
        amount_usd: usd(aave.valueUsd(d.owed, s.prices.get(symbol)!, s.assets.get(symbol)!.decimals, 'up')),
        borrow_apr: ratio(s.markets.get(symbol)!.borrow_apr_bps),
      }));
      const liquidationPrice = cols.length === 1 ? aave.liquidationPrice(cols, 0, data.totalDebtUsd) : null;
      return {
        collateral_value_usd: usd(data.totalCollateralUsd),
        debt_usd: usd(data.totalDebtUsd),
        ltv: data.totalDebtUsd === 0n ? 0 : data.totalCollateralUsd === 0n ? 1 : wadToNumber(data.currentLtvWad),
        max_ltv: ratio(data.avgLtvBps),
        liquidation_threshold: ratio(data.avgLiquidationThresholdBps),
        health_factor: data.totalDebtUsd === 0n ? null : wadToNumber(data.healthFactorWad),
        available_to_borrow_usd: usd(data.availableBorrowsUsd),
        liquidation_price_usd: liquidationPrice === null ? null : usd(liquidationPrice),
        debts,
        collateral,
      };
    },

    async totalsUsd(db, who) {
      const om = await onchainMarket(db);
      if (om) {
        const sum = await onchainSummary(db, om, who);
        return { collateralUsd: parseAmount(sum.collateral_value_usd, USD_DECIMALS), debtUsd: parseAmount(sum.debt_usd, USD_DECIMALS) };
      }
      const s = await snapshot(db, who, false);
      const data = aave.calculateAccountData(collateralInputs(s), debtInputs(s));
      return { collateralUsd: data.totalCollateralUsd, debtUsd: data.totalDebtUsd };
    },

    async listCollateral(db, who, query) {
      const limit = pageLimit(query.limit);
      const after = decodeKey(query.cursor);
      const summary = await service.summary(db, who);
      const rows = summary.collateral.filter((c) => after === undefined || c.asset_symbol > after).slice(0, limit + 1);
      return toPage(rows, limit, (r) => r, (r) => encodeKey(r.asset_symbol));
    },

    async borrow(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockAccount(trx, who);
        const asset = await ledger.requireAsset(trx, body.asset);
        const om = await onchainMarket(trx);
        if (om) {
          onchainAsset(om, asset.symbol, 'borrow');
          const m = await market(trx, asset.symbol, 'borrow', false);
          const amount = (await resolveAmount(trx, asset, body)) as bigint;
          const what = `borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`;
          const { ltvBps, ltv } = checkOnchain(afterBorrow(await position(trx, om, who), amount), ratioBps(body.max_ltv_after, 'max_ltv_after'), what);
          return createOnchain(trx, who, om, { type: 'debt.borrow', resourceType: 'debt', resourceId: m.id, asset, amount, details: lendingDetails(om, 'borrow', amount), holds: [], ltvBps, extra: { ltv_after: ltv }, humanMessage: `Borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol} on Morpho Blue (${om.c.market.name})`, idempotencyKey });
        }
        const m = await market(trx, asset.symbol, 'borrow', true);
        const amount = (await resolveAmount(trx, asset, body)) as bigint;
        const maxAfter = ratioBps(body.max_ltv_after, 'max_ltv_after');
        const s = await snapshot(trx, who, true);
        await withPrice(trx, s, asset.symbol);
        const owed = new Map([...s.debts].map(([k, v]) => [k, v.owed]));
        owed.set(asset.symbol, (owed.get(asset.symbol) ?? 0n) + amount);
        const check = aave.checkPosition(collateralInputs(s), debtInputs(s, owed), maxAfter);
        if (!check.ok) throw ltvTooHigh(check, `borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
        const created = await operations.create(trx, {
          principal: who,
          type: 'debt.borrow',
          resource: { type: 'debt', id: m.id },
          asset: asset.symbol,
          amount,
          policy: { protocol: m.protocol_id, ltvBps: ltvBpsOf(check.data) },
          settlement: 'immediate',
          details: { ltv_after: ratio(ltvBpsOf(check.data)), borrow_index_ray: m.index.toString() },
          eventData: { ltv_after: ratio(ltvBpsOf(check.data)) },
          humanMessage: `Borrowing ${formatAmount(amount, asset.decimals)} ${asset.symbol} on ${m.protocol_id}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        await repo.addScaledDebt(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: aave.scaledForBorrow(amount, m.index), at: clock.now() });
        await ledger.post(trx, { operationId: operation.id, entryType: 'debt.borrow', postings: [{ account: poolAccount(m), asset: asset.symbol, amount: -amount }, { account: walletAccount(who), asset: asset.symbol, amount }] });
        return operations.writeResponse(operation);
      });
    },

    async repay(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockAccount(trx, who);
        const asset = await ledger.requireAsset(trx, body.asset);
        const om = await onchainMarket(trx);
        if (om) {
          onchainAsset(om, asset.symbol, 'borrow');
          noConversion(body.source_asset, asset.symbol);
          const m = await market(trx, asset.symbol, 'borrow', false);
          const requested = await resolveAmount(trx, asset, body, { name: 'repay_all', value: body.repay_all });
          return repayOnchain(trx, who, om, await position(trx, om, who), requested, 'debt.repay', m, { source_asset: asset.symbol }, (units) => `Repaying ${formatAmount(units, asset.decimals)} ${asset.symbol} on Morpho Blue`, idempotencyKey);
        }
        const m = await market(trx, asset.symbol, 'borrow', true);
        const source = body.source_asset ? await ledger.requireAsset(trx, body.source_asset, 'source_asset') : asset;
        if (source.symbol !== asset.symbol && body.allow_conversion !== true) throw new ApiError('validation_failed', `repaying ${asset.symbol} with ${source.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        const requested = await resolveAmount(trx, asset, body, { name: 'repay_all', value: body.repay_all });
        const s = await snapshot(trx, who, true);
        const debt = s.debts.get(asset.symbol);
        if (!debt || debt.owed === 0n) throw new ApiError('invalid_state_transition', `there is no ${asset.symbol} debt to repay`, { asset: asset.symbol });
        // Aave caps a repayment at the debt; repaying it all clears the scaled balance exactly.
        const all = requested === 'all' || requested >= debt.owed;
        const amount = all ? debt.owed : (requested as bigint);
        const scaledDelta = all ? debt.scaled : aave.scaledForRepay(amount, m.index);
        const cost = source.symbol === asset.symbol ? amount : await sourceCost(trx, source, asset, amount);
        const created = await operations.create(trx, {
          principal: who,
          type: 'debt.repay',
          resource: { type: 'debt', id: m.id },
          asset: asset.symbol,
          amount,
          policy: { protocol: m.protocol_id },
          settlement: 'immediate',
          details: { source_asset: source.symbol, source_amount: cost.toString(), repaid_all: all },
          eventData: { repaid_all: all },
          humanMessage: `Repaying ${formatAmount(amount, asset.decimals)} ${asset.symbol}${source.symbol !== asset.symbol ? ` with ${formatAmount(cost, source.decimals)} ${source.symbol}` : ''}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        await repo.addScaledDebt(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: -scaledDelta, at: clock.now() });
        await ledger.post(trx, { operationId: operation.id, entryType: 'debt.repay', postings: payFromWallet(who, source, cost, asset, amount, poolAccount(m)) });
        return operations.writeResponse(operation);
      });
    },

    async addCollateral(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockAccount(trx, who);
        const asset = await ledger.requireAsset(trx, body.asset);
        const om = await onchainMarket(trx);
        if (om) {
          onchainAsset(om, asset.symbol, 'collateral');
          noConversion(body.source_asset, asset.symbol);
          const m = await market(trx, asset.symbol, 'collateral', false);
          const amount = (await resolveAmount(trx, asset, body)) as bigint;
          return createOnchain(trx, who, om, { type: 'collateral.add', resourceType: 'collateral', resourceId: m.id, asset, amount, details: lendingDetails(om, 'supply_collateral', amount), extra: { source_asset: asset.symbol }, humanMessage: `Adding ${formatAmount(amount, asset.decimals)} ${asset.symbol} as collateral on Morpho Blue`, idempotencyKey });
        }
        const m = await market(trx, asset.symbol, 'collateral', false);
        const source = body.source_asset ? await ledger.requireAsset(trx, body.source_asset, 'source_asset') : asset;
        if (source.symbol !== asset.symbol && body.allow_conversion !== true) throw new ApiError('validation_failed', `adding ${asset.symbol} from ${source.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        const amount = (await resolveAmount(trx, asset, body)) as bigint;
        const cost = source.symbol === asset.symbol ? amount : await sourceCost(trx, source, asset, amount);
        const created = await operations.create(trx, {
          principal: who,
          type: 'collateral.add',
          resource: { type: 'collateral', id: m.id },
          asset: asset.symbol,
          amount,
          policy: { protocol: m.protocol_id },
          settlement: 'immediate',
          details: { source_asset: source.symbol, source_amount: cost.toString() },
          humanMessage: `Adding ${formatAmount(amount, asset.decimals)} ${asset.symbol} as collateral`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        await repo.addCollateral(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: amount, at: clock.now() });
        await ledger.post(trx, { operationId: operation.id, entryType: 'collateral.add', postings: payFromWallet(who, source, cost, asset, amount, collateralAccount(m)) });
        return operations.writeResponse(operation);
      });
    },

    async removeCollateral(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockAccount(trx, who);
        const asset = await ledger.requireAsset(trx, body.asset);
        const om = await onchainMarket(trx);
        if (om) {
          onchainAsset(om, asset.symbol, 'collateral');
          const m = await market(trx, asset.symbol, 'collateral', false);
          const requested = await resolveAmount(trx, asset, body, { name: 'remove_all', value: body.remove_all });
          const p = await position(trx, om, who);
          const amount = requested === 'all' ? p.collateral : requested;
          if (amount <= 0n || amount > p.collateral) throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is ${formatAmount(p.collateral, asset.decimals)}`, { asset: asset.symbol, collateral: formatAmount(p.collateral, asset.decimals) });
          const { ltvBps, ltv } = checkOnchain({ ...p, collateral: p.collateral - amount }, ratioBps(body.max_ltv_after, 'max_ltv_after'), `removing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
          return createOnchain(trx, who, om, { type: 'collateral.remove', resourceType: 'collateral', resourceId: m.id, asset, amount, details: lendingDetails(om, 'withdraw_collateral', amount), holds: [], ltvBps, extra: { ltv_after: ltv }, humanMessage: `Removing ${formatAmount(amount, asset.decimals)} ${asset.symbol} of collateral from Morpho Blue`, idempotencyKey });
        }
        const m = await market(trx, asset.symbol, 'collateral', false);
        const requested = await resolveAmount(trx, asset, body, { name: 'remove_all', value: body.remove_all });
        const maxAfter = ratioBps(body.max_ltv_after, 'max_ltv_after');
        const s = await snapshot(trx, who, true);
        const held = s.collateral.get(asset.symbol) ?? 0n;
        const amount = requested === 'all' ? held : requested;
        if (amount <= 0n || amount > held) throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is ${formatAmount(held, asset.decimals)}`, { asset: asset.symbol, collateral: formatAmount(held, asset.decimals) });
        const after = new Map(s.collateral);
        after.set(asset.symbol, held - amount);
        const check = aave.checkPosition(collateralInputs(s, after), debtInputs(s), maxAfter);
        if (!check.ok) throw ltvTooHigh(check, `removing ${formatAmount(amount, asset.decimals)} ${asset.symbol}`);
        const created = await operations.create(trx, {
          principal: who,
          type: 'collateral.remove',
          resource: { type: 'collateral', id: m.id },
          asset: asset.symbol,
          amount,
          policy: { protocol: m.protocol_id, ltvBps: ltvBpsOf(check.data) },
          settlement: 'immediate',
          details: { ltv_after: ratio(ltvBpsOf(check.data)) },
          eventData: { ltv_after: ratio(ltvBpsOf(check.data)) },
          humanMessage: `Removing ${formatAmount(amount, asset.decimals)} ${asset.symbol} of collateral`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        if (!(await repo.addCollateral(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: asset.symbol, delta: -amount, at: clock.now() }))) {
          throw new ApiError('insufficient_funds', `the ${asset.symbol} collateral is smaller than ${formatAmount(amount, asset.decimals)}`, { asset: asset.symbol });
        }
        await ledger.post(trx, { operationId: operation.id, entryType: 'collateral.remove', postings: [{ account: collateralAccount(m), asset: asset.symbol, amount: -amount }, { account: walletAccount(who), asset: asset.symbol, amount }] });
        return operations.writeResponse(operation);
      });
    },

    async deleverage(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        await lockAccount(trx, who);
        const target = ratioBps(body.target_ltv, 'target_ltv')!;
        const maxRepayUsd = body.max_repay_amount_usd === undefined ? null : parseUsd(body.max_repay_amount_usd, 'max_repay_amount_usd');
        const om = await onchainMarket(trx);
        if (om) {
          // On chain: repaid from the wallet's loan asset (no collateral sale), to Morpho's own LTV.
          noConversion(body.source_asset, om.loan.symbol);
          const m = await market(trx, om.loan.symbol, 'borrow', false);
          const p = await position(trx, om, who);
          const start = accountData(p);
          if (p.borrowShares === 0n) throw new ApiError('invalid_state_transition', 'there is no debt to deleverage');
          const within = (wad: bigint) => wad * 10_000n <= target * 10n ** 18n;
          if (within(start.ltvWad)) throw new ApiError('invalid_state_transition', 'the LTV is already at or below the target', { ltv: wadRatio(start.ltvWad), target_ltv: ratio(target) });
          // Debt allowed at the target (rounded down), then whole units until Morpho's rounding reaches it.
          const allowed = (start.collateralValue * target) / 10_000n;
          let units = p.borrowed > allowed ? p.borrowed - allowed : 0n;
          const borrowedAfter = (u: bigint) => {
            const shares = u >= p.borrowed ? p.borrowShares : p.borrowShares - ((u * (p.totalBorrowShares + 1_000_000n)) / (p.totalBorrowAssets + 1n));
            return toAssetsUp(shares, p.totalBorrowAssets - u, p.totalBorrowShares - (p.borrowShares - shares));
          };
          for (let step = 0; units < p.borrowed && step < 1000 && !within(accountData({ ...p, borrowed: borrowedAfter(units) }).ltvWad); step += 1) units += 1n;
          // Morpho accrues interest when the repay is mined, after this plan read its stored state: one basis point
          // of the debt more keeps the LTV at or below the target (seen above it by a hair in long test runs).
          units += (p.borrowed + 9_999n) / 10_000n;
          if (units > p.borrowed) units = p.borrowed;
          const { available } = await ledger.balance(trx, who.walletId, om.loan.symbol);
          let cap = available;
          if (maxRepayUsd !== null) {
            const loanPrice = (await ledger.price(trx, om.loan.symbol)).usdE8;
            const byUsd = aave.amountForUsd(maxRepayUsd, loanPrice, om.loan.decimals, 'down');
            if (byUsd < cap) cap = byUsd;
          }
          const repay = units > cap ? cap : units;
          const end = accountData({ ...p, borrowed: borrowedAfter(repay) });
          if (repay === 0n || (!within(end.ltvWad) && body.allow_partial !== true)) {
            throw new ApiError('ltv_target_unreachable', `the LTV cannot reach ${(Number(target) / 100).toFixed(2)} % with the funds and limits given`, { target_ltv: ratio(target), ltv: wadRatio(start.ltvWad), reachable_ltv: wadRatio(end.ltvWad) });
          }
          const extra = { target_ltv: ratio(target), ltv_before: wadRatio(start.ltvWad), ltv_after: wadRatio(end.ltvWad), source_asset: om.loan.symbol, collateral_sold: [] };
          return repayOnchain(trx, who, om, p, repay >= p.borrowed ? 'all' : repay, 'debt.deleverage', m, extra, (u) => `Deleveraging to ${(wadRatio(end.ltvWad) * 100).toFixed(2)} % LTV by repaying ${formatAmount(u, om.loan.decimals)} ${om.loan.symbol} on Morpho Blue`, idempotencyKey);
        }
        const s = await snapshot(trx, who, true);
        const start = aave.calculateAccountData(collateralInputs(s), debtInputs(s));
        if (start.totalDebtUsd === 0n) throw new ApiError('invalid_state_transition', 'there is no debt to deleverage');
        if (aave.isLtvWithin(start.totalCollateralUsd, start.totalDebtUsd, target)) throw new ApiError('invalid_state_transition', 'the LTV is already at or below the target', { ltv: ratio(ltvBpsOf(start)), target_ltv: ratio(target) });

        // The largest debt (by USD) is repaid; cash comes from source_asset (default: the debt asset).
        const [debtSymbol] = [...s.debts].sort((a, b) => (aave.valueUsd(b[1].owed, s.prices.get(b[0])!, s.assets.get(b[0])!.decimals, 'up') > aave.valueUsd(a[1].owed, s.prices.get(a[0])!, s.assets.get(a[0])!.decimals, 'up') ? 1 : -1))[0]!;
        const debtAsset = s.assets.get(debtSymbol)!;
        const m = await market(trx, debtSymbol, 'borrow', true);
        const debtPrice = s.prices.get(debtSymbol)!;
        const source = body.source_asset ? await ledger.requireAsset(trx, body.source_asset, 'source_asset') : debtAsset;
        if (source.symbol !== debtSymbol && body.allow_conversion !== true) throw new ApiError('validation_failed', `repaying ${debtSymbol} with ${source.symbol} needs allow_conversion: true`, { field: 'allow_conversion' });
        const sourcePrice = await withPrice(trx, s, source.symbol);

        let owed = s.debts.get(debtSymbol)!.owed;
        const collateral = new Map(s.collateral);
        let repaid = 0n;
        let cashSpent = 0n;
        const sold: { symbol: string; units: bigint; out: bigint }[] = [];
        const room = () => (maxRepayUsd === null ? null : maxRepayUsd - aave.valueUsd(repaid, debtPrice, debtAsset.decimals, 'up'));
        const stateNow = () => aave.calculateAccountData(collateralInputs(s, collateral), debtInputs(s, new Map([...s.debts].map(([k, v]) => [k, k === debtSymbol ? owed : v.owed]))));
        const reached = () => {
          const d = stateNow();
          return aave.isLtvWithin(d.totalCollateralUsd, d.totalDebtUsd, target);
        };
        /** Debt units worth at most `usdE8` (rounded down), never more than owed. */
        const capUnits = (units: bigint): bigint => {
          let u = units > owed ? owed : units;
          const r = room();
          if (r !== null) {
            const maxUnits = r <= 0n ? 0n : aave.amountForUsd(r, debtPrice, debtAsset.decimals, 'down');
            if (u > maxUnits) u = maxUnits;
          }
          return u;
        };

        const useCash = async () => {
          if (reached()) return;
          const d = stateNow();
          const neededUsd = aave.repayForTarget(d.totalCollateralUsd, d.totalDebtUsd, target);
          let units = capUnits(aave.amountForUsd(neededUsd, debtPrice, debtAsset.decimals, 'up'));
          const { available } = await ledger.balance(trx, who.walletId, source.symbol);
          const pricedSource = { ...source, priceE8: sourcePrice };
          const pricedDebt = { ...debtAsset, priceE8: debtPrice };
          const affordable = source.symbol === debtSymbol ? available : convertAtPrice(available, pricedSource, pricedDebt, BORROW_CONVERSION_FEE_BPS).netOut;
          if (units > affordable) units = affordable;
          const maxUnits = capUnits(affordable);
          // The debt is valued rounded up: step up by whole units until the rounded outcome reaches the target.
          for (let step = 0; units > 0n && units < maxUnits && step < 10_000; step += 1) {
            const t = aave.calculateAccountData(collateralInputs(s, collateral), debtInputs(s, new Map([...s.debts].map(([k, v]) => [k, k === debtSymbol ? owed - units : v.owed]))));
            if (aave.isLtvWithin(t.totalCollateralUsd, t.totalDebtUsd, target)) break;
            units += 1n;
          }
          if (units <= 0n) return;
          cashSpent += source.symbol === debtSymbol ? units : inputForOutput(units, pricedSource, pricedDebt, BORROW_CONVERSION_FEE_BPS);
          owed -= units;
          repaid += units;
        };

        const sellCollateral = async () => {
          if (body.allow_conversion !== true) return;
          const candidates = [...collateral].filter(([, a]) => a > 0n).sort((a, b) => (aave.valueUsd(b[1], s.prices.get(b[0])!, s.assets.get(b[0])!.decimals, 'down') > aave.valueUsd(a[1], s.prices.get(a[0])!, s.assets.get(a[0])!.decimals, 'down') ? 1 : -1));
          for (const [symbol, held] of candidates) {
            if (reached()) return;
            const d = stateNow();
            const collAsset = s.assets.get(symbol)!;
            const collPrice = s.prices.get(symbol)!;
            const sellUsd = aave.collateralToSellForTarget(d.totalCollateralUsd, d.totalDebtUsd, target, BORROW_CONVERSION_FEE_BPS);
            const pricedColl = { ...collAsset, priceE8: collPrice };
            const pricedDebt = { ...debtAsset, priceE8: debtPrice };
            const maxOut = capUnits(convertAtPrice(held, pricedColl, pricedDebt, BORROW_CONVERSION_FEE_BPS).netOut);
            // Solve in whole debt units (the coarser grid): start from the closed form, then step up until
            // the rounded outcome (collateral value down, debt up) reaches the target or the cap binds.
            let out = sellUsd === null ? maxOut : aave.amountForUsd(sellUsd - aave.mulDivUp(sellUsd, BORROW_CONVERSION_FEE_BPS), debtPrice, debtAsset.decimals, 'up');
            if (out > maxOut) out = maxOut;
            let units = 0n;
            for (let step = 0; out > 0n; step += 1) {
              units = inputForOutput(out, pricedColl, pricedDebt, BORROW_CONVERSION_FEE_BPS);
              if (units > held) units = held;
              const trial = new Map(collateral);
              trial.set(symbol, held - units);
              const t = aave.calculateAccountData(collateralInputs(s, trial), debtInputs(s, new Map([...s.debts].map(([k, v]) => [k, k === debtSymbol ? owed - out : v.owed]))));
              if (aave.isLtvWithin(t.totalCollateralUsd, t.totalDebtUsd, target) || out >= maxOut || step >= 10_000) break;
              out += 1n + out / 1_000_000n;
              if (out > maxOut) out = maxOut;
            }
            if (units <= 0n || out <= 0n) continue;
            collateral.set(symbol, held - units);
            sold.push({ symbol, units, out });
            owed -= out;
            repaid += out;
          }
        };

        const cashFirst = body.use_available_cash_first !== false;
        for (const step of cashFirst ? [useCash, sellCollateral] : [sellCollateral, useCash]) await step();

        const end = stateNow();
        const ok = aave.isLtvWithin(end.totalCollateralUsd, end.totalDebtUsd, target);
        if (repaid === 0n || (!ok && body.allow_partial !== true)) {
          throw new ApiError('ltv_target_unreachable', `the LTV cannot reach ${(Number(target) / 100).toFixed(2)} % with the funds and limits given`, {
            target_ltv: ratio(target),
            ltv: ratio(ltvBpsOf(start)),
            reachable_ltv: ratio(ltvBpsOf(end)),
          });
        }
        const created = await operations.create(trx, {
          principal: who,
          type: 'debt.deleverage',
          resource: { type: 'debt', id: m.id },
          asset: debtSymbol,
          amount: repaid,
          policy: { protocol: m.protocol_id, ltvBps: ltvBpsOf(end) },
          settlement: 'immediate',
          details: { target_ltv: ratio(target), ltv_before: ratio(ltvBpsOf(start)), ltv_after: ratio(ltvBpsOf(end)), cash_spent: cashSpent.toString(), source_asset: source.symbol, collateral_sold: sold.map((x) => ({ asset_symbol: x.symbol, amount: x.units.toString() })) },
          eventData: { target_ltv: ratio(target), ltv_after: ratio(ltvBpsOf(end)) },
          humanMessage: `Deleveraging to ${(ltvBpsOf(end) / 100).toFixed(2)} % LTV by repaying ${formatAmount(repaid, debtAsset.decimals)} ${debtSymbol}`,
          idempotencyKey,
        });
        if (isRefusal(created)) return created;
        const { operation } = created;
        const debt = s.debts.get(debtSymbol)!;
        const scaledDelta = owed === 0n ? debt.scaled : aave.scaledForRepay(repaid, m.index);
        await repo.addScaledDebt(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: debtSymbol, delta: -scaledDelta, at: clock.now() });
        const postings: Parameters<LedgerService['post']>[1]['postings'] = [];
        if (cashSpent > 0n) {
          const cashRepaid = repaid - sold.reduce((a, x) => a + x.out, 0n);
          if (source.symbol === debtSymbol) postings.push({ account: walletAccount(who), asset: debtSymbol, amount: -cashSpent }, { account: poolAccount(m), asset: debtSymbol, amount: cashSpent });
          else postings.push({ account: walletAccount(who), asset: source.symbol, amount: -cashSpent }, { account: conversionAccount, asset: source.symbol, amount: cashSpent }, { account: conversionAccount, asset: debtSymbol, amount: -cashRepaid }, { account: poolAccount(m), asset: debtSymbol, amount: cashRepaid });
        }
        for (const x of sold) {
          const collMarket = s.markets.get(x.symbol)!;
          if (!(await repo.addCollateral(trx, { wallet_id: who.walletId, agent_id: who.agentId, asset_symbol: x.symbol, delta: -x.units, at: clock.now() }))) throw new Error('collateral changed under the wallet lock');
          postings.push({ account: collateralAccount(collMarket), asset: x.symbol, amount: -x.units }, { account: conversionAccount, asset: x.symbol, amount: x.units }, { account: conversionAccount, asset: debtSymbol, amount: -x.out }, { account: poolAccount(m), asset: debtSymbol, amount: x.out });
        }
        await ledger.post(trx, { operationId: operation.id, entryType: 'debt.deleverage', postings });
        return operations.writeResponse(operation);
      });
    },

    async addMarket(db, input) {
      const asset = await ledger.requireAsset(db, input.asset);
      if (!(input.ltvBps >= 0 && input.ltvBps < input.liquidationThresholdBps && input.liquidationThresholdBps <= 10_000)) {
        throw new ApiError('validation_failed', 'need 0 <= ltv_bps < liquidation_threshold_bps <= 10000');
      }
      const m = await repo.insertMarket(db, {
        id: newId(),
        protocol_id: input.protocol ?? 'aave-v3',
        asset_symbol: asset.symbol,
        collateral_enabled: input.collateralEnabled ?? true,
        borrow_enabled: input.borrowEnabled ?? true,
        ltv_bps: input.ltvBps,
        liquidation_threshold_bps: input.liquidationThresholdBps,
        borrow_apr_bps: input.borrowAprBps,
        created_at: clock.now(),
      });
      return { market_id: m.id, asset: m.asset_symbol, protocol: m.protocol_id, ltv_bps: m.ltv_bps, liquidation_threshold_bps: m.liquidation_threshold_bps, borrow_apr_bps: m.borrow_apr_bps, collateral_enabled: m.collateral_enabled, borrow_enabled: m.borrow_enabled };
    },
  };
  // --- on-chain settlement: the ledger follows Morpho's own events ---
  interface LendingEvent {
    event: string;
    assets: string;
    shares: string;
  }
  const lendingEvent = (details: Record<string, unknown>, event: string) => {
    const e = ((details.lending_events ?? []) as LendingEvent[]).find((x) => x.event === event);
    if (!e) throw new Error(`no ${event} event of the market in the receipt`);
    return { assets: BigInt(e.assets), shares: BigInt(e.shares) };
  };
  const releaseHolds = async (trx: Knex.Transaction, op: OperationRow) => {
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.release(trx, hold.id);
  };
  async function settledMarket(trx: Knex.Transaction): Promise<OnchainMarket> {
    const om = await onchainMarket(trx);
    if (!om) throw new Error('the lending market is not configured on this chain');
    return om;
  }
  const who = (op: OperationRow) => ({ wallet_id: op.wallet_id, agent_id: op.agent_id, at: clock.now() });
  operations.registerChainSettler('collateral.add', async (trx, op, tracked) => {
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'SupplyCollateral');
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, hold.id, onchainCollateral, 'collateral.add');
    await repo.addCollateral(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: e.assets });
    return { ok: true, details: tracked };
  });
  operations.registerChainSettler('collateral.remove', async (trx, op, tracked) => {
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'WithdrawCollateral');
    await repo.addCollateral(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: -e.assets });
    await ledger.post(trx, { operationId: op.id, entryType: 'collateral.remove', postings: [{ account: onchainCollateral, asset: op.asset_symbol!, amount: -e.assets }, { account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: e.assets }] });
    return { ok: true, details: tracked };
  });
  operations.registerChainSettler('debt.borrow', async (trx, op, tracked) => {
    const om = await settledMarket(trx);
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'Borrow');
    // The debt row holds Morpho borrow shares (reconcile compares them with the chain's).
    await repo.addScaledDebt(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: e.shares });
    await ledger.post(trx, { operationId: op.id, entryType: 'debt.borrow', postings: [{ account: onchainPool(om), asset: op.asset_symbol!, amount: -e.assets }, { account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: e.assets }] });
    return { ok: true, details: { ...tracked, borrow_shares: e.shares.toString() } };
  });
  const settleRepay = (entryType: string) => async (trx: Knex.Transaction, op: OperationRow, tracked: Record<string, unknown>) => {
    const om = await settledMarket(trx);
    await repo.lockWallet(trx, op.wallet_id);
    const e = lendingEvent(tracked, 'Repay');
    await releaseHolds(trx, op);
    await repo.addScaledDebt(trx, { ...who(op), asset_symbol: op.asset_symbol!, delta: -e.shares });
    await ledger.post(trx, { operationId: op.id, entryType, postings: [{ account: walletAccount({ walletId: op.wallet_id } as OwnerRef), asset: op.asset_symbol!, amount: -e.assets }, { account: onchainPool(om), asset: op.asset_symbol!, amount: e.assets }] });
    return { ok: true as const, details: { ...tracked, repaid: e.assets.toString(), repaid_shares: e.shares.toString() } };
  };
  operations.registerChainSettler('debt.repay', settleRepay('debt.repay'));
  operations.registerChainSettler('debt.deleverage', settleRepay('debt.deleverage'));
  return service;
}
