// What the webhook endpoint and delivery services share: the caller, the dependencies, the
// document's views of the stored rows, the owned-endpoint lookup and the checks callers outside
// HTTP (scripts, tests) still need because nothing validated their input against the document.
import type { Db } from '../../db/knex.js';
import type * as deliveries from '../../db/repositories/delivery.repository.js';
import * as endpoints from '../../db/repositories/webhook.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import type { Sealer } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import type { Resolver } from '../../webhooks/url-safety.js';

export interface WebhookCaller {
  agentId: string;
  walletId: string;
}

export interface WebhookServiceDeps {
  clock: Clock;
  sealer: Sealer;
  allowLoopback: boolean;
  resolver?: Resolver;
  /** Where a refusal's detail (the resolved address) goes; the caller is told only that it is not public. */
  log?: Logger;
}

export type WebhookView = Schema<'WebhookEndpoint'>;
export type DeliveryView = Schema<'WebhookDelivery'>;

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
  has_more: boolean;
}

/** Page size when none is given (the document's default). */
const DEFAULT_LIMIT = 50;
/** The document's maximum page size, checked again for callers outside HTTP. */
const MAX_LIMIT = 100;

const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);

// The stored vocabularies are the ones this service wrote (checked on the way in), hence the casts.
export function toWebhookView(row: endpoints.WebhookEndpointRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    description: row.description ?? '',
    event_types: [...row.event_types] as WebhookView['event_types'],
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    consecutive_failures: row.consecutive_failures,
    last_delivered_at: iso(row.last_delivered_at),
    last_failure_at: iso(row.last_failure_at),
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

export function toDeliveryView(row: deliveries.DeliveryRow): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type as DeliveryView['event_type'],
    event_created_at: iso(row.event_created_at)!,
    endpoint_id: row.endpoint_id,
    attempt: row.attempt,
    status: row.status,
    http_status: row.http_status,
    error_class: row.error_class as DeliveryView['error_class'],
    latency_ms: row.latency_ms ?? 0,
    response_body: row.response_body ?? '',
    next_attempt_at: iso(row.next_attempt_at),
    first_attempt_at: iso(row.first_attempt_at),
    last_attempt_at: iso(row.last_attempt_at),
    terminal_at: iso(row.terminal_at),
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

export const invalid = (message: string, details: Record<string, unknown>) => new ApiError('validation_failed', message, details);

export function checkLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw invalid(`limit must be an integer from 1 to ${MAX_LIMIT}`, { field: 'limit' });
  return limit;
}

/** A page of `limit` rows from `limit + 1` fetched; the cursor is the last row's id. */
export function toIdPage<R extends { id: string }, V>(rows: R[], limit: number, view: (row: R) => V): Page<V> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { items: page.map(view), next_cursor: hasMore ? page[page.length - 1]!.id : null, has_more: hasMore };
}

export async function loadOwned(db: Db, caller: WebhookCaller, id: string, forUpdate = false): Promise<endpoints.WebhookEndpointRow> {
  const row = isUuid(id) ? await endpoints.findEndpoint(db, caller.agentId, id, { forUpdate }) : undefined;
  if (!row) throw new ApiError('not_found', 'webhook endpoint not found', { id });
  return row;
}

export const ownerOnly = () => new ApiError('owner_only_action', 'this endpoint was disabled for sustained failures; only the owner can re-enable it', { disabled_reason: 'sustained_failures' });
