// Generic access to the sealed columns of src/db/sealed-columns.ts, for the master-key rotation.
import type { Db } from '../knex.js';
import type { SealedColumn } from '../sealed-columns.js';

export interface SealedValue {
  /** The row's key values, in the order of `SealedColumn.key`. */
  key: string[];
  sealed: string;
}

/** The next `limit` non-null values after `after` in key order (a keyset walk on the primary key; no long-held snapshot). */
export async function listSealedValues(db: Db, col: SealedColumn, after: string[] | null, limit: number): Promise<SealedValue[]> {
  const q = db(col.table)
    .select([...col.key, { sealed: col.column }])
    .whereNotNull(col.column)
    .orderBy([...col.key])
    .limit(limit);
  if (after !== null) q.whereRaw(`(${col.key.map(() => '??').join(', ')}) > (${col.key.map(() => '?').join(', ')})`, [...col.key, ...after]);
  const rows = (await q) as Array<Record<string, unknown> & { sealed: string }>;
  return rows.map((r) => ({ key: col.key.map((k) => String(r[k])), sealed: r.sealed }));
}

/** Compare-and-set: replaces the value only if nobody changed it meanwhile (a concurrent secret rotation wins). */
export async function replaceSealedValue(db: Db, col: SealedColumn, key: string[], expected: string, replacement: string): Promise<boolean> {
  const where = Object.fromEntries(col.key.map((k, i) => [k, key[i]]));
  const updated = await db(col.table)
    .where(where)
    .where(col.column, expected)
    .update({ [col.column]: replacement });
  return Number(updated) === 1;
}
