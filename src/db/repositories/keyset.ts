// Keyset pagination shared by the list queries: newest first on (created_at, id).
import type { Knex } from '../knex.js';

export interface Keyset {
  createdAt: Date;
  id: string;
}

export interface Page {
  before?: Keyset;
  limit: number;
}

/** Orders newest first and starts after `p.before`. */
export function newestFirst<T extends object>(q: Knex.QueryBuilder<T>, p: Page): Knex.QueryBuilder<T> {
  q.orderBy([
    { column: 'created_at', order: 'desc' },
    { column: 'id', order: 'desc' },
  ]).limit(p.limit);
  if (p.before) q.whereRaw('(created_at, id) < (?, ?)', [p.before.createdAt, p.before.id]);
  return q;
}
