// The ledger core: balanced journal postings, holds (reserve, capture, release), deposits, and the USD price feed.
// Every function runs in the transaction it is given (or opens one) so callers compose them atomically.
import type { Db } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import * as repo from '../../db/repositories/ledger.repository.js';
import type { AssetRow } from '../../db/repositories/ledger.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError, validationFailed } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { formatAmount, mulDiv, parseAmount } from '../../lib/money.js';
import { coverDeficit, lockDeficit } from './deficits.js';

/** USD values carry 8 decimals (prices, amount_usd, caps), as Aave-style oracles do. */
export const USD_DECIMALS = 8;

/** The money fields of a write body: exactly one is given (contract §1). */
export interface AmountFields {
  amount?: string | null;
  amount_usd?: string | null;
}
/** A price set through the feed is stale after this long (configured constant prices never are). */
export const DEFAULT_PRICE_MAX_AGE_MS = 60 * 60 * 1000;

export type Account =
  | { kind: 'available'; walletId: string }
  | { kind: 'held'; walletId: string }
  /** Outside the simulated wallets: `deposits`, `payments`, `withdrawals`, `conversion`, `fees`, or an area's own. */
  | { kind: 'external'; name: string };

export interface Posting {
  account: Account;
  asset: string;
  /** Signed base units: negative leaves the account, positive enters it. */
  amount: bigint;
}

export const accountName = (a: Account): string => (a.kind === 'external' ? `external:${a.name}` : `wallet:${a.walletId}:${a.kind}`);

export interface Price {
  asset: string;
  usdE8: bigint;
  observedAt: Date | null;
  source: string;
}

/** Prices read once (`LedgerService.priceBook`): the same answers and `price_stale` refusals as reading each one. */
export interface PriceBook {
  price(symbol: string): Price;
  usdValue(asset: AssetRow, units: bigint, rounding?: 'down' | 'up'): bigint;
}

export interface LedgerService {
  /** Every asset, cached after the first read (the table is seeded by migrations). */
  assets(db: Db): Promise<Map<string, AssetRow>>;
  /** The asset or `validation_failed` naming the field. */
  requireAsset(db: Db, symbol: string, field?: string): Promise<AssetRow>;
  /** Parses a wire amount for an asset; `validation_failed` when malformed, zero or too precise. */
  parseAssetAmount(asset: AssetRow, value: string, field?: string): bigint;
  formatAssetAmount(asset: AssetRow, units: bigint): string;

  /** The current price, or `price_stale` when it is older than the bound. */
  price(db: Db, symbol: string): Promise<Price>;
  /** Every price read in one statement, answering as `price` and `usdValue` do: for a read that values several assets. */
  priceBook(db: Db): Promise<PriceBook>;
  /** A PriceBook over price rows already read (joined into another statement). */
  priceBookOf(rows: Iterable<repo.PriceRow>): PriceBook;
  setPrice(db: Db, symbol: string, usd: string, observedAt?: Date | null): Promise<Price>;
  /** USD value (8 decimals) of base units, rounded down (`up` when the value is counted against a cap). */
  usdValue(db: Db, asset: AssetRow, units: bigint, rounding?: 'down' | 'up'): Promise<bigint>;
  /** Base units worth `usdE8`, rounded down. */
  unitsForUsd(db: Db, asset: AssetRow, usdE8: bigint): Promise<bigint>;
  /**
   * Exactly one of `amount` / `amount_usd` (contract §1) as base units of `asset`; with a `*_all` flag
   * set to true neither may be given and the answer is `'all'`. `validation_failed` otherwise.
   */
  resolveAmount(db: Db, asset: AssetRow, body: AmountFields, allFlag?: { name: string; value: boolean | undefined }): Promise<bigint | 'all'>;
  /** Converts base units of one asset to another at the feed, rounded down. */
  convert(db: Db, from: AssetRow, to: AssetRow, units: bigint): Promise<bigint>;

