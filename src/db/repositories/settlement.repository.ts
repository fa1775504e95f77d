// Batch settlement (issue 31): the reads and writes that settle many operations in one transaction: one statement
// reads, one writes every row but the balances, one locks and moves the balances (rows passed as JSON documents,
// jsonb_to_recordset, which both pg and PGlite take).
import { countOperationEntries, type Db, type OperationEntry } from '../knex.js';
import type { HoldRow, PriceRow } from './ledger.repository.js';
import { eventsStatement, type NewEvent } from './event.repository.js';
import type { OperationStatus } from './operation.repository.js';

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

/** Everything a batch writes but its balances, for writeSettledBatch. */
export interface SettledBatch {
  finishes: OperationFinish[];
  holdMoves: { id: string; to: 'captured' | 'released' }[];
  legs: JournalLeg[];
  activity: NewActivityRow[];
  events: NewEvent[];
  /** (wallet, asset) rows a credit of the batch needs, sorted as the balance deltas are: created when missing. */
  creditedRows: { wallet_id: string; asset_symbol: string }[];
}

const numbered = <T extends object>(rows: T[]) => JSON.stringify(rows.map((r, n) => ({ ...r, n })));

/**
 * A batch's writes in one statement (data-modifying CTEs, one per table): the guarded terminal transitions (only rows
 * still accepted or submitted move; an accepted operation passes through submission in the same instant), the
 * holds' guarded moves out of `held`, the journal legs, the activity rows, the events with their webhook fan-out,
 * and the balance rows a credit needs that do not exist yet. Returns how many operations and holds moved (the caller
 * compares them with what it asked, and fails the batch otherwise). The balances themselves: applyBalanceDeltas.
 */
export async function writeSettledBatch(db: Db, batch: SettledBatch, at: Date): Promise<{ finished: number; holds: number }> {
  const events = eventsStatement(batch.events);
  const result = await db.raw(
    `WITH fin AS (
       UPDATE operations o SET
         status = v.status,
         submitted_at = COALESCE(o.submitted_at, CAST(? AS timestamptz)),
         tx_hash = COALESCE(o.tx_hash, v.tx_hash),
         executed_at = CASE WHEN v.status = 'executed' THEN CAST(? AS timestamptz) ELSE o.executed_at END,
         failed_at = CASE WHEN v.status = 'execution_failed' THEN CAST(? AS timestamptz) ELSE o.failed_at END,
         error_code = COALESCE(v.error_code, o.error_code),
         error_message = COALESCE(v.error_message, o.error_message),
         details = CASE WHEN v.details IS NULL THEN o.details ELSE o.details || v.details END,
         updated_at = CAST(? AS timestamptz)
       FROM jsonb_to_recordset(CAST(? AS jsonb)) AS v(id uuid, status text, tx_hash text, error_code text, error_message text, details jsonb)
       WHERE o.id = v.id AND o.status IN ('accepted', 'submitted')
       RETURNING o.type, o.status
     ), held AS (
       UPDATE holds h SET status = v.to, resolved_at = CAST(? AS timestamptz)
       FROM jsonb_to_recordset(CAST(? AS jsonb)) AS v(id uuid, "to" text)
       WHERE h.id = v.id AND h.status = 'held'
       RETURNING 1
     ), journal AS (
       INSERT INTO journal_entries (journal_id, operation_id, account, wallet_id, asset_symbol, amount, entry_type, created_at)
       SELECT l.journal_id, l.operation_id, l.account, l.wallet_id, l.asset_symbol, l.amount, l.entry_type, CAST(? AS timestamptz)
       FROM jsonb_to_recordset(CAST(? AS jsonb)) AS l(journal_id uuid, operation_id uuid, account text, wallet_id text, asset_symbol text, amount numeric, entry_type text, n int)
       ORDER BY l.n
     ), act AS (
       INSERT INTO activity (id, agent_id, wallet_id, type, status, operation_id, direction, asset_symbol, amount, amount_usd_e8, counterparty, description, created_at)
       SELECT a.id, a.agent_id, a.wallet_id, a.type, a.status, a.operation_id, a.direction, a.asset_symbol, a.amount, a.amount_usd_e8, a.counterparty, a.description, a.created_at
       FROM jsonb_to_recordset(CAST(? AS jsonb)) AS a(id uuid, agent_id uuid, wallet_id text, type text, status text, operation_id uuid, direction text, asset_symbol text,
         amount numeric, amount_usd_e8 numeric, counterparty text, description text, created_at timestamptz, n int)
       ORDER BY a.n
     ), ${events.ctes}, credited AS (
       INSERT INTO balances (wallet_id, asset_symbol, available, held, updated_at)
       SELECT c.wallet_id, c.asset_symbol, 0, 0, CAST(? AS timestamptz) FROM jsonb_to_recordset(CAST(? AS jsonb)) AS c(wallet_id text, asset_symbol text, n int)
       ORDER BY c.n
       ON CONFLICT (wallet_id, asset_symbol) DO NOTHING
     )
     SELECT (SELECT count(*)::int FROM fin) AS finished, (SELECT json_agg(json_build_object('type', type, 'status', status)) FROM fin) AS entered, (SELECT count(*)::int FROM held) AS holds, ${events.notify} AS notified`,
    [at, at, at, at, JSON.stringify(batch.finishes), at, JSON.stringify(batch.holdMoves), at, numbered(batch.legs), numbered(batch.activity), ...events.bindings, at, numbered(batch.creditedRows)],
  );
  const row = result.rows[0] as { finished: number; holds: number; entered: OperationEntry[] | null };
  countOperationEntries(db, row.entered ?? []);
  return { finished: row.finished, holds: row.holds };
}

/** One balance row's net change in a batch. */
export interface BalanceDelta {
  wallet_id: string;
  asset_symbol: string;
  available: string;
  held: string;
}

/**
 * A batch's net balance changes in one statement, rows locked in the order given: the caller sorts them by (wallet,
 * asset) as every posting does (ledger.ts post), so two batches, or a batch and a write, take shared rows in the same
 * order and cannot deadlock (FOR UPDATE under ORDER BY locks as it emits, after the sort). The rows exist (a debit's
 * row has its hold; a credit's was created by writeSettledBatch). The CHECK constraints refuse a negative result,
 * which fails the whole batch. (An INSERT ... ON CONFLICT DO UPDATE cannot carry a debit: Postgres checks the proposed
 * row's constraints before it finds the conflict.)
 */
export async function applyBalanceDeltas(db: Db, deltas: BalanceDelta[], at: Date): Promise<void> {
  if (deltas.length === 0) return;
  const result = await db.raw(
    `WITH locked AS MATERIALIZED (
       SELECT b.wallet_id, b.asset_symbol, d.available, d.held
       FROM balances b JOIN jsonb_to_recordset(?::jsonb) AS d(wallet_id text, asset_symbol text, available numeric, held numeric, n int)
         ON b.wallet_id = d.wallet_id AND b.asset_symbol = d.asset_symbol
       ORDER BY d.n FOR UPDATE OF b
     )
     UPDATE balances b SET available = b.available + l.available, held = b.held + l.held, updated_at = ?::timestamptz
     FROM locked l WHERE b.wallet_id = l.wallet_id AND b.asset_symbol = l.asset_symbol`,
    [numbered(deltas), at],
  );
  if ((result.rowCount ?? 0) !== deltas.length) throw new Error(`balance rows missing: ${deltas.length - (result.rowCount ?? 0)} of ${deltas.length}`);
}
