// The agent's events (spec 6.2 envelopes) read back from the outbox: how an agent catches up on
// what its webhook endpoints missed. The stored payload is the exact envelope that was delivered.
import type { Db } from '../db/knex.js';
import * as repo from '../db/repositories/event.repository.js';
import type { Schema } from '../lib/contract.js';
import { ApiError } from '../lib/errors.js';
import { isUuid } from '../lib/ids.js';
import { decodeKey, encodeKey, pageLimit, toPage, type ListPage } from './cursor.js';

type EventEnvelope = Schema<'EventEnvelope'>;

export interface EventService {
  list(db: Db, agentId: string, query: { cursor?: string; limit?: unknown; type?: string; since?: string }): Promise<ListPage<EventEnvelope>>;
  get(db: Db, agentId: string, id: string): Promise<EventEnvelope>;
  /** Events after a `seq` cursor, oldest first, with their cursor (the MCP event relay). */
  feed(db: Db, agentId: string, afterSeq: string, limit: number): Promise<{ seq: string; event: EventEnvelope }[]>;
  /** The cursor of the agent's newest event ('0' when none): a feed from here sees only new events. */
  latestSeq(db: Db, agentId: string): Promise<string>;
}

/** The stored payload is the envelope exactly as delivered (the document's EventEnvelope). */
const envelope = (row: repo.StoredEventRow) => JSON.parse(row.payload) as EventEnvelope;

export function createEventService(): EventService {
  return {
    async list(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const beforeSeq = decodeKey(query.cursor);
      if (beforeSeq !== undefined && !/^[0-9]{1,19}$/.test(beforeSeq))
        throw new ApiError('validation_failed', 'cursor is malformed', { errors: [{ location: 'query', path: 'cursor', message: 'is malformed' }] });
      const rows = await repo.listEvents(db, agentId, { type: query.type, since: query.since ? new Date(query.since) : undefined, beforeSeq, limit: limit + 1 });
      return toPage(rows, limit, envelope, (r) => encodeKey(String(r.seq)));
    },

    async get(db, agentId, id) {
      const row = isUuid(id) ? await repo.findEvent(db, agentId, id) : undefined;
      if (!row) throw new ApiError('not_found', 'event not found', { id });
      return envelope(row);
    },

    async feed(db, agentId, afterSeq, limit) {
      const rows = await repo.listEventsAfter(db, agentId, afterSeq, limit);
      return rows.map((row) => ({ seq: String(row.seq), event: envelope(row) }));
    },

    latestSeq: (db, agentId) => repo.latestEventSeq(db, agentId),
  };
}
