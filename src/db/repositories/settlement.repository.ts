// Batch settlement (issue 31): the reads and writes that settle many operations in one transaction, one statement
// each for the whole batch (rows passed as one JSON document, jsonb_to_recordset, which both pg and PGlite take).
import { type Db } from '../knex.js';
import type { HoldRow, PriceRow } from './ledger.repository.js';
import type { OperationRow, OperationStatus } from './operation.repository.js';

/** What a batch's settlers read, for every operation and payee address of the batch at once. */
export interface SettlementFacts {
  /** The operations' holds still held, oldest first. */
  holds: HoldRow[];
  /** The agent wallet at each (lower-cased) address that has one. */
  walletsByAddress: Map<string, { id: string; agent_id: string }>;
  /** Addresses the simulated chain refuses (agentctl chain fail-address), lower-cased. */
  failing: Set<string>;
  /** Every price of the feed (the payee's received activity is valued). */
  prices: PriceRow[];
}

/** One statement: the batch's held holds, the prices, and the wallets and failing flags of its payee addresses. */
export async function readSettlementFacts(db: Db, operationIds: string[], addresses: string[]): Promise<SettlementFacts> {
  const result = await db.raw(
    `SELECT 'hold' AS kind, to_jsonb(h) || jsonb_build_object('amount', h.amount::text) AS row
     FROM holds h WHERE h.operation_id = ANY(SELECT jsonb_array_elements_text(?::jsonb)::uuid) AND h.status = 'held'
     UNION ALL
     SELECT 'price', to_jsonb(p) || jsonb_build_object('usd_e8', p.usd_e8::text) FROM prices p
     UNION ALL
     SELECT 'address', jsonb_build_object('address', a.address, 'wallet_id', w.id, 'agent_id', w.agent_id, 'failing', f.address IS NOT NULL)
     FROM (SELECT DISTINCT lower(x) AS address FROM jsonb_array_elements_text(?::jsonb) x) a
     LEFT JOIN wallets w ON lower(w.address) = a.address
     LEFT JOIN chain_failing_addresses f ON f.address = a.address`,
    [JSON.stringify(operationIds), JSON.stringify(addresses)],
  );
  const facts: SettlementFacts = { holds: [], walletsByAddress: new Map(), failing: new Set(), prices: [] };
  for (const { kind, row } of result.rows as { kind: string; row: Record<string, unknown> }[]) {
    if (kind === 'hold') {
      const h = row as unknown as HoldRow & { created_at: string; resolved_at: string | null };
      facts.holds.push({ ...h, created_at: new Date(h.created_at), resolved_at: h.resolved_at ? new Date(h.resolved_at) : null });
      continue;
    }
    if (kind === 'price') {
      const p = row as unknown as PriceRow & { observed_at: string | null };
      facts.prices.push({ ...p, observed_at: p.observed_at ? new Date(p.observed_at) : null });
      continue;
    }
    const a = row as { address: string; wallet_id: string | null; agent_id: string | null; failing: boolean };
    if (a.wallet_id && a.agent_id) facts.walletsByAddress.set(a.address, { id: a.wallet_id, agent_id: a.agent_id });
    if (a.failing) facts.failing.add(a.address);
  }
  facts.holds.sort((x, y) => x.created_at.getTime() - y.created_at.getTime());
  return facts;
}

/** The terminal state one operation of a batch moves to (`details` merged into the row's). */
export interface OperationFinish {
  id: string;
  status: Extract<OperationStatus, 'executed' | 'execution_failed'>;
  /** Set when the operation was still accepted (the simulated chain's hash); kept when it was submitted. */
  tx_hash: string | null;
  error_code: string | null;
  error_message: string | null;
  details: Record<string, unknown> | null;
}

/**
 * Guarded terminal transitions of a batch (only rows still accepted or submitted move), one statement. An accepted
 * operation passes through submission in the same instant (`submitted_at` = `at`). Returns the rows moved.
 */
export async function finishOperations(db: Db, finishes: OperationFinish[], at: Date): Promise<OperationRow[]> {
  if (finishes.length === 0) return [];
  const result = await db.raw(
    `UPDATE operations o SET
       status = v.status,
       submitted_at = COALESCE(o.submitted_at, ?::timestamptz),
       tx_hash = COALESCE(o.tx_hash, v.tx_hash),
       executed_at = CASE WHEN v.status = 'executed' THEN ?::timestamptz ELSE o.executed_at END,
       failed_at = CASE WHEN v.status = 'execution_failed' THEN ?::timestamptz ELSE o.failed_at END,
       error_code = COALESCE(v.error_code, o.error_code),
       error_message = COALESCE(v.error_message, o.error_message),
       details = CASE WHEN v.details IS NULL THEN o.details ELSE o.details || v.details END,
       updated_at = ?::timestamptz
     FROM jsonb_to_recordset(?::jsonb) AS v(id uuid, status text, tx_hash text, error_code text, error_message text, details jsonb)
     WHERE o.id = v.id AND o.status IN ('accepted', 'submitted')
     RETURNING o.*`,
    [at, at, at, at, JSON.stringify(finishes)],
  );
  return result.rows as OperationRow[];
}

