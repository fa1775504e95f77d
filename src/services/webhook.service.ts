// Webhook endpoint management (spec 2.2, 3.1, 4.2-4.4; contract §11): URL safety, sealed secrets, rotation, tests, delivery listing.
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as endpoints from '../db/repositories/webhook.repository.js';
import * as deliveries from '../db/repositories/delivery.repository.js';
import { appendEvent } from '../db/repositories/event.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Sealer } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { isUuid, newId } from '../lib/ids.js';
import { isSubscribableEventType } from '../webhooks/event-types.js';
import { generateSigningSecret, ROTATION_GRACE_MS } from '../webhooks/signing.js';
import { assertPublicHttpsUrl, DnsResolutionError, UrlRejectedError, type Resolver } from '../webhooks/url-safety.js';

export const MAX_ENDPOINTS_PER_AGENT = 10;
export const MAX_DESCRIPTION_LENGTH = 500;
export const RECENT_DELIVERIES = 10;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 100;

export interface WebhookCaller {
  agentId: string;
  walletId: string;
}

export interface WebhookView {
  id: string;
  url: string;
  /** Empty string when none was given (OpenAPI WebhookEndpoint). */
  description: string;
  event_types: string[];
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  last_delivered_at: string | null;
  last_failure_at: string | null;
  created_at: string;
  updated_at: string;
  recent_deliveries?: DeliveryView[];
}

export interface DeliveryView {
  id: string;
  event_id: string;
  event_type: string;
  event_created_at: string;
  endpoint_id: string;
  attempt: number;
  status: string;
  http_status: number | null;
  error_class: string | null;
  /** 0 before the first attempt (OpenAPI WebhookDelivery). */
  latency_ms: number;
  /** Empty before the first attempt. */
  response_body: string;
  next_attempt_at: string | null;
  first_attempt_at: string | null;
  last_attempt_at: string | null;
  terminal_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
  has_more: boolean;
}

export interface CreateWebhookInput {
  url: string;
  description?: string | null;
  event_types: string[];
}

export interface UpdateWebhookInput {
  url?: string;
  description?: string | null;
  event_types?: string[];
  enabled?: boolean;
}

export interface WebhookService {
  create(db: Db, caller: WebhookCaller, input: CreateWebhookInput): Promise<{ webhook: WebhookView; signing_secret: string }>;
  list(db: Db, caller: WebhookCaller, query: { cursor?: string; limit?: number }): Promise<Page<WebhookView>>;
  get(db: Db, caller: WebhookCaller, id: string, options?: { includeRecentDeliveries?: boolean }): Promise<WebhookView>;
  update(db: Db, caller: WebhookCaller, id: string, patch: UpdateWebhookInput): Promise<WebhookView>;
  remove(db: Db, caller: WebhookCaller, id: string): Promise<void>;
  rotateSecret(db: Db, caller: WebhookCaller, id: string): Promise<{ webhook: WebhookView; signing_secret: string }>;
  sendTest(db: Db, caller: WebhookCaller, id: string): Promise<{ event_id: string }>;
  listDeliveries(db: Db, caller: WebhookCaller, id: string, query: { cursor?: string; limit?: number; status?: string; event_id?: string }): Promise<Page<DeliveryView>>;
  /** The owner's re-enable (agentctl): clears `sustained_failures` and the failure counters. */
  enableByOwner(db: Db, id: string): Promise<WebhookView>;
  /** Owner recovery: re-queues, in event order, what failed terminally or was skipped while disabled since `since`. */
  recover(db: Db, id: string, since: Date): Promise<{ webhook_id: string; requeued: number }>;
  /** A new attempt of one delivery now (agent route). */
  retryDelivery(db: Db, caller: WebhookCaller, id: string, deliveryId: string): Promise<DeliveryView>;
}

export interface WebhookServiceDeps {
  clock: Clock;
  sealer: Sealer;
  allowLoopback: boolean;
  resolver?: Resolver;
  /** Where a refusal's detail (the resolved address) goes; the caller is told only that it is not public. */
  log?: Logger;
}

