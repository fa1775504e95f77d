// mcp_subscribe's engine: reads the agent's events from the events table (the webhooks' outbox) and sends them on the session's stream.
import type { Db } from '../db/knex.js';
import type { Logger } from '../lib/logger.js';
import type { EventService } from '../services/event.service.js';
import type { SubscriptionState, SubscriptionStore } from './session-store.js';
import type { McpSession } from './sessions.js';

export type { SubscriptionState, SubscriptionStore };

export const EVENT_NOTIFICATION = 'notifications/agent_api/event';

/** Rows read per session per pass; a larger burst drains over the following passes. */
const FEED_LIMIT = 500;

export interface EventRelay {
  /** Adds event types to the session's subscription (a new one starts after the agent's newest event); returns every subscribed type. */
  subscribe(session: McpSession, types: string[]): Promise<string[]>;
  /** Removes the given types, or all of them; returns what stays subscribed. */
  unsubscribe(sessionId: string, types?: string[]): Promise<string[]>;
  /** This process stops relaying for the session (its subscription stays in a shared store). */
  forget(sessionId: string): void;
  /** Starts the timer if it sleeps (a stream opened on this process). */
  wake(): void;
  /** One pass over every subscription (the timer calls it; tests may too). */
  poll(): Promise<void>;
  close(): void;
}

/**
 * Delivery is at least once: the event is written to the session's event store (replayed after a
 * reconnect with Last-Event-ID) before the relay marks it handled. `seq` is a bigserial, so a
 * transaction that commits late can land below events already read; the cursor therefore stays
 * about 5 s behind, re-reading that window and skipping ids it has sent.
 *
 * With a shared store (several API processes), the subscription lives in Redis and a process relays
 * only the sessions whose GET stream it holds (`sessions()`); while no stream is open anywhere the
 * cursor waits, and the next stream, on any process, catches up from it.
 */
export function createEventRelay(deps: {
  db: Db;
  events: EventService;
  log: Logger;
  pollMs: number;
  send: (session: McpSession, event: unknown) => Promise<void>;
  /** False while the session's credential no longer holds (expired, grant revoked): its events wait, the cursor stays. */
  mayDeliver: (session: McpSession) => Promise<boolean>;
  /** The shared store, with the local sessions to relay (those with an open stream here); absent: memory, every subscribed session. */
  shared?: { store: SubscriptionStore; sessions: () => McpSession[] };
  now?: () => number;
}): EventRelay {
  const { db, events, log, pollMs } = deps;
  const now = deps.now ?? Date.now;
  const local = new Map<string, { session: McpSession; state: SubscriptionState }>();
  const memory: SubscriptionStore = {
    get: async (id) => local.get(id)?.state ?? null,
    set: async (id, state) => void (state ? local.get(id) && (local.get(id)!.state = state) : local.delete(id)),
  };
  const store = deps.shared?.store ?? memory;
  const candidates = (): McpSession[] => (deps.shared ? deps.shared.sessions() : [...local.values()].map((s) => s.session));
  const settleMs = Math.max(3, Math.ceil(5000 / pollMs)) * pollMs;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  async function pollOne(session: McpSession, state: SubscriptionState): Promise<void> {
    const types = new Set(state.types);
    const seen = new Map(state.seen.map(([seq, at]) => [BigInt(seq), at]));
    const at = now();
    const rows = await events.feed(db, session.agentId, state.floor, FEED_LIMIT);
    for (const row of rows) {
      const seq = BigInt(row.seq);
      if (seen.has(seq)) continue;
      if (types.has(row.event.type)) await deps.send(session, row.event);
      seen.set(seq, at);
    }
    let floor = BigInt(state.floor);
    const settledBefore = at - settleMs;
    for (const [seq, readAt] of seen) if (readAt <= settledBefore && seq > floor) floor = seq;
    // Only a contiguous prefix of what was read may be settled: nothing unread may sit below the floor.
    for (const [seq, readAt] of seen) if (readAt > settledBefore && seq <= floor) floor = seq - 1n;
    for (const seq of seen.keys()) if (seq <= floor) seen.delete(seq);
    state.floor = String(floor);
    state.seen = [...seen].map(([seq, readAt]) => [String(seq), readAt]);
  }

  async function poll(): Promise<void> {
    for (const session of candidates()) {
      try {
        const state = await store.get(session.id);
        if (!state || state.types.length === 0) continue;
        if (!(await deps.mayDeliver(session))) continue;
        await pollOne(session, state);
        // A concurrent unsubscribe may have removed it meanwhile: keep its last word on the types.
        const latest = await store.get(session.id);
        if (latest) await store.set(session.id, { ...state, types: latest.types });
      } catch (err) {
        log.warn({ err, sessionId: session.id }, 'mcp event relay pass failed; retrying next pass');
      }
    }
  }

  const schedule = () => {
    if (closed || timer || candidates().length === 0) return;
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
      let state = await store.get(session.id);
      if (!state) {
        state = { types: [], floor: String(await events.latestSeq(db, session.agentId)), seen: [] };
        if (!deps.shared) local.set(session.id, { session, state });
      }
      state.types = [...new Set([...state.types, ...types])].sort();
      await store.set(session.id, state);
      schedule();
      return state.types;
    },
    async unsubscribe(sessionId, types) {
      const state = await store.get(sessionId);
      if (!state) return [];
      state.types = types === undefined ? [] : state.types.filter((t) => !types.includes(t));
      await store.set(sessionId, state.types.length === 0 ? null : state);
      return state.types;
    },
    forget: (sessionId) => void local.delete(sessionId),
    wake: schedule,
    poll,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      local.clear();
    },
  };
}