/** Guarded moves of held holds to captured or released, one statement; returns how many moved. */
export async function resolveHolds(db: Db, moves: { id: string; to: 'captured' | 'released' }[], at: Date): Promise<number> {
  if (moves.length === 0) return 0;
  const result = await db.raw(
    `UPDATE holds h SET status = v.to, resolved_at = ?::timestamptz
     FROM jsonb_to_recordset(?::jsonb) AS v(id uuid, "to" text)
     WHERE h.id = v.id AND h.status = 'held'`,
    [at, JSON.stringify(moves)],
  );
  return result.rowCount ?? 0;
}

export interface JournalLeg {
  journal_id: string;
  operation_id: string | null;
  account: string;
  wallet_id: string | null;
  asset_symbol: string;
  /** Signed base units, as a decimal string. */
  amount: string;
  entry_type: string;
}

/** Journal legs of many entries, in the given order, one statement. */
export async function insertJournalLegs(db: Db, legs: JournalLeg[], at: Date): Promise<void> {
  if (legs.length === 0) return;
  await db.raw(
    `INSERT INTO journal_entries (journal_id, operation_id, account, wallet_id, asset_symbol, amount, entry_type, created_at)
     SELECT l.journal_id, l.operation_id, l.account, l.wallet_id, l.asset_symbol, l.amount, l.entry_type, ?::timestamptz
     FROM jsonb_to_recordset(?::jsonb) AS l(journal_id uuid, operation_id uuid, account text, wallet_id text, asset_symbol text, amount numeric, entry_type text, n int)
     ORDER BY l.n`,
    [at, JSON.stringify(legs.map((l, n) => ({ ...l, n })))],
  );
}

export interface NewActivityRow {
  id: string;
  agent_id: string;
  wallet_id: string;
  type: string;
  status: string;
  operation_id: string | null;
  direction: string;
  asset_symbol: string | null;
  amount: string | null;
  amount_usd_e8: string | null;
  counterparty: string | null;
  description: string;
  created_at: Date;
}

/** Activity rows, one statement. */
export async function insertActivities(db: Db, rows: NewActivityRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.raw(
    `INSERT INTO activity (id, agent_id, wallet_id, type, status, operation_id, direction, asset_symbol, amount, amount_usd_e8, counterparty, description, created_at)
     SELECT a.id, a.agent_id, a.wallet_id, a.type, a.status, a.operation_id, a.direction, a.asset_symbol, a.amount, a.amount_usd_e8, a.counterparty, a.description, a.created_at
     FROM jsonb_to_recordset(?::jsonb) AS a(id uuid, agent_id uuid, wallet_id text, type text, status text, operation_id uuid, direction text, asset_symbol text,
       amount numeric, amount_usd_e8 numeric, counterparty text, description text, created_at timestamptz, n int)
     ORDER BY a.n`,
    [JSON.stringify(rows.map((r, n) => ({ ...r, n })))],
  );
}

/** One balance row's net change in a batch. */
export interface BalanceDelta {
  wallet_id: string;
  asset_symbol: string;
  available: string;
  held: string;
}

/**
 * A batch's net balance changes, rows taken in the order given: the caller sorts them by (wallet, asset) as every
 * posting does (ledger.ts post), so two batches, or a batch and a write, lock shared rows in the same order and cannot
 * deadlock. First the rows a credit needs and that do not exist yet (a payee's first one) are created, in that order;
 * then one statement locks the rows in that order (FOR UPDATE under ORDER BY locks as it emits, after the sort) and
 * applies the deltas. The CHECK constraints refuse a negative result, which fails the whole batch. An INSERT ... ON
 * CONFLICT DO UPDATE cannot carry a negative delta: Postgres checks the proposed row's constraints before the conflict.
 */
export async function applyBalanceDeltas(db: Db, deltas: BalanceDelta[], at: Date): Promise<void> {
  if (deltas.length === 0) return;
  const json = JSON.stringify(deltas.map((d, n) => ({ ...d, n })));
  const recordset = `jsonb_to_recordset(?::jsonb) AS d(wallet_id text, asset_symbol text, available numeric, held numeric, n int)`;
  if (deltas.some((d) => !d.available.startsWith('-') && !d.held.startsWith('-'))) {
    await db.raw(
      `INSERT INTO balances (wallet_id, asset_symbol, available, held, updated_at)
       SELECT d.wallet_id, d.asset_symbol, 0, 0, ?::timestamptz FROM ${recordset}
       WHERE d.available >= 0 AND d.held >= 0 ORDER BY d.n
       ON CONFLICT (wallet_id, asset_symbol) DO NOTHING`,
      [at, json],
    );
  }
  const result = await db.raw(
    `WITH locked AS MATERIALIZED (
       SELECT b.wallet_id, b.asset_symbol, d.available, d.held FROM balances b JOIN ${recordset} ON b.wallet_id = d.wallet_id AND b.asset_symbol = d.asset_symbol
       ORDER BY d.n FOR UPDATE OF b
     )
     UPDATE balances b SET available = b.available + l.available, held = b.held + l.held, updated_at = ?::timestamptz
     FROM locked l WHERE b.wallet_id = l.wallet_id AND b.asset_symbol = l.asset_symbol`,
    [json, at],
  );
  if ((result.rowCount ?? 0) !== deltas.length) throw new Error(`balance rows missing: ${deltas.length - (result.rowCount ?? 0)} of ${deltas.length} (a debit without its balance row)`);
}
