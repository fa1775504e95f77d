// Generic access to the sealed columns of src/db/sealed-columns.ts, for the master-key rotation.
import type { Db } from '../knex.js';
import type { SealedColumn } from '../sealed-columns.js';

export interface SealedValue {
  id: string;
  sealed: string;
}

/** The next `limit` non-null values after `afterId`, in id order (keyset walk; no long-held snapshot). */
export async function listSealedValues(db: Db, col: SealedColumn, afterId: string | null, limit: number): Promise<SealedValue[]> {
  const q = db(col.table).select({ id: col.idColumn, sealed: col.column }).whereNotNull(col.column).orderBy(col.idColumn).limit(limit);
  if (afterId !== null) q.where(col.idColumn, '>', afterId);
  const rows = (await q) as Array<{ id: unknown; sealed: string }>;
  return rows.map((r) => ({ id: String(r.id), sealed: r.sealed }));
}

/** Compare-and-set: replaces the value only if nobody changed it meanwhile (a concurrent secret rotation wins). */
export async function replaceSealedValue(db: Db, col: SealedColumn, id: string, expected: string, replacement: string): Promise<boolean> {
  const updated = await db(col.table)
    .where(col.idColumn, id)
    .where(col.column, expected)
    .update({ [col.column]: replacement });
  return Number(updated) === 1;
}

/** Every `sealed_*` text column of the schema, to check the registry is complete. */
export async function listSealedColumnNames(db: Db): Promise<Array<{ table: string; column: string }>> {
  const rows = (await db('information_schema.columns')
    .select({ table: 'table_name', column: 'column_name' })
    .where('table_schema', db.raw('current_schema()'))
    .where('column_name', 'like', 'sealed\\_%')
    .orderBy(['table_name', 'column_name'])) as Array<{ table: string; column: string }>;
  return rows;
}