const iso = (d: Date | null): string | null => (d ? new Date(d).toISOString() : null);

export function toWebhookView(row: endpoints.WebhookEndpointRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    description: row.description ?? '',
    event_types: [...row.event_types],
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
    event_type: row.event_type,
    event_created_at: iso(row.event_created_at)!,
    endpoint_id: row.endpoint_id,
    attempt: row.attempt,
    status: row.status,
    http_status: row.http_status,
    error_class: row.error_class,
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

const invalid = (message: string, details: Record<string, unknown>) => new ApiError('validation_failed', message, details);

function checkLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw invalid(`limit must be an integer from 1 to ${MAX_LIMIT}`, { field: 'limit' });
  return limit;
}

function checkEventTypes(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) throw invalid('event_types must be a non-empty array', { field: 'event_types' });
  const unknown = value.filter((t) => typeof t !== 'string' || !isSubscribableEventType(t));
  if (unknown.length > 0) throw invalid('event_types holds types that cannot be subscribed to', { field: 'event_types', invalid: unknown });
  return [...new Set(value as string[])];
}

function checkDescription(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > MAX_DESCRIPTION_LENGTH) throw invalid(`description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters`, { field: 'description' });
  return value;
}

export function createWebhookService(deps: WebhookServiceDeps): WebhookService {
  const { clock, sealer } = deps;

  async function checkUrl(url: unknown): Promise<string> {
    if (typeof url !== 'string') throw invalid('url must be a string', { field: 'url' });
    try {
      await assertPublicHttpsUrl(url, { allowLoopback: deps.allowLoopback, resolver: deps.resolver });
    } catch (err) {
      if (err instanceof UrlRejectedError) {
        deps.log?.info({ detail: err.detail }, 'webhook url refused');
        throw invalid('url must be a public HTTPS URL', { field: 'url', reason: err.reason });
      }
      // A name that does not resolve (yet, or from here) is not an unsafe one: every attempt
      // resolves and checks again, and counts a failed lookup as a retryable dns_error.
      if (err instanceof DnsResolutionError) return url;
      throw err;
    }
    return url;
  }

  async function loadOwned(db: Db, caller: WebhookCaller, id: string, forUpdate = false): Promise<endpoints.WebhookEndpointRow> {
    const row = isUuid(id) ? await endpoints.findEndpoint(db, caller.agentId, id, { forUpdate }) : undefined;
    if (!row) throw new ApiError('not_found', 'webhook endpoint not found', { id });
    return row;
  }

  const ownerOnly = () =>
    new ApiError('owner_only_action', 'this endpoint was disabled for sustained failures; only the owner can re-enable it', { disabled_reason: 'sustained_failures' });

  return {
    async create(db, caller, input) {
      const eventTypes = checkEventTypes(input.event_types);
      const description = checkDescription(input.description);
      const url = await checkUrl(input.url);
      return withTransaction(db, async (trx) => {
        if (!(await endpoints.lockAgentRow(trx, caller.agentId))) throw new ApiError('not_found', 'agent not found');
        const count = await endpoints.countEndpoints(trx, caller.agentId);
        if (count >= MAX_ENDPOINTS_PER_AGENT) {
          throw new ApiError('limit_exceeded', `an agent may have at most ${MAX_ENDPOINTS_PER_AGENT} webhook endpoints`, { limit: MAX_ENDPOINTS_PER_AGENT, current: count });
        }
        const now = clock.now();
        const secret = generateSigningSecret();
        const row = await endpoints.insertEndpoint(trx, {
          id: newId(),
          agent_id: caller.agentId,
          url,
          description,
          event_types: eventTypes,
          enabled: true,
          disabled_reason: null,
          disabled_at: null,
          consecutive_failures: 0,
          failing_since: null,
          last_delivered_at: null,
          last_failure_at: null,
          sealed_secret: sealer.seal(secret),
          sealed_previous_secret: null,
          previous_secret_expires_at: null,
          created_at: now,
          updated_at: now,
        });
        return { webhook: toWebhookView(row), signing_secret: secret };
      });
    },

    async list(db, caller, query) {
      const limit = checkLimit(query.limit);
      let after: { created_at: Date; id: string } | undefined;
      if (query.cursor !== undefined) {
        const anchor = isUuid(query.cursor) ? await endpoints.findEndpoint(db, caller.agentId, query.cursor) : undefined;
        if (!anchor) throw invalid('cursor is not valid for this list', { field: 'cursor' });
        after = { created_at: anchor.created_at, id: anchor.id };
      }
      const rows = await endpoints.listEndpoints(db, caller.agentId, { after, limit: limit + 1 });
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      return { items: page.map(toWebhookView), next_cursor: hasMore ? page[page.length - 1]!.id : null, has_more: hasMore };
    },

    async get(db, caller, id, options = {}) {
      const row = await loadOwned(db, caller, id);
      const view = toWebhookView(row);
      if (options.includeRecentDeliveries) {
        const recent = await deliveries.listDeliveries(db, row.id, { limit: RECENT_DELIVERIES });
        view.recent_deliveries = recent.map(toDeliveryView);
      }
      return view;
    },

    async update(db, caller, id, patch) {
      const fields = (['url', 'description', 'event_types', 'enabled'] as const).filter((f) => patch[f] !== undefined);
      if (fields.length === 0) throw invalid('give at least one of url, description, event_types, enabled', { fields: ['url', 'description', 'event_types', 'enabled'] });
      const url = patch.url !== undefined ? await checkUrl(patch.url) : undefined;
      const eventTypes = patch.event_types !== undefined ? checkEventTypes(patch.event_types) : undefined;
      const description = patch.description !== undefined ? checkDescription(patch.description) : undefined;
      if (patch.enabled !== undefined && typeof patch.enabled !== 'boolean') throw invalid('enabled must be a boolean', { field: 'enabled' });
      return withTransaction(db, async (trx) => {
        const row = await loadOwned(trx, caller, id, true);
        const changes: endpoints.EndpointPatch = { updated_at: clock.now() };
        if (patch.enabled === true && !row.enabled) {
          if (row.disabled_reason === 'sustained_failures') throw ownerOnly();
          Object.assign(changes, { enabled: true, disabled_reason: null, disabled_at: null });
        } else if (patch.enabled === false && row.enabled) {
          Object.assign(changes, { enabled: false, disabled_reason: null, disabled_at: changes.updated_at });
        }
        if (url !== undefined) changes.url = url;
        if (eventTypes !== undefined) changes.event_types = eventTypes;
        if (patch.description !== undefined) changes.description = description ?? null;
        const updated = await endpoints.updateEndpoint(trx, row.id, changes);
        return toWebhookView(updated!);
      });
    },

    async remove(db, caller, id) {
      const row = await loadOwned(db, caller, id);
      if ((await endpoints.deleteEndpoint(db, caller.agentId, row.id)) === 0) throw new ApiError('not_found', 'webhook endpoint not found', { id });
    },

    async rotateSecret(db, caller, id) {
      return withTransaction(db, async (trx) => {
        const row = await loadOwned(trx, caller, id, true);
        if (row.disabled_reason === 'sustained_failures') throw ownerOnly();
        const now = clock.now();
        const secret = generateSigningSecret();
        const updated = await endpoints.updateEndpoint(trx, row.id, {
          sealed_secret: sealer.seal(secret),
          // The secret being replaced stays valid (and signed with) for 24 h.
          sealed_previous_secret: row.sealed_secret,
          previous_secret_expires_at: new Date(now.getTime() + ROTATION_GRACE_MS),
          updated_at: now,
        });
        return { webhook: toWebhookView(updated!), signing_secret: secret };
      });
    },

    async sendTest(db, caller, id) {
      return withTransaction(db, async (trx) => {
        const row = await loadOwned(trx, caller, id);
        const envelope = await appendEvent(trx, {
          type: 'webhook.test',
          agentId: caller.agentId,
          walletId: caller.walletId,
          operationId: null,
          resource: { type: 'webhook_endpoint', id: row.id },
          data: { webhook_id: row.id, message: 'This is a test event from the Agent API.' },
          createdAt: clock.now(),
        });
        return { event_id: envelope.id };
      });
    },

    async listDeliveries(db, caller, id, query) {
      const row = await loadOwned(db, caller, id);
      const limit = checkLimit(query.limit);
      if (query.status !== undefined && !(deliveries.DELIVERY_STATUSES as readonly string[]).includes(query.status)) {
        throw invalid(`status must be one of ${deliveries.DELIVERY_STATUSES.join(', ')}`, { field: 'status' });
      }
      if (query.event_id !== undefined && !isUuid(query.event_id)) throw invalid('event_id must be a UUID', { field: 'event_id' });
      let after: { created_at: Date; id: string } | undefined;
      if (query.cursor !== undefined) {
        // The cursor is a delivery id; it must belong to this endpoint and satisfy the active filters (spec 2.5, 4.3).
        const anchor = isUuid(query.cursor) ? await deliveries.findDelivery(db, query.cursor) : undefined;
        if (
          !anchor ||
          anchor.endpoint_id !== row.id ||
          (query.event_id !== undefined && anchor.event_id !== query.event_id) ||
          (query.status !== undefined && anchor.status !== query.status)
        ) {
          throw invalid('cursor is not valid for this endpoint and these filters', { field: 'cursor' });
        }
        after = { created_at: anchor.created_at, id: anchor.id };
      }
      const rows = await deliveries.listDeliveries(db, row.id, { status: query.status, eventId: query.event_id, after, limit: limit + 1 });
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      return { items: page.map(toDeliveryView), next_cursor: hasMore ? page[page.length - 1]!.id : null, has_more: hasMore };
    },

    async recover(db, id, since) {
      return withTransaction(db, async (trx) => {
        const row = isUuid(id) ? await endpoints.findEndpointById(trx, id, { forUpdate: true }) : undefined;
        if (!row) throw new ApiError('not_found', 'webhook endpoint not found', { id });
        if (!row.enabled) throw new ApiError('invalid_state_transition', 'the endpoint is disabled: re-enable it before recovering its events', { enabled: false });
        const requeued = await deliveries.requeueForRecovery(trx, row, since, clock.now());
        return { webhook_id: row.id, requeued };
      });
    },

    async retryDelivery(db, caller, id, deliveryId) {
      return withTransaction(db, async (trx) => {
        const row = await loadOwned(trx, caller, id, true);
        const delivery = isUuid(deliveryId) ? await deliveries.findDelivery(trx, deliveryId) : undefined;
        if (!delivery || delivery.endpoint_id !== row.id) throw new ApiError('not_found', 'delivery not found', { delivery_id: deliveryId });
        if (!row.enabled) {
          if (row.disabled_reason === 'sustained_failures') throw ownerOnly();
          throw new ApiError('invalid_state_transition', 'the endpoint is disabled; enable it first', { enabled: false });
        }
        const requeued = await deliveries.requeueDelivery(trx, delivery.id, clock.now());
        if (!requeued) throw new ApiError('invalid_state_transition', 'the delivery is being attempted right now; retry when it finishes', { status: delivery.status });
        return toDeliveryView(requeued);
      });
    },

    async enableByOwner(db, id) {
      if (!isUuid(id)) throw new ApiError('not_found', 'webhook endpoint not found', { id });
      const row = await endpoints.enableEndpointByOwner(db, id, clock.now());
      if (!row) throw new ApiError('not_found', 'webhook endpoint not found', { id });
      return toWebhookView(row);
    },
  };
}
