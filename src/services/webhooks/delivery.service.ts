// Webhook deliveries as the agent and the owner see them (spec 4.3-4.4): the delivery log, a retry now, recovery after an outage.
import { DELIVERY_STATUSES } from '../../../generated/vocabulary.js';
import type { Db } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import * as deliveries from '../../db/repositories/delivery.repository.js';
import * as endpoints from '../../db/repositories/webhook.repository.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import type { Schema } from '../../lib/contract.js';
import { checkLimit, invalid, loadOwned, ownerOnly, toDeliveryView, toIdPage, type DeliveryView, type Page, type WebhookCaller, type WebhookServiceDeps } from './shared.js';

/** The document's filters; `status` is a plain string because callers outside HTTP are not validated against the document. */
export interface DeliveryListQuery {
  cursor?: string;
  limit?: number;
  status?: string;
  event_id?: string;
}

export type DeliveryAttemptView = Schema<'WebhookDeliveryAttempt'>;

export interface DeliveryAttemptPage {
  delivery_id: string;
  items: DeliveryAttemptView[];
  next_cursor: string | null;
  has_more: boolean;
}

export interface WebhookDeliveryService {
  /** Every attempt of one delivery of the caller's endpoint, newest first (issue 30 item 1). */
  listDeliveryAttempts(db: Db, caller: WebhookCaller, id: string, deliveryId: string, query: { cursor?: string; limit?: number }): Promise<DeliveryAttemptPage>;
  listDeliveries(db: Db, caller: WebhookCaller, id: string, query: DeliveryListQuery): Promise<Page<DeliveryView>>;
  /** Owner recovery: re-queues, in event order, what failed terminally or was skipped while disabled since `since`. */
  recover(db: Db, id: string, since: Date): Promise<{ webhook_id: string; requeued: number }>;
  /** A new attempt of one delivery now (agent route). */
  retryDelivery(db: Db, caller: WebhookCaller, id: string, deliveryId: string): Promise<DeliveryView>;
}

const validLimit = (limit: number | undefined): boolean => {
  try {
    checkLimit(limit);
    return true;
  } catch {
    return false;
  }
};

/** A uuid no delivery has: the delivery check of a malformed id finds nothing (and the endpoint check still runs). */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

const isDeliveryStatus = (status: string): status is DeliveryView['status'] => (DELIVERY_STATUSES as readonly string[]).includes(status);

export function createWebhookDeliveryService(deps: Pick<WebhookServiceDeps, 'clock'>): WebhookDeliveryService {
  const { clock } = deps;
  return {
    async listDeliveryAttempts(db, caller, id, deliveryId, query) {
      // The endpoint's owner and the delivery's endpoint in one statement (404 for the endpoint first).
      const owned = isUuid(id) ? await deliveries.findOwnedDeliveryId(db, caller.agentId, id, isUuid(deliveryId) ? deliveryId : NIL_UUID) : undefined;
      if (!owned) throw new ApiError('not_found', 'webhook endpoint not found', { id });
      const delivery = owned.deliveryId === null ? undefined : { id: owned.deliveryId };
      if (!delivery) throw new ApiError('not_found', 'delivery not found', { delivery_id: deliveryId });
      const limit = checkLimit(query.limit);
      let before: number | undefined;
      if (query.cursor !== undefined) {
        before = /^[1-9][0-9]{0,8}$/.test(query.cursor) ? Number(query.cursor) : NaN;
        if (!Number.isSafeInteger(before)) throw invalid('cursor must be the attempt number of a previous page', { field: 'cursor' });
      }
      const rows = await deliveries.listDeliveryAttempts(db, delivery.id, { before, limit: limit + 1 });
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      return {
        delivery_id: delivery.id,
        items: page.map(toAttemptView),
        next_cursor: hasMore ? String(page[page.length - 1]!.attempt) : null,
        has_more: hasMore,
      };
    },

    async listDeliveries(db, caller, id, query) {
      // The first page with valid filters (the common read): the ownership check and the list in one statement.
      if (query.cursor === undefined && isUuid(id) && validLimit(query.limit) && (query.status === undefined || isDeliveryStatus(query.status))) {
        const limit = checkLimit(query.limit);
        const rows = await deliveries.listOwnedDeliveries(db, caller.agentId, id, { status: query.status, eventId: query.event_id, limit: limit + 1 });
        if (!rows) throw new ApiError('not_found', 'webhook endpoint not found', { id });
        return toIdPage(rows, limit, toDeliveryView);
      }
      // Otherwise in order: the endpoint (404 first), the filters, the cursor's anchor, the page.
      const row = await loadOwned(db, caller, id);
      const limit = checkLimit(query.limit);
      const { status } = query;
      if (status !== undefined && !isDeliveryStatus(status)) throw invalid(`status must be one of ${DELIVERY_STATUSES.join(', ')}`, { field: 'status' });
      let after: { created_at: Date; id: string } | undefined;
      if (query.cursor !== undefined) {
        // The cursor is a delivery id; it must belong to this endpoint and satisfy the active filters (spec 2.5, 4.3).
        const anchor = isUuid(query.cursor) ? await deliveries.findDelivery(db, query.cursor) : undefined;
        if (!anchor || anchor.endpoint_id !== row.id || (query.event_id !== undefined && anchor.event_id !== query.event_id) || (status !== undefined && anchor.status !== status)) {
          throw invalid('cursor is not valid for this endpoint and these filters', { field: 'cursor' });
        }
        after = { created_at: anchor.created_at, id: anchor.id };
      }
      const rows = await deliveries.listDeliveries(db, row.id, { status, eventId: query.event_id, after, limit: limit + 1 });
      return toIdPage(rows, limit, toDeliveryView);
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
  };
}

function toAttemptView(row: deliveries.DeliveryAttemptRow): DeliveryAttemptView {
  return {
    attempt: row.attempt,
    attempted_at: row.attempted_at ? new Date(row.attempted_at).toISOString() : null,
    finished_at: new Date(row.finished_at).toISOString(),
    outcome: row.outcome as DeliveryAttemptView['outcome'],
    http_status: row.http_status,
    error_class: row.error_class as DeliveryAttemptView['error_class'],
    latency_ms: row.latency_ms,
    response_body: row.response_body,
    lease_expired: row.lease_expired,
  };
}
