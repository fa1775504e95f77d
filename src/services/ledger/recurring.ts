// Recurring payments to recipients (the owner sets them up; the agent reads them).
import type { Db } from '../../db/knex.js';
import { findRecipient } from '../../db/repositories/recipient.repository.js';
import {
  findRecurringPaymentWithRecipient,
  insertRecurringPayment,
  listRecurringPaymentsWithRecipient,
  type RecurringPaymentWithRecipient,
} from '../../db/repositories/recurring-payment.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { formatAmount } from '../../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import { USD_DECIMALS, type LedgerService, type PriceBook } from './ledger.js';

export interface RecurringService {
  addRecurring(db: Db, agentId: string, input: { recipientId: string; asset: string; amount: string; interval: string }): Promise<{ recurring_payment_id: string }>;
  listRecurring(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'RecurringPayment'>>>;
  getRecurring(db: Db, agentId: string, id: string): Promise<Schema<'RecurringPayment'>>;
}

const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);

export function createRecurringService(deps: { clock: Clock; ledger: LedgerService }): RecurringService {
  const { clock, ledger } = deps;

  /** `book`: the prices, read once for the page. */
  async function publicRecurring(db: Db, r: RecurringPaymentWithRecipient, book: PriceBook): Promise<Schema<'RecurringPayment'>> {
    const asset = await ledger.requireAsset(db, r.asset_symbol);
    let amountUsd: string | null;
    try {
      amountUsd = usd(book.usdValue(asset, BigInt(r.amount)));
    } catch {
      amountUsd = null;
    }
    return {
      id: r.id,
      name: r.recipient_name ?? '',
      recipient_id: r.recipient_id,
      to_address: r.recipient_address ?? '',
      asset_symbol: r.asset_symbol,
      amount: formatAmount(BigInt(r.amount), asset.decimals),
      amount_usd: amountUsd,
      interval: r.interval,
      status: r.status,
      next_run_at: r.next_run_at ? r.next_run_at.toISOString() : null,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    };
  }

  return {
    async addRecurring(db, agentId, input) {
      const recipient = isUuid(input.recipientId) ? await findRecipient(db, agentId, input.recipientId) : undefined;
      if (!recipient) throw new ApiError('not_found', 'recipient not found');
      if (!['day', 'week', 'month'].includes(input.interval)) throw new ApiError('validation_failed', 'interval must be day, week or month');
      const asset = await ledger.requireAsset(db, input.asset);
      const amount = ledger.parseAssetAmount(asset, input.amount);
      const now = clock.now();
      const id = newId();
      await insertRecurringPayment(db, {
        id,
        agent_id: agentId,
        recipient_id: recipient.id,
        asset_symbol: asset.symbol,
        amount,
        interval: input.interval as 'day',
        status: 'active',
        next_run_at: null,
        created_at: now,
        updated_at: now,
      });
      return { recurring_payment_id: id };
    },

    async listRecurring(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await listRecurringPaymentsWithRecipient(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      const book = await ledger.priceBook(db);
      return { ...page, items: await Promise.all(page.items.map((r) => publicRecurring(db, r, book))) };
    },

    async getRecurring(db, agentId, id) {
      const r = isUuid(id) ? await findRecurringPaymentWithRecipient(db, agentId, id) : undefined;
      if (!r) throw new ApiError('not_found', 'recurring payment not found');
      return publicRecurring(db, r, await ledger.priceBook(db));
    },
  };
}
