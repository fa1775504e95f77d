// Reads of the wallet: account summary, assets, protocols, balances, activity, deposit methods and address; funding.
import { createHash } from 'node:crypto';
import type { Db } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import * as ledgerRepo from '../../db/repositories/ledger.repository.js';
import { listActivity } from '../../db/repositories/activity.repository.js';
import { listWithdrawalMethods } from '../../db/repositories/withdrawal-method.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount, mulDiv, pow10 } from '../../lib/money.js';
import { decodeKey, decodeKeyset, encodeKey, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import { USD_DECIMALS, type LedgerService } from '../ledger/ledger.js';
import type { OperationService, OwnerRef } from '../ledger/operations.js';
import type { Schema } from '../../lib/contract.js';

const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);

/** USD values (8 decimals) a wallet holds outside its balances: earn positions, collateral, and what it owes. */
export interface Holdings {
  earnUsd: bigint;
  collateralUsd: bigint;
  debtUsd: bigint;
}
/** Values one kind of holding; the DeFi area registers its earn and borrow valuers here. */
export type HoldingsValuer = (db: Db, who: OwnerRef) => Promise<Partial<Holdings>>;

export interface AccountService {
  /** Adds a valuer whose amounts join the account summary (earn, collateral, debt). */
  registerHoldings(valuer: HoldingsValuer): void;
  getAccount(db: Db, who: OwnerRef): Promise<Schema<'AccountSummary'>>;
  listAssets(db: Db, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'Asset'>>>;
  listProtocols(db: Db, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'Protocol'>>>;
  listBalances(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown; cashOnly?: boolean }): Promise<ListPage<Schema<'Balance'>>>;
  listActivity(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown; type?: string; since?: string }): Promise<ListPage<Schema<'Activity'>>>;
  listDepositMethods(db: Db, who: OwnerRef & { ownerId: string }, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'DepositMethod'>>>;
  getDepositAddress(db: Db, who: OwnerRef, query: { asset?: string; chain?: string }): Promise<Schema<'DepositAddress'>>;
  /** agentctl wallet fund: a deposit with its journal entries and activity. */
  fund(db: Db, agentId: string, input: { asset: string; amount: string }): Promise<Record<string, unknown>>;
}

/**
 * A list's `since` as a Date. The document checks the date-time format; a value it accepts that Date cannot read
 * (a leap second, 23:59:60) is refused here. (operation.service.ts parses its own `since` the same way.)
 */
export function parseSince(since: string | undefined): Date | undefined {
  if (!since) return undefined;
  const at = new Date(since);
  if (Number.isNaN(at.getTime())) throw new ApiError('validation_failed', 'since must be an ISO 8601 timestamp', { field: 'since' });
  return at;
}

/** A stable UUID derived from a name (the wallet's crypto deposit method has no row of its own). */
export function derivedUuid(name: string): string {
  const h = createHash('sha256').update(name).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
}

/** The contracts of a protocol on the configured chain, by protocol id (null when nothing is deployed). */
export type ProtocolContracts = (db: Db) => Promise<Map<string, { role: 'factory' | 'router' | 'pool' | 'vault' | 'market' | 'rewards_distributor'; name?: string; address: string }[]>>;

export function createAccountService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; protocolContracts?: ProtocolContracts }): AccountService {
  const { clock, ledger, operations } = deps;

  async function requireWallet(db: Db, agentId: string) {
    const wallet = await findWalletByAgent(db, agentId);
    if (!wallet) throw new ApiError('not_found', 'wallet not found');
    return wallet;
  }

  const valuers: HoldingsValuer[] = [];

  const service: AccountService = {
    registerHoldings(valuer) {
      valuers.push(valuer);
    },

    async getAccount(db, who) {
      const wallet = await ledgerRepo.findWalletWithPricedBalances(db, who.agentId);
      if (!wallet) throw new ApiError('not_found', 'wallet not found');
      let cash = 0n;
      let crypto = 0n;
      for (const b of wallet.balances) {
        if (b.usd_e8 === null) continue;
        const price = BigInt(b.usd_e8);
        const value = mulDiv(BigInt(b.available) + BigInt(b.held), price, 10n ** BigInt(b.decimals));
        if (b.category === 'cash') cash += value;
        else crypto += value;
      }
      const total = cash + crypto;
      const held: Holdings = { earnUsd: 0n, collateralUsd: 0n, debtUsd: 0n };
      for (const valuer of valuers) {
        const part = await valuer(db, who);
        held.earnUsd += part.earnUsd ?? 0n;
        held.collateralUsd += part.collateralUsd ?? 0n;
        held.debtUsd += part.debtUsd ?? 0n;
      }
      // Net worth: the wallet's balances plus what it holds elsewhere, minus what it owes.
      const netWorth = total + held.earnUsd + held.collateralUsd - held.debtUsd;
      return {
        wallet_id: wallet.id,
        address: wallet.address,
        chain: 'base',
        total_value_usd: usd(total),
        cash_value_usd: usd(cash),
        crypto_value_usd: usd(crypto),
        earn_value_usd: usd(held.earnUsd),
        collateral_value_usd: usd(held.collateralUsd),
        debt_usd: usd(held.debtUsd),
        net_worth_usd: usd(netWorth),
        as_of: clock.now().toISOString(),
      };
    },

    async listAssets(db, query) {
      const limit = pageLimit(query.limit);
      const rows = await ledgerRepo.listAssets(db, { after: decodeKey(query.cursor), limit: limit + 1 });
      const page = toPage(
        rows,
        limit,
        (a) => a,
        (a) => encodeKey(a.symbol),
      );
      const prices = await ledgerRepo.listPrices(db);
      const items = [];
      for (const a of page.items) {
        const row = prices.get(a.symbol);
        const price = row ? BigInt(row.usd_e8) : null;
        items.push({ symbol: a.symbol, name: a.name, decimals: a.decimals, chain: a.chain, contract_address: a.contract_address, category: a.category, price_usd: price === null ? null : usd(price) });
      }
      return { ...page, items };
    },

    async listProtocols(db, query) {
      const limit = pageLimit(query.limit);
      const rows = await ledgerRepo.listProtocols(db, { after: decodeKey(query.cursor), limit: limit + 1 });
      const contracts = deps.protocolContracts ? await deps.protocolContracts(db) : new Map();
      return toPage(
        rows,
        limit,
        (p) => ({ id: p.id, name: p.name, kinds: p.kinds, chain: p.chain, asset_symbols: p.asset_symbols, ...(contracts.has(p.id) ? { contracts: contracts.get(p.id) } : {}) }),
        (p) => encodeKey(p.id),
      );
    },

    async listBalances(db, who, query) {
      const limit = pageLimit(query.limit);
      const after = decodeKey(query.cursor);
      // Every asset appears (zero when never held), so an agent sees what it could hold.
      // One statement: the wallet's rows and every price (assets without a row still need theirs).
      const [held, prices, deficits] = await ledgerRepo.listBalancesWithPrices(db, who.walletId);
      const assets = [...(await ledger.assets(db)).values()]
        .filter((a) => (!query.cashOnly || a.category === 'cash') && (after === undefined || a.symbol > after))
        .sort((a, b) => (a.symbol < b.symbol ? -1 : 1));
      const rows = assets.slice(0, limit + 1);
      const page = toPage(
        rows,
        limit,
        (a) => a,
        (a) => encodeKey(a.symbol),
      );
      const items = [];
      for (const a of page.items) {
        const b = held.get(a.symbol);
        const available = BigInt(b?.available ?? 0);
        const heldUnits = BigInt(b?.held ?? 0);
        const priceRow = prices.get(a.symbol);
        const price = priceRow === undefined ? null : BigInt(priceRow);
        const availableText = formatAmount(available, a.decimals);
        const total = heldUnits === 0n ? availableText : formatAmount(available + heldUnits, a.decimals);
        const valueUsd = price === null ? null : usd(mulDiv(available + heldUnits, price, pow10(a.decimals)));
        items.push({
          asset_symbol: a.symbol,
          // Hightop's names (issue 26, item 6): the balance and its USD value, and the asset's display name.
          asset_display_name: a.name,
          category: a.category,
          amount: total,
          amount_usd: valueUsd,
          available: availableText,
          held: formatAmount(heldUnits, a.decimals),
          total,
          value_usd: valueUsd,
          // Owed after a reversed deposit (issue 30): the wallet's money writes are refused until it is covered.
          ...(deficits.has(a.symbol) ? { deficit: formatAmount(BigInt(deficits.get(a.symbol)!), a.decimals) } : {}),
        });
      }
      return { ...page, items };
    },

    async listActivity(db, who, query) {
      const limit = pageLimit(query.limit);
      const since = parseSince(query.since);
      const assets = await ledger.assets(db);
      const rows = await listActivity(db, { agentId: who.agentId, type: query.type, since, before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(
        rows,
        limit,
        (r) => {
          const decimals = r.asset_symbol ? assets.get(r.asset_symbol)?.decimals : undefined;
          return {
            id: r.id,
            type: r.type,
            operation_id: r.operation_id,
            asset_symbol: r.asset_symbol,
            amount: r.amount !== null && decimals !== undefined ? formatAmount(BigInt(r.amount), decimals) : null,
            amount_usd: r.amount_usd_e8 !== null ? usd(BigInt(r.amount_usd_e8)) : null,
            direction: r.direction,
            description: r.description,
            created_at: r.created_at.toISOString(),
          };
        },
        encodeKeyset,
      );
    },

    async listDepositMethods(db, who, query) {
      const limit = pageLimit(query.limit);
      const wallet = await requireWallet(db, who.agentId);
      const assets = [...(await ledger.assets(db)).values()];
      const cryptoMethod = {
        id: derivedUuid(`deposit:crypto:base:${wallet.id}`),
        kind: 'crypto_transfer' as const,
        label: 'Base transfer to the wallet address',
        asset_symbols: assets.map((a) => a.symbol).sort(),
        chain: 'base' as const,
        instructions: wallet.address ? `Send any supported asset on Base to ${wallet.address}` : null,
        status: wallet.address ? ('active' as const) : ('disabled' as const),
        created_at: wallet.created_at,
      };
      const banks = await listWithdrawalMethods(db, who.ownerId, { limit: 1000 });
      const cash = assets
        .filter((a) => a.category === 'cash')
        .map((a) => a.symbol)
        .sort();
      const all = [
        cryptoMethod,
        ...banks.map((m) => ({
          id: m.id,
          kind: 'bank_transfer' as const,
          label: m.label,
          asset_symbols: cash,
          chain: null,
          instructions: `Bank transfer from account …${m.account_last4} (${m.currency}), reference ${wallet.id}`,
          status: m.status,
          created_at: m.created_at,
        })),
      ];
      const after = decodeKeyset(query.cursor);
      const ordered = all.sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : -1));
      const start = after ? ordered.findIndex((m) => m.created_at.getTime() < after.createdAt.getTime() || (m.created_at.getTime() === after.createdAt.getTime() && m.id < after.id)) : 0;
      const rows = start < 0 ? [] : ordered.slice(start, start + limit + 1);
      return toPage(
        rows,
        limit,
        ({ created_at: _, ...m }) => m,
        (m) => encodeKeyset(m),
      );
    },

    async getDepositAddress(db, who, query) {
      if (query.chain !== undefined && query.chain !== 'base') throw new ApiError('validation_failed', 'chain must be base', { field: 'chain' });
      if (query.asset) await ledger.requireAsset(db, query.asset);
      const wallet = await requireWallet(db, who.agentId);
      if (!wallet.address) throw new ApiError('not_found', 'the wallet has no address yet');
      return { address: wallet.address, chain: 'base', asset_symbol: query.asset ?? null };
    },

    async fund(db, agentId, input) {
      return withTransaction(db, async (trx) => {
        const wallet = await requireWallet(trx, agentId);
        const asset = await ledger.requireAsset(trx, input.asset);
        const amount = ledger.parseAssetAmount(asset, input.amount);
        await ledger.deposit(trx, { walletId: wallet.id, asset: asset.symbol, amount });
        const usdE8 = await ledger.usdValue(trx, asset, amount).catch(() => null);
        await operations.recordActivity(trx, {
          principal: { agentId, walletId: wallet.id },
          type: 'deposit',
          status: 'executed',
          operationId: null,
          direction: 'in',
          asset: asset.symbol,
          amount,
          amountUsdE8: usdE8,
          counterparty: null,
          description: `Deposit of ${formatAmount(amount, asset.decimals)} ${asset.symbol}`,
        });
        const balance = await ledger.balance(trx, wallet.id, asset.symbol);
        return { agent_id: agentId, wallet_id: wallet.id, asset: asset.symbol, amount: formatAmount(amount, asset.decimals), available: formatAmount(balance.available, asset.decimals) };
      });
    },
  };
  return service;
}
