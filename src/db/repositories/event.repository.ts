// The events outbox: the spec 6.2 envelope serialised once, written in the caller's transaction.
import type { Db } from '../knex.js';
import { newId } from '../../lib/ids.js';
import { insertDeliveriesForEvent } from './delivery.repository.js';

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

export async function appendEvent(db: Db, event: NewEvent): Promise<EventEnvelope> {
  const envelope: EventEnvelope = {
    id: newId(),
    type: event.type,
    created_at: event.createdAt.toISOString(),
    agent_id: event.agentId,
    wallet_id: event.walletId,
    operation_id: event.operationId,
    resource: event.resource,
    data: event.data,
  };
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
