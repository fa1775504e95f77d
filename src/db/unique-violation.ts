// Recognises a unique violation (SQLSTATE 23505) and names the request field it is about: a value that
// must be unique and is taken is the caller's conflict (409), never an internal error.
import { ApiError } from '../lib/errors.js';

/** The idempotency record's own key (agent_id, key): a violation of it is a concurrent claim, not a conflict. */
export const IDEMPOTENCY_KEY_CONSTRAINT = 'idempotency_keys_pkey';

/**
 * Unique indexes a request can hit with a value it chose, by name: the field as the API names it and the
 * thing that already holds it. Others are named from Postgres's detail (`Key (col, ...)=(...)`), so an
 * index added later still answers 409 with its columns.
 */
const KNOWN: Record<string, { field: string; holder: string }> = {
  owners_email_live: { field: 'email', holder: 'an owner' },
  wallets_address_unique: { field: 'address', holder: 'a wallet' },
  wallets_agent_id_unique: { field: 'agent_id', holder: 'a wallet' },
  earn_vaults_address_unique: { field: 'address', holder: 'a vault' },
  borrow_markets_asset_symbol_unique: { field: 'asset', holder: 'a market' },
  assets_pkey: { field: 'symbol', holder: 'an asset' },
  rate_limit_overrides_pkey: { field: 'class', holder: 'a rate limit of this agent' },
  conversion_quote_consumptions_pkey: { field: 'quote_id', holder: 'an execution' },
};

export interface UniqueViolation {
  constraint: string;
  table: string | null;
  /** The request field (or the index's columns, comma-separated) whose value is taken. */
  field: string;
  holder: string;
}

/** The columns of `Key (lower(email), wallet_id)=(...)`: identifiers not called as functions nor cast to. */
function columnsOf(detail: string | undefined): string[] {
  const key = /^Key \((.*)\)=\(/s.exec(detail ?? '')?.[1];
  if (!key) return [];
  const names: string[] = [];
  for (const m of key.matchAll(/(::\s*)?"?([A-Za-z_][A-Za-z0-9_]*)"?(\s*\()?/g)) if (!m[1] && !m[3]) names.push(m[2]!);
  return [...new Set(names)];
}

/** The unique violation `err` (or its cause) reports, else null. */
export function uniqueViolationOf(err: unknown, depth = 0): UniqueViolation | null {
  if (!err || typeof err !== 'object' || depth > 4) return null;
  const e = err as { code?: unknown; constraint?: unknown; table?: unknown; detail?: unknown; cause?: unknown };
  if (e.code !== '23505') return uniqueViolationOf(e.cause, depth + 1);
  const constraint = typeof e.constraint === 'string' ? e.constraint : '';
  const table = typeof e.table === 'string' ? e.table : null;
  const known = KNOWN[constraint];
  if (known) return { constraint, table, ...known };
  const columns = columnsOf(typeof e.detail === 'string' ? e.detail : undefined);
  return { constraint, table, field: columns.length ? columns.join(', ') : constraint || 'unknown', holder: table ? `a row of ${table}` : 'another record' };
}

/** True for a violation of the idempotency record's own key (by constraint name, not by SQLSTATE alone). */
export function isIdempotencyKeyViolation(err: unknown): boolean {
  return uniqueViolationOf(err)?.constraint === IDEMPOTENCY_KEY_CONSTRAINT;
}

/**
 * The 409 a unique violation other than the idempotency key's answers: `invalid_state_transition` (the closed
 * code of a state that refuses the request) naming the field, else null.
 */
export function conflictErrorOf(err: unknown): ApiError | null {
  const v = uniqueViolationOf(err);
  if (!v || v.constraint === IDEMPOTENCY_KEY_CONSTRAINT) return null;
  return new ApiError('invalid_state_transition', `${v.holder[0]!.toUpperCase()}${v.holder.slice(1)} with this ${v.field} already exists.`, {
    field: v.field,
  });
}