  /** A balanced journal entry (sums to zero per asset) applied to balances; `insufficient_funds` if a wallet would go negative. */
  post(db: Db, input: { operationId: string | null; entryType: string; postings: Posting[] }): Promise<string>;
  /** Funds arriving from outside (agentctl wallet fund, simulated deposits); a deficit of the asset is covered first. */
  deposit(db: Db, input: { walletId: string; asset: string; amount: bigint; operationId?: string | null; source?: string }): Promise<void>;
  /** Moves available to held for an operation; `insufficient_funds` when not enough is available. */
  hold(db: Db, input: { walletId: string; asset: string; amount: bigint; operationId: string | null }): Promise<{ holdId: string }>;
  /** Returns a held amount to available; false when the hold was already resolved. */
  release(db: Db, holdId: string): Promise<boolean>;
  /** Moves a held amount to an account (external or another wallet's available); false when already resolved. */
  capture(db: Db, holdId: string, to: Account, entryType?: string): Promise<boolean>;

  balance(db: Db, walletId: string, asset: string): Promise<{ available: bigint; held: bigint }>;
  isFailingAddress(db: Db, address: string): Promise<boolean>;
  setFailingAddress(db: Db, address: string, failing: boolean): Promise<void>;
  walletByAddress(db: Db, address: string): Promise<{ id: string; agent_id: string } | undefined>;
}

