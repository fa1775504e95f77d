// MASTER_KEY rotation: re-seal every registered sealed column from the previous key to the current one.
import type { Knex } from 'knex';
import * as repo from '../db/repositories/sealed.repository.js';
import { SEALED_COLUMNS, type SealedColumn } from '../db/sealed-columns.js';
import { createSealer } from '../lib/crypto.js';

export interface ColumnRotation {
  table: string;
  column: string;
  resealed: number;
  alreadyCurrent: number;
  /** Keys (values joined with '/') of values neither key opens (sealed under some third key, or corrupt): left untouched. */
  unopenable: string[];
  /** Values changed by the application while we worked (they are sealed under the current key by then). */
  changedMeanwhile: number;
}

/**
 * Walks each column in batches ordered by the table's primary key; a value that the current key already opens is left
 * alone, so the command is idempotent and can be re-run after an interruption. Each value is
 * replaced by compare-and-set, so it is safe while the service runs with both keys configured.
 */
export async function rotateMasterKey(deps: { db: Knex; masterKey: string; previousMasterKey: string; columns?: readonly SealedColumn[]; batchSize?: number }): Promise<ColumnRotation[]> {
  const current = createSealer(deps.masterKey);
  const previous = createSealer(deps.previousMasterKey);
  const batchSize = deps.batchSize ?? 500;
  const results: ColumnRotation[] = [];
  for (const col of deps.columns ?? SEALED_COLUMNS) {
    const result: ColumnRotation = { table: col.table, column: col.column, resealed: 0, alreadyCurrent: 0, unopenable: [], changedMeanwhile: 0 };
    let after: string[] | null = null;
    for (;;) {
      const batch = await repo.listSealedValues(deps.db, col, after, batchSize);
      if (batch.length === 0) break;
      after = batch[batch.length - 1]!.key;
      for (const { key, sealed } of batch) {
        if (opens(current, sealed)) {
          result.alreadyCurrent++;
          continue;
        }
        let plaintext: string;
        try {
          plaintext = previous.open(sealed);
        } catch {
          result.unopenable.push(key.join('/'));
          continue;
        }
        if (await repo.replaceSealedValue(deps.db, col, key, sealed, current.seal(plaintext))) result.resealed++;
        else result.changedMeanwhile++;
      }
    }
    results.push(result);
  }
  return results;
}

function opens(sealer: ReturnType<typeof createSealer>, sealed: string): boolean {
  try {
    sealer.open(sealed);
    return true;
  } catch {
    return false;
  }
}
