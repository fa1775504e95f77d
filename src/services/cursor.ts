// Opaque keyset cursors for the ledger area's lists (newest first): base64url of {t, id} or of a text key.
import { validationFailed } from '../lib/errors.js';
import type { Keyset } from '../db/repositories/keyset.js';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 100;

export function encodeKeyset(row: { created_at: Date; id: string }): string {
  return Buffer.from(JSON.stringify({ t: row.created_at.toISOString(), id: row.id })).toString('base64url');
}

export function decodeKeyset(cursor: string | undefined | null): Keyset | undefined {
  if (cursor === undefined || cursor === null || cursor === '') return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { t?: unknown; id?: unknown };
    const createdAt = new Date(String(parsed.t));
    if (typeof parsed.t !== 'string' || typeof parsed.id !== 'string' || Number.isNaN(createdAt.getTime())) throw new Error('bad');
    return { createdAt, id: parsed.id };
  } catch {
    throw validationFailed('cursor is malformed', [{ location: 'query', path: 'cursor', message: 'is malformed' }]);
  }
}

export function encodeKey(key: string): string {
  return Buffer.from(JSON.stringify({ k: key })).toString('base64url');
}

export function decodeKey(cursor: string | undefined | null): string | undefined {
  if (cursor === undefined || cursor === null || cursor === '') return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { k?: unknown };
    if (typeof parsed.k !== 'string') throw new Error('bad');
    return parsed.k;
  } catch {
    throw validationFailed('cursor is malformed', [{ location: 'query', path: 'cursor', message: 'is malformed' }]);
  }
}

export function pageLimit(limit: unknown): number {
  if (limit === undefined || limit === null || limit === '') return DEFAULT_LIMIT;
  const n = Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT)
    throw validationFailed(`limit must be an integer in [1, ${MAX_LIMIT}]`, [{ location: 'query', path: 'limit', message: `must be an integer in [1, ${MAX_LIMIT}]` }]);
  return n;
}

export interface ListPage<T> {
  ok: true;
  items: T[];
  next_cursor: string | null;
  has_more: boolean;
}

/** Builds the list page from `limit + 1` fetched rows. */
export function toPage<R, T>(rows: R[], limit: number, map: (row: R) => T, cursorOf: (row: R) => string): ListPage<T> {
  const hasMore = rows.length > limit;
  const kept = hasMore ? rows.slice(0, limit) : rows;
  const last = kept[kept.length - 1];
  return { ok: true, items: kept.map(map), next_cursor: hasMore && last !== undefined ? cursorOf(last) : null, has_more: hasMore };
}
