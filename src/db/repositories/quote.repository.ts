// Conversion quotes and their single-use consumption marker (a primary key, not a read-then-write).
import type { Db } from '../knex.js';

export interface QuoteRow {
  id: string;
  agent_id: string;
  wallet_id: string;
  from_asset: string;
  to_asset: string;
  from_amount: string;
  expected_out: string;
  min_amount_out: string;
  slippage_bps: number;
  fee_bps: number;
  fee_amount: string;
  fee_usd_e8: string;
  from_price_e8: string;
  to_price_e8: string;
  price_source: string;
  protocol_id: string;
  pool_address: string;
  from_vault_id: string | null;
  to_vault_id: string | null;
  /** The on-chain route the quote read (Uniswap v2 legs), null at the price feed. */
  route: QuoteRoute | null;
  expires_at: Date;
  created_at: Date;
}

export interface QuoteRoute {
  router: string;
  block: string;
  legs: { pair: string; from_asset: string; to_asset: string; token_in: string; token_out: string; reserve_in: string; reserve_out: string; amount_in: string; amount_out: string }[];
}

type Money = 'from_amount' | 'expected_out' | 'min_amount_out' | 'fee_amount' | 'fee_usd_e8' | 'from_price_e8' | 'to_price_e8';
export type NewQuote = Omit<QuoteRow, Money> & Record<Money, bigint>;

export async function insertQuote(db: Db, q: NewQuote): Promise<QuoteRow> {
  const row: Record<string, unknown> = { ...q, route: q.route === null ? null : JSON.stringify(q.route) };
  for (const k of ['from_amount', 'expected_out', 'min_amount_out', 'fee_amount', 'fee_usd_e8', 'from_price_e8', 'to_price_e8'] as const) row[k] = q[k].toString();
  const [inserted] = await db('conversion_quotes').insert(row).returning('*');
  return inserted as QuoteRow;
}

export async function findQuote(db: Db, agentId: string, id: string): Promise<QuoteRow | undefined> {
  return db('conversion_quotes').where({ agent_id: agentId, id }).first();
}

/**
 * Marks the quote consumed by `operationId`. The primary key on quote_id decides a race: a
 * concurrent consumer waits for the first transaction and then conflicts (nothing returned).
 */
export async function consumeQuote(db: Db, quoteId: string, operationId: string, at: Date): Promise<boolean> {
  const rows = await db('conversion_quote_consumptions').insert({ quote_id: quoteId, operation_id: operationId, consumed_at: at }).onConflict('quote_id').ignore().returning('quote_id');
  return rows.length === 1;
}

/** Undoes this transaction's own consumption (when the execution is refused but its record commits). */
export async function releaseQuote(db: Db, quoteId: string, operationId: string): Promise<void> {
  await db('conversion_quote_consumptions').where({ quote_id: quoteId, operation_id: operationId }).delete();
}
