// Accepting a payment (or any operation settled later with one hold): the hold and the operation row in ONE statement.
import { countOperationEntries, rows, type Db } from '../../knex.js';
import { identifier, list, prepared, sql } from '../../sql.js';
import { holdCtes, type HoldInput } from '../ledger.repository.js';
import type { NewOperationRow, OperationRow } from '../operation.repository.js';

/**
 * The balance guard, the hold row, both journal legs (ledger.repository holdCtes) and the operation row, as one
 * statement. When the balance is short nothing is written (the row is inserted only beside its hold) and
 * `operation` is null: the caller may top the balance up in the same transaction (a payment drawing on Earn,
 * issue 26) and send the statement again, or refuse with insufficient_funds. `INSERT … SELECT` with untyped
 * parameters takes the target columns' types, as `VALUES` does. The columns are the row's own, so the statement's
 * text (and its prepared name) follows the row type.
 */
export async function acceptPayment(db: Db, row: NewOperationRow, hold: HoldInput, at: Date): Promise<{ operation: OperationRow; holdPlaced: true } | { operation: null; holdPlaced: false }> {
  const stored: Record<string, unknown> = {
    ...row,
    amount: row.amount?.toString() ?? null,
    amount_usd_e8: row.amount_usd_e8?.toString() ?? null,
    fee_usd_e8: row.fee_usd_e8.toString(),
    details: JSON.stringify(row.details),
    policy_facts: row.policy_facts == null ? null : JSON.stringify(row.policy_facts),
  };
  if (row.approval_reasons) stored.approval_reasons = JSON.stringify(row.approval_reasons);
  const columns = Object.keys(stored);
  const names = list(columns.map((c) => identifier(c)));
  const values = list(columns.map((c) => stored[c]));
  const [result] = await rows(
    db,
    prepared(sql<OperationRow & { hold_placed: number }>`WITH ${holdCtes(hold, at)}, op AS (INSERT INTO operations (${names}) SELECT ${values} WHERE EXISTS (SELECT 1 FROM reserved) RETURNING *)
      SELECT op.*, (SELECT count(*)::int FROM reserved) AS hold_placed FROM op`),
  );
  if (!result) return { operation: null, holdPlaced: false };
  const { hold_placed: _placed, ...operation } = result;
  countOperationEntries(db, [operation]);
  return { operation, holdPlaced: true };
}
