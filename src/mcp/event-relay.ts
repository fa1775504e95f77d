// mcp_subscribe's engine: reads the agent's events from the events table (the webhooks' outbox) and sends them on the session's stream.
import type { Db } from '../db/knex.js';
import type { Logger } from '../lib/logger.js';
import type { EventService } from '../services/event.service.js';
import type { McpSession } from './sessions.js';

export const EVENT_NOTIFICATION = 'notifications/agent_api/event';

/** Rows read per session per pass; a larger burst drains over the following passes. */
const FEED_LIMIT = 500;

interface Subscription {
  session: McpSession;
  types: Set<string>;
  /** Every event at or below this `seq` has been handled. */
  floor: bigint;
  /** Events above the floor already handled, with the pass that read them. */
  seen: Map<bigint, number>;
}

export interface EventRelay {
  /** Adds event types to the session's subscription (a new one starts after the agent's newest event); returns every subscribed type. */
  subscribe(session: McpSession, types: string[]): Promise<string[]>;
  /** Removes the given types, or all of them; returns what stays subscribed. */
  unsubscribe(sessionId: string, types?: string[]): string[];
  forget(sessionId: string): void;
  /** One pass over every subscription (the timer calls it; tests may too). */
  poll(): Promise<void>;
  close(): void;
}

/**
 * Delivery is at least once: the event is written to the session's event store (replayed after a
 * reconnect with Last-Event-ID) before the relay marks it handled. `seq` is a bigserial, so a
 * transaction that commits late can land below events already read; the cursor therefore stays
 * `settlePasses` behind (about 5 s), re-reading that window and skipping ids it has sent.
 */
export function createEventRelay(deps: {
  db: Db;
  events: EventService;
  log: Logger;
  pollMs: number;
  send: (session: McpSession, event: unknown) => Promise<void>;
  /** False while the session's credential no longer holds (expired, grant revoked): its events wait, the cursor stays. */
  mayDeliver: (session: McpSession) => Promise<boolean>;
}): EventRelay {
  const { db, events, log, pollMs } = deps;
  const subscriptions = new Map<string, Subscription>();
  const settlePasses = Math.max(3, Math.ceil(5000 / pollMs));
  let pass = 0;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  async function pollOne(sub: Subscription): Promise<void> {
    const rows = await events.feed(db, sub.session.agentId, String(sub.floor), FEED_LIMIT);
    for (const row of rows) {
      const seq = BigInt(row.seq);
      if (sub.seen.has(seq)) continue;
      if (sub.types.has(row.event.type)) await deps.send(sub.session, row.event);
      sub.seen.set(seq, pass);
    }
    let floor = sub.floor;
    for (const [seq, at] of sub.seen) if (at <= pass - settlePasses && seq > floor) floor = seq;
    // Only a contiguous prefix of what was read may be settled: nothing unread may sit below the floor.
    const unsettled = [...sub.seen].filter(([, at]) => at > pass - settlePasses).map(([seq]) => seq);
    for (const seq of unsettled) if (seq <= floor) floor = seq - 1n;
    sub.floor = floor;
    for (const seq of sub.seen.keys()) if (seq <= floor) sub.seen.delete(seq);
  }

  async function poll(): Promise<void> {
    pass += 1;
    for (const sub of [...subscriptions.values()]) {
      try {
        if (await deps.mayDeliver(sub.session)) await pollOne(sub);
      } catch (err) {
        log.warn({ err, sessionId: sub.session.id }, 'mcp event relay pass failed; retrying next pass');
      }
    }
  }

  const schedule = () => {
    if (closed || timer || subscriptions.size === 0) return;
    timer = setTimeout(() => {
      void poll().finally(() => {
        timer = null;
        schedule();
      });
    }, pollMs);
    timer.unref();
  };

  return {
    async subscribe(session, types) {
      let sub = subscriptions.get(session.id);
      if (!sub) {
        sub = { session, types: new Set(), floor: BigInt(await events.latestSeq(db, session.agentId)), seen: new Map() };
        subscriptions.set(session.id, sub);
      }
      for (const t of types) sub.types.add(t);
      schedule();
      return [...sub.types].sort();
    },
    unsubscribe(sessionId, types) {
      const sub = subscriptions.get(sessionId);
      if (!sub) return [];
      if (types === undefined) sub.types.clear();
      else for (const t of types) sub.types.delete(t);
      if (sub.types.size === 0) subscriptions.delete(sessionId);
      return [...sub.types].sort();
    },
    forget: (sessionId) => void subscriptions.delete(sessionId),
    poll,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      subscriptions.clear();
    },
  };
}
