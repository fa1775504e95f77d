// Borrow's shared core on the ledger: markets with their accrued borrow index, the wallet's snapshot (collateral and
// debt valued at the feed), the LTV checks, the lock order and the ledger accounts; the noun files build on it.
import type { LendingVenue } from '../../../chain/lending.js';
import type { Db } from '../../../db/knex.js';
import { type AssetRow, findPrice } from '../../../db/repositories/ledger.repository.js';
import * as repo from '../../../db/repositories/market.repository.js';
import type { MarketRow } from '../../../db/repositories/market.repository.js';
import type { OperationRow } from '../../../db/repositories/operation.repository.js';
import * as aave from '../../../lib/defi/aave.js';
import { inputForOutput } from '../../../lib/defi/pricing.js';
import type { Clock } from '../../../lib/clock.js';
import { ApiError } from '../../../lib/errors.js';
import { formatAmount, mulDiv, parseAmount } from '../../../lib/money.js';
import { type Account, type LedgerService, type Posting, USD_DECIMALS } from '../../ledger/ledger.js';
import type { OperationService, OwnerRef, WriteResponse } from '../../ledger/operations.js';
import type { PolicyService } from '../../ledger/policy.js';
import { recordWrite } from '../record.js';
import type { Refusal } from '../../../lib/refusal.js';

/** Swap fee (bps) when repaying from another asset or selling collateral. */
export const BORROW_CONVERSION_FEE_BPS = 30n;

export interface Snapshot {
  markets: Map<string, MarketRow & { index: bigint }>;
  assets: Map<string, AssetRow>;
  prices: Map<string, bigint>;
  collateral: Map<string, bigint>;
  /** Scaled debt and the debt owed now. */
  debts: Map<string, { scaled: bigint; owed: bigint }>;
}

export const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);
export const ratio = (bps: bigint | number) => Number(bps) / 10_000;
export const wadToNumber = (wad: bigint) => Number(wad / 10n ** 10n) / 1e8;

export interface BorrowDeps {
  clock: Clock;
  ledger: LedgerService;
  operations: OperationService;
  policy: PolicyService;
  lending?: LendingVenue | null;
}

export type BorrowCore = ReturnType<typeof createBorrowCore>;

