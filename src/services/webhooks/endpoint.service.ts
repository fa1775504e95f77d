// Webhook endpoints (spec 2.2, 3.1, 4.2; contract §11): URL safety, sealed secrets, rotation, test events, the owner's re-enable.
import type { Db } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import * as deliveries from '../../db/repositories/delivery.repository.js';
import { appendEvent } from '../../db/repositories/event.repository.js';
import * as endpoints from '../../db/repositories/webhook.repository.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { isSubscribableEventType } from '../../webhooks/event-types.js';
import { generateSigningSecret, ROTATION_GRACE_MS } from '../../webhooks/signing.js';
import { assertPublicHttpsUrl, DnsResolutionError, UrlRejectedError } from '../../webhooks/url-safety.js';
import { checkLimit, invalid, loadOwned, ownerOnly, toDeliveryView, toIdPage, toWebhookView, type Page, type WebhookCaller, type WebhookServiceDeps, type WebhookView } from './shared.js';

/** Endpoints per agent: a rule across rows, which the document cannot express. */
const MAX_ENDPOINTS_PER_AGENT = 10;
/** Delivery records shown with `include=recent_deliveries` (the document's "last 10"). */
const RECENT_DELIVERIES = 10;

/**
 * The document's requests with event types as plain strings: callers outside HTTP (scripts,
 * tests) are not validated against the document, so the service checks the vocabulary itself.
 */
type Unchecked<T> = Omit<T, 'event_types'> & { event_types: string[] };
export type CreateWebhookInput = Unchecked<Schema<'WebhookCreateRequest'>>;
export type UpdateWebhookInput = Partial<Unchecked<Schema<'WebhookUpdateRequest'>>>;
export type WebhookWithSecret = { webhook: WebhookView; signing_secret: string };

export interface WebhookEndpointService {
  create(db: Db, caller: WebhookCaller, input: CreateWebhookInput): Promise<WebhookWithSecret>;
  list(db: Db, caller: WebhookCaller, query: { cursor?: string; limit?: number }): Promise<Page<WebhookView>>;
  get(db: Db, caller: WebhookCaller, id: string, options?: { includeRecentDeliveries?: boolean }): Promise<WebhookView>;
  update(db: Db, caller: WebhookCaller, id: string, patch: UpdateWebhookInput): Promise<WebhookView>;
  remove(db: Db, caller: WebhookCaller, id: string): Promise<void>;
  rotateSecret(db: Db, caller: WebhookCaller, id: string): Promise<WebhookWithSecret>;
  sendTest(db: Db, caller: WebhookCaller, id: string): Promise<{ event_id: string }>;
  /** The owner's re-enable (agentctl): clears `sustained_failures` and the failure counters. */
  enableByOwner(db: Db, id: string): Promise<WebhookView>;
}

function checkEventTypes(types: string[]): Schema<'SubscribableEventType'>[] {
  // Array.isArray: a caller outside HTTP may pass anything.
  if (!Array.isArray(types) || types.length === 0) throw invalid('event_types must be a non-empty array', { field: 'event_types' });
  const unknown = types.filter((t) => !isSubscribableEventType(t));
  if (unknown.length > 0) throw invalid('event_types holds types that cannot be subscribed to', { field: 'event_types', invalid: unknown });
  return types as Schema<'SubscribableEventType'>[];
}

export function createWebhookEndpointService(deps: WebhookServiceDeps): WebhookEndpointService {
  const { clock, sealer } = deps;

  async function checkUrl(url: string): Promise<string> {
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

  return {
    async create(db, caller, input) {
      const eventTypes = checkEventTypes(input.event_types);
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
          description: input.description ?? null,
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
      return toIdPage(await endpoints.listEndpoints(db, caller.agentId, { after, limit: limit + 1 }), limit, toWebhookView);
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
        if (patch.description !== undefined) changes.description = patch.description;
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

    async enableByOwner(db, id) {
      if (!isUuid(id)) throw new ApiError('not_found', 'webhook endpoint not found', { id });
      const row = await endpoints.enableEndpointByOwner(db, id, clock.now());
      if (!row) throw new ApiError('not_found', 'webhook endpoint not found', { id });
      return toWebhookView(row);
    },
  };
}
