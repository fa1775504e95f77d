// The events outbox: the spec 6.2 envelope serialised once, written in the caller's transaction.
import type { Db } from '../knex.js';
import { newId } from '../../lib/ids.js';
import { DELIVERY_CHANNEL, insertDeliveriesForEvent } from './delivery.repository.js';

export interface EventEnvelope {
  id: string;
  type: string;
  created_at: string;
  agent_id: string;
  wallet_id: string;
  operation_id: string | null;
  resource: { type: string; id: string };
  data: Record<string, unknown>;
}

export interface NewEvent {
  type: string;
  agentId: string;
  walletId: string;
  operationId: string | null;
  resource: { type: string; id: string };
  data: Record<string, unknown>;
  createdAt: Date;
}

const envelopeOf = (event: NewEvent): EventEnvelope => ({
  id: newId(),
  type: event.type,
  created_at: event.createdAt.toISOString(),
  agent_id: event.agentId,
  wallet_id: event.walletId,
  operation_id: event.operationId,
  resource: event.resource,
  data: event.data,
});

export async function appendEvent(db: Db, event: NewEvent): Promise<EventEnvelope> {
  const envelope = envelopeOf(event);
  const payload = JSON.stringify(envelope);
  await db('events').insert({
    id: envelope.id,
    agent_id: envelope.agent_id,
    wallet_id: envelope.wallet_id,
    type: envelope.type,
    operation_id: envelope.operation_id,
    resource_type: envelope.resource.type,
    resource_id: envelope.resource.id,
    payload,
    created_at: event.createdAt,
  });
  // Fan-out to subscribed webhook endpoints, in the same transaction (no event lost, none duplicated).
  await insertDeliveriesForEvent(db, { id: envelope.id, agentId: envelope.agent_id, type: envelope.type, resource: envelope.resource, createdAt: event.createdAt });
  return envelope;
}

/**
 * Many events for one statement, in the given order (their `seq` follows it), as two data-modifying CTEs: `ev` inserts
 * them, `ev_deliveries` fans each out to every subscribed enabled endpoint of its agent (as insertDeliveriesForEvent
 * does for one; never `webhook.test`, which goes to one endpoint) and returns a row per delivery. The caller's
 * statement ends with `notify` over `ev_deliveries` (pg_notify at commit wakes the delivery workers).
 */
export function eventsStatement(events: NewEvent[]): { ctes: string; bindings: string[]; notify: string; envelopes: EventEnvelope[] } {
  if (events.some((e) => e.type === 'webhook.test')) throw new Error('webhook.test events are appended one at a time (appendEvent)');
  const envelopes = events.map(envelopeOf);
  const rows = envelopes.map((e, n) => ({
    n,
    id: e.id,
    agent_id: e.agent_id,
    wallet_id: e.wallet_id,
    type: e.type,
    operation_id: e.operation_id,
    resource_type: e.resource.type,
    resource_id: e.resource.id,
    payload: JSON.stringify(e),
    created_at: e.created_at,
  }));
  return {
    ctes: `ev AS (
       INSERT INTO events (id, agent_id, wallet_id, type, operation_id, resource_type, resource_id, payload, created_at)
       SELECT e.id, e.agent_id, e.wallet_id, e.type, e.operation_id, e.resource_type, e.resource_id, e.payload, e.created_at
       FROM jsonb_to_recordset(?::jsonb) AS e(id uuid, agent_id uuid, wallet_id text, type text, operation_id uuid, resource_type text, resource_id text, payload text, created_at timestamptz, n int)
       ORDER BY e.n
       RETURNING id, agent_id, type, created_at
     ), ev_deliveries AS (
       INSERT INTO webhook_deliveries (id, event_id, endpoint_id, agent_id, event_type, event_created_at, status, attempt, next_attempt_at, created_at, updated_at)
       SELECT gen_random_uuid(), ev.id, w.id, w.agent_id, ev.type, ev.created_at, 'pending', 0, ev.created_at, ev.created_at, ev.created_at
       FROM ev JOIN webhook_endpoints w ON w.agent_id = ev.agent_id AND w.enabled AND ev.type = ANY(w.event_types)
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
       RETURNING 1
     )`,
    bindings: [JSON.stringify(rows)],
    notify: `(SELECT CASE WHEN count(*) > 0 THEN pg_notify('${DELIVERY_CHANNEL}', '') END FROM ev_deliveries)`,
    envelopes,
  };
}

export interface StoredEventRow {
  id: string;
  seq: string;
  payload: string;
}

/** The agent's events newest first (insertion order, `seq`), exclusive of the `beforeSeq` cursor. */
export async function listEvents(db: Db, agentId: string, options: { type?: string; since?: Date; beforeSeq?: string; limit: number }): Promise<StoredEventRow[]> {
  const q = db('events').where({ agent_id: agentId }).orderBy('seq', 'desc').limit(options.limit).select('id', 'seq', 'payload');
  if (options.type) q.andWhere({ type: options.type });
  if (options.since) q.andWhere('created_at', '>=', options.since);
  if (options.beforeSeq) q.andWhere('seq', '<', options.beforeSeq);
  return q;
}

export async function findEvent(db: Db, agentId: string, id: string): Promise<StoredEventRow | undefined> {
  return db('events').where({ agent_id: agentId, id }).first('id', 'seq', 'payload');
}

/** The agent's events after `afterSeq` in insertion order (the MCP event relay's feed; index events_agent_seq). */
export async function listEventsAfter(db: Db, agentId: string, afterSeq: string, limit: number): Promise<StoredEventRow[]> {
  return db('events').where({ agent_id: agentId }).andWhere('seq', '>', afterSeq).orderBy('seq', 'asc').limit(limit).select('id', 'seq', 'payload');
}

/** The agent's highest event `seq` ('0' when it has none). */
export async function latestEventSeq(db: Db, agentId: string): Promise<string> {
  const row = await db('events').where({ agent_id: agentId }).max<{ seq: string | null }>('seq as seq').first();
  return String(row?.seq ?? '0');
}