export function createLedgerService(deps: { clock: Clock; priceMaxAgeMs?: number }): LedgerService {
  const { clock } = deps;
  const maxAge = deps.priceMaxAgeMs ?? DEFAULT_PRICE_MAX_AGE_MS;
  let assetCache: Map<string, AssetRow> | null = null;

  function priceOf(symbol: string, row: repo.PriceRow | undefined): Price {
    if (!row) throw new ApiError('price_stale', `no price for ${symbol}`, { asset: symbol });
    if (row.observed_at && clock.now().getTime() - row.observed_at.getTime() > maxAge) {
      throw new ApiError('price_stale', `the ${symbol} price is older than ${Math.round(maxAge / 1000)} seconds`, { asset: symbol, observed_at: row.observed_at.toISOString() });
    }
    return { asset: symbol, usdE8: BigInt(row.usd_e8), observedAt: row.observed_at, source: row.source };
  }

  const walletDelta = (acc: Account) => (acc.kind === 'external' ? null : acc.walletId);

  const service: LedgerService = {
    async assets(db) {
      if (!assetCache) assetCache = new Map((await repo.listAssets(db)).map((a) => [a.symbol, a]));
      return assetCache;
    },

    async requireAsset(db, symbol, field = 'asset') {
      const asset = (await service.assets(db)).get(symbol) ?? (await repo.findAsset(db, symbol));
      if (!asset) throw new ApiError('validation_failed', `unknown asset ${symbol}`, { field });
      return asset;
    },

    async resolveAmount(db, asset, body, allFlag) {
      const hasAmount = body.amount !== undefined && body.amount !== null;
      const hasUsd = body.amount_usd !== undefined && body.amount_usd !== null;
      if (allFlag?.value === true) {
        if (hasAmount || hasUsd) {
          throw validationFailed(`with ${allFlag.name} neither amount nor amount_usd may be given`, [{ location: 'body', path: '/amount', message: `not allowed with ${allFlag.name}` }]);
        }
        return 'all';
      }
      if (hasAmount === hasUsd) {
        throw validationFailed(`give exactly one of amount and amount_usd${allFlag ? ` (or ${allFlag.name}: true)` : ''}`, [
          { location: 'body', path: '/amount', message: 'exactly one of amount and amount_usd is required' },
        ]);
      }
      if (hasAmount) return service.parseAssetAmount(asset, body.amount!, 'amount');
      let usdE8: bigint;
      try {
        usdE8 = parseAmount(body.amount_usd!, USD_DECIMALS);
      } catch {
        throw validationFailed(`amount_usd must be a decimal string with at most ${USD_DECIMALS} decimals`, [{ location: 'body', path: '/amount_usd', message: 'malformed USD amount' }]);
      }
      const units = await service.unitsForUsd(db, asset, usdE8);
      if (units <= 0n) throw validationFailed('amount_usd is worth less than one base unit of the asset', [{ location: 'body', path: '/amount_usd', message: 'too small' }]);
      return units;
    },

    parseAssetAmount(asset, value, field = 'amount') {
      let units: bigint;
      try {
        units = parseAmount(value, asset.decimals);
      } catch {
        throw new ApiError('validation_failed', `${field} must be a positive decimal string with at most ${asset.decimals} decimals for ${asset.symbol}`, { field });
      }
      if (units <= 0n) throw new ApiError('validation_failed', `${field} must be greater than zero`, { field });
      return units;
    },

    formatAssetAmount(asset, units) {
      return formatAmount(units, asset.decimals);
    },

    async price(db, symbol) {
      return priceOf(symbol, await repo.findPrice(db, symbol));
    },

    async priceBook(db) {
      return service.priceBookOf((await repo.listPrices(db)).values());
    },

    priceBookOf(rows) {
      const bySymbol = new Map([...rows].map((r) => [r.asset_symbol, r]));
      const price = (symbol: string) => priceOf(symbol, bySymbol.get(symbol));
      return { price, usdValue: (asset, units, rounding = 'down') => mulDiv(units, price(asset.symbol).usdE8, 10n ** BigInt(asset.decimals), rounding) };
    },

    async setPrice(db, symbol, usd, observedAt) {
      await service.requireAsset(db, symbol);
      let usdE8: bigint;
      try {
        usdE8 = parseAmount(usd, USD_DECIMALS);
      } catch {
        throw new ApiError('validation_failed', `price must be a decimal with at most ${USD_DECIMALS} decimals`);
      }
      if (usdE8 <= 0n) throw new ApiError('validation_failed', 'price must be greater than zero');
      const at = observedAt === undefined ? clock.now() : observedAt;
      await repo.upsertPrice(db, { asset_symbol: symbol, usd_e8: usdE8, observed_at: at, source: 'agentctl' });
      return { asset: symbol, usdE8, observedAt: at, source: 'agentctl' };
    },

    async usdValue(db, asset, units, rounding = 'down') {
      const { usdE8 } = await service.price(db, asset.symbol);
      return mulDiv(units, usdE8, 10n ** BigInt(asset.decimals), rounding);
    },

    async unitsForUsd(db, asset, usdE8) {
      const price = await service.price(db, asset.symbol);
      return mulDiv(usdE8, 10n ** BigInt(asset.decimals), price.usdE8);
    },

    async convert(db, from, to, units) {
      const [pf, pt] = [await service.price(db, from.symbol), await service.price(db, to.symbol)];
      return mulDiv(units * pf.usdE8, 10n ** BigInt(to.decimals), pt.usdE8 * 10n ** BigInt(from.decimals));
    },

    async post(db, input) {
      const sums = new Map<string, bigint>();
      for (const p of input.postings) sums.set(p.asset, (sums.get(p.asset) ?? 0n) + p.amount);
      for (const [asset, sum] of sums) if (sum !== 0n) throw new Error(`unbalanced journal entry: ${asset} sums to ${sum}`);
      return withTransaction(db, async (trx) => {
        const now = clock.now();
        // Net the wallet legs per (wallet, asset) and apply them in key order, so concurrent postings never deadlock.
        const deltas = new Map<string, { walletId: string; asset: string; available: bigint; held: bigint }>();
        for (const p of input.postings) {
          const walletId = walletDelta(p.account);
          if (walletId === null) continue;
          const key = `${walletId}\u0000${p.asset}`;
          const d = deltas.get(key) ?? { walletId, asset: p.asset, available: 0n, held: 0n };
          if (p.account.kind === 'available') d.available += p.amount;
          else d.held += p.amount;
          deltas.set(key, d);
        }
        for (const key of [...deltas.keys()].sort()) {
          const d = deltas.get(key)!;
          if (d.available === 0n && d.held === 0n) continue;
          if (d.available < 0n || d.held < 0n) {
            const ok = await repo.applyGuardedDelta(trx, d.walletId, d.asset, d.available, d.held, now);
            if (!ok) throw new ApiError('insufficient_funds', `insufficient ${d.asset} balance`, { asset: d.asset });
          } else {
            await repo.applyBalanceDelta(trx, d.walletId, d.asset, d.available, d.held, now);
          }
        }
        const journalId = newId();
        await repo.insertJournal(
          trx,
          journalId,
          input.operationId,
          input.postings
            .filter((p) => p.amount !== 0n)
            .map((p) => ({ account: accountName(p.account), wallet_id: walletDelta(p.account), asset_symbol: p.asset, amount: p.amount, entry_type: input.entryType })),
          now,
        );
        return journalId;
      });
    },

    async deposit(db, input) {
      if (input.amount <= 0n) throw new ApiError('validation_failed', 'deposit amount must be positive');
      await withTransaction(db, async (trx) => {
        // The deficit row before the balance (the order of every deficit path, deficits.ts), then paid first.
        const owed = await lockDeficit(trx, input.walletId, input.asset);
        await service.post(trx, {
          operationId: input.operationId ?? null,
          entryType: 'deposit',
          postings: [
            { account: { kind: 'external', name: input.source ?? 'deposits' }, asset: input.asset, amount: -input.amount },
            { account: { kind: 'available', walletId: input.walletId }, asset: input.asset, amount: input.amount },
          ],
        });
        if (owed > 0n) await coverDeficit(trx, service.post, input.walletId, input.asset, clock.now());
      });
    },

    async hold(db, input) {
      if (input.amount <= 0n) throw new Error('hold amount must be positive');
      const holdId = newId();
      const placed = await repo.placeHold(
        db,
        {
          id: holdId,
          journalId: newId(),
          operationId: input.operationId,
          walletId: input.walletId,
          asset: input.asset,
          amount: input.amount,
          availableAccount: accountName({ kind: 'available', walletId: input.walletId }),
          heldAccount: accountName({ kind: 'held', walletId: input.walletId }),
        },
        clock.now(),
      );
      if (!placed) throw new ApiError('insufficient_funds', `insufficient ${input.asset} balance`, { asset: input.asset });
      return { holdId };
    },

    async release(db, holdId) {
      return withTransaction(db, async (trx) => {
        const hold = await repo.resolveHold(trx, holdId, 'released', clock.now());
        if (!hold) return false;
        const amount = BigInt(hold.amount);
        await service.post(trx, {
          operationId: hold.operation_id,
          entryType: 'release',
          postings: [
            { account: { kind: 'held', walletId: hold.wallet_id }, asset: hold.asset_symbol, amount: -amount },
            { account: { kind: 'available', walletId: hold.wallet_id }, asset: hold.asset_symbol, amount },
          ],
        });
        return true;
      });
    },

    async capture(db, holdId, to, entryType = 'capture') {
      return withTransaction(db, async (trx) => {
        const hold = await repo.resolveHold(trx, holdId, 'captured', clock.now());
        if (!hold) return false;
        const amount = BigInt(hold.amount);
        await service.post(trx, {
          operationId: hold.operation_id,
          entryType,
          postings: [
            { account: { kind: 'held', walletId: hold.wallet_id }, asset: hold.asset_symbol, amount: -amount },
            { account: to, asset: hold.asset_symbol, amount },
          ],
        });
        return true;
      });
    },

    async balance(db, walletId, asset) {
      const row = await repo.findBalance(db, walletId, asset);
      return { available: BigInt(row?.available ?? 0), held: BigInt(row?.held ?? 0) };
    },

    isFailingAddress: (db, address) => repo.isFailingAddress(db, address),

    async setFailingAddress(db, address, failing) {
      if (failing) await repo.addFailingAddress(db, address, clock.now());
      else await repo.removeFailingAddress(db, address);
    },

    walletByAddress: (db, address) => repo.findWalletByAddress(db, address),
  };
  return service;
}