export function createBorrowCore(deps: BorrowDeps) {
  const { clock, ledger, operations } = deps;
  const lending = deps.lending ?? null;

  function accruedIndex(m: MarketRow): bigint {
    const now = clock.now();
    const last = m.last_accrued_at ?? now;
    const seconds = BigInt(Math.max(0, Math.floor((now.getTime() - last.getTime()) / 1000)));
    return aave.accrueIndex(BigInt(m.borrow_index_ray), BigInt(m.borrow_apr_bps), seconds);
  }

  /** The wallet's collateral and debt valued now. Writes pass `strict` (a stale price refuses); reads use the last price. */
  async function snapshot(db: Db, who: OwnerRef, strict: boolean, held?: repo.PricedHoldings): Promise<Snapshot> {
    if (!strict) return readSnapshot(db, who, held);
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

  /**
   * The read's snapshot in one statement: collateral, debts, their last prices and markets. Its `markets` holds only
   * the markets of what the wallet holds, all that the reads (summary, totals) look up; answers and price_stale as above.
   */
  async function readSnapshot(db: Db, who: OwnerRef, preloaded?: repo.PricedHoldings): Promise<Snapshot> {
    const held = preloaded ?? (await repo.listPricedHoldings(db, who.walletId));
    const assets = await ledger.assets(db);
    const markets: Snapshot['markets'] = new Map();
    for (const h of [...held.collateral, ...held.debts]) if (h.market) markets.set(h.asset_symbol, { ...h.market, index: accruedIndex(h.market) });
    const prices = new Map<string, bigint>();
    const priceOf = (symbol: string, usdE8: string | null) => {
      if (usdE8 === null) throw new ApiError('price_stale', `no price for ${symbol}`, { asset: symbol });
      prices.set(symbol, BigInt(usdE8));
    };
    const collateral = new Map<string, bigint>();
    for (const c of held.collateral) {
      collateral.set(c.asset_symbol, BigInt(c.amount));
      priceOf(c.asset_symbol, c.usd_e8);
    }
    const debts = new Map<string, { scaled: bigint; owed: bigint }>();
    for (const d of held.debts) {
      const m = markets.get(d.asset_symbol)!;
      const scaled = BigInt(d.scaled_amount);
      debts.set(d.asset_symbol, { scaled, owed: aave.debtOf(scaled, m.index) });
      priceOf(d.asset_symbol, d.usd_e8);
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
      out.push({
        symbol,
        amount,
        decimals: s.assets.get(symbol)!.decimals,
        priceE8: s.prices.get(symbol)!,
        ltvBps: usable ? BigInt(m.ltv_bps) : 0n,
        liquidationThresholdBps: usable ? BigInt(m.liquidation_threshold_bps) : 0n,
      });
    }
    return out;
  }

  function debtInputs(s: Snapshot, owed = new Map([...s.debts].map(([k, v]) => [k, v.owed]))): aave.DebtInput[] {
    const out: aave.DebtInput[] = [];
    for (const [symbol, amount] of owed) if (amount > 0n) out.push({ amount, decimals: s.assets.get(symbol)!.decimals, priceE8: s.prices.get(symbol)! });
    return out;
  }

  /** LTV in bps rounded up (what the policy's max_ltv_bps compares against). */
  const ltvBpsOf = (data: aave.AccountData): number =>
    data.totalDebtUsd === 0n ? 0 : data.totalCollateralUsd === 0n ? 10_000 : Number(mulDiv(data.totalDebtUsd, aave.BPS, data.totalCollateralUsd, 'up'));

  function ltvTooHigh(check: aave.PositionCheck, what: string): ApiError {
    return new ApiError('ltv_too_high', `${what} would take the LTV to ${(ltvBpsOf(check.data) / 100).toFixed(2)} %, above the limit of ${(Number(check.limitBps) / 100).toFixed(2)} %`, {
      ltv_after: ratio(ltvBpsOf(check.data)),
      limit: ratio(check.limitBps),
      max_ltv: ratio(check.data.avgLtvBps),
    });
  }

  /** A ratio of the request in bps (the document's Ratio bounds it to [0, 1)). */
  const ratioBps = (value: number | undefined): bigint | null => (value === undefined || value === null ? null : aave.ratioToBps(value));

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
    await deps.policy.lock(trx, who.agentId);
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
      ? [
          { account: walletAccount(who), asset: asset.symbol, amount: -amount },
          { account: to, asset: asset.symbol, amount },
        ]
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

  /** Records an immediate write on the ledger market `m` (the policy sees its protocol, and the LTV after when given) and books it. */
  function recordOnMarket(
    trx: Db,
    who: OwnerRef,
    m: MarketRow,
    input: {
      type: string;
      resource: 'debt' | 'collateral';
      asset: string;
      amount: bigint;
      ltvBps?: number;
      details: Record<string, unknown>;
      eventData?: Record<string, unknown>;
      humanMessage: string;
      idempotencyKey: string | null;
    },
    book: (operation: OperationRow) => Promise<void>,
  ): Promise<WriteResponse | Refusal> {
    const { resource, ltvBps, ...rest } = input;
    return recordWrite(
      operations,
      trx,
      { ...rest, principal: who, resource: { type: resource, id: m.id }, policy: { protocol: m.protocol_id, ...(ltvBps !== undefined ? { ltvBps } : {}) }, settlement: 'immediate' },
      book,
    );
  }

  return {
    recordOnMarket,
    clock,
    ledger,
    operations,
    lending,
    accruedIndex,
    snapshot,
    withPrice,
    collateralInputs,
    debtInputs,
    ltvBpsOf,
    ltvTooHigh,
    ratioBps,
    resolveAmount,
    parseUsd,
    market,
    lockAccount,
    walletAccount,
    poolAccount,
    collateralAccount,
    conversionAccount,
    payFromWallet,
    sourceCost,
  };
}
