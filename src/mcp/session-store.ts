// MCP sessions shared by every API process: the session record (initialize, grant binding, subscription) and its SSE history in Redis.
import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { DependencyUnavailableError } from '../lib/errors.js';

/** A session's subscription: what it wants and how far the relay got (JSON-safe, so Redis can hold it). */
export interface SubscriptionState {
  types: string[];
  /** Every event at or below this `seq` has been handled. */
  floor: string;
  /** Events above the floor already handled, with when they were read (ms). */
  seen: [seq: string, readAt: number][];
}

/** Where subscriptions live: this process's memory, or the shared session store (src/mcp/session-store.ts). */
export interface SubscriptionStore {
  get(sessionId: string): Promise<SubscriptionState | null>;
  /** Null removes the subscription. */
  set(sessionId: string, state: SubscriptionState | null): Promise<void>;
}

/** A session as any process can rebuild it: the initialize it answered and whom it belongs to. */
export interface SessionRecord {
  id: string;
  grantKey: string;
  agentId: string;
  walletId: string;
  /** The client's initialize request (protocol version, capabilities, client info), replayed to rebuild the SDK server. */
  initialize: unknown;
  confirmed: boolean;
  createdAt: number;
  subscription: SubscriptionState | null;
}

/** node-redis's `sendCommand`, as the rate limiter takes it. */
export interface RedisCommands {
  sendCommand(args: string[]): Promise<unknown>;
}

export interface SharedSessionStore {
  /** Writes the record; it expires after `idleMs` unless a request or an open stream refreshes it. */
  save(record: SessionRecord): Promise<void>;
  /** Reads the record and refreshes its expiry (one GETEX); null when ended or expired. */
  touch(id: string): Promise<SessionRecord | null>;
  /** Refreshes the expiry of records whose stream this process holds. */
  refresh(ids: string[]): Promise<void>;
  /** A request named the session (it may no longer be evicted for a new one). */
  confirm(id: string): Promise<void>;
  remove(record: Pick<SessionRecord, 'id' | 'grantKey'>): Promise<void>;
  /** The grant's live sessions with the milliseconds each has left. */
  ofGrant(grantKey: string): Promise<(SessionRecord & { ttlMs: number })[]>;
  subscriptions: SubscriptionStore;
  /** The session's SSE history (a Redis stream of its last `capacity` messages). */
  eventStore(sessionId: string): EventStore;
}

const SEPARATOR = '~';

/**
 * Keys: `<prefix>mcp:s:<id>` (the record, JSON, PX idleMs), `<prefix>mcp:g:<grant>` (a set of the grant's
 * ids, pruned when read), `<prefix>mcp:e:<id>` (the stream; XADD MAXLEN ~ capacity, PX idleMs). A record
 * write is a whole-value SET: the subscription's cursor and the confirmed flag are written by the process
 * serving the session's request or stream, one at a time in practice; a lost race repeats an event
 * (delivery is at least once) and never skips one, since the cursor only moves past what was sent.
 */
export function createRedisSessionStore(client: RedisCommands, opts: { prefix: string; idleMs: number; capacity?: number }): SharedSessionStore {
  const { prefix, idleMs } = opts;
  // Redis not answering (offline, closed, reconnecting) is an outage, answered 503 like the database's; an error
  // reply (ErrorReply: the command itself was wrong) stays an internal error.
  const redis: RedisCommands = {
    sendCommand: (args) =>
      client.sendCommand(args).catch((err: unknown) => {
        throw (err as { name?: string })?.name === 'ErrorReply' ? err : new DependencyUnavailableError('the MCP session store (Redis)', { cause: err });
      }),
  };
  const capacity = opts.capacity ?? 1000;
  const ttl = String(idleMs);
  const recordKey = (id: string) => `${prefix}mcp:s:${id}`;
  const grantKey = (grant: string) => `${prefix}mcp:g:${grant}`;
  const streamKey = (id: string) => `${prefix}mcp:e:${id}`;
  const parse = (raw: unknown): SessionRecord | null => (typeof raw === 'string' ? (JSON.parse(raw) as SessionRecord) : null);

  async function save(record: SessionRecord): Promise<void> {
    await redis.sendCommand(['SET', recordKey(record.id), JSON.stringify(record), 'PX', ttl]);
    await redis.sendCommand(['SADD', grantKey(record.grantKey), record.id]);
    await redis.sendCommand(['PEXPIRE', grantKey(record.grantKey), ttl]);
  }

  async function update(id: string, change: (record: SessionRecord) => void): Promise<SessionRecord | null> {
    const record = parse(await redis.sendCommand(['GET', recordKey(id)]));
    if (!record) return null;
    change(record);
    await redis.sendCommand(['SET', recordKey(id), JSON.stringify(record), 'XX', 'KEEPTTL']);
    return record;
  }

  const subscriptions: SubscriptionStore = {
    get: async (id) => parse(await redis.sendCommand(['GET', recordKey(id)]))?.subscription ?? null,
    set: async (id, state) => void (await update(id, (r) => (r.subscription = state))),
  };

  function eventStore(sessionId: string): EventStore {
    const key = streamKey(sessionId);
    const split = (eventId: EventId): { streamId: StreamId; entry: string } | null => {
      const at = eventId.lastIndexOf(SEPARATOR);
      const entry = eventId.slice(at + 1);
      return at > 0 && /^\d+-\d+$/.test(entry) ? { streamId: eventId.slice(0, at), entry } : null;
    };
    return {
      async storeEvent(streamId, message) {
        const entry = (await redis.sendCommand(['XADD', key, 'MAXLEN', '~', String(capacity), '*', 's', streamId, 'm', JSON.stringify(message)])) as string;
        await redis.sendCommand(['PEXPIRE', key, ttl]);
        return `${streamId}${SEPARATOR}${entry}`;
      },
      async getStreamIdForEventId(eventId) {
        return split(eventId)?.streamId;
      },
      async replayEventsAfter(lastEventId, { send }) {
        const parsed = split(lastEventId);
        if (!parsed) throw new Error(`unknown event id ${lastEventId}`);
        const entries = (await redis.sendCommand(['XRANGE', key, `(${parsed.entry}`, '+'])) as [string, string[]][];
        for (const [entry, fields] of entries) {
          const streamId = fields[fields.indexOf('s') + 1];
          const message = JSON.parse(fields[fields.indexOf('m') + 1]!) as JSONRPCMessage;
          // Priming events (empty messages) only carry an id for the client's cursor.
          if (streamId !== parsed.streamId || Object.keys(message).length === 0) continue;
          await send(`${streamId}${SEPARATOR}${entry}`, message);
        }
        return parsed.streamId;
      },
    };
  }

  return {
    save,
    touch: async (id) => parse(await redis.sendCommand(['GETEX', recordKey(id), 'PX', ttl])),
    async refresh(ids) {
      for (const id of ids) {
        await redis.sendCommand(['PEXPIRE', recordKey(id), ttl]);
        await redis.sendCommand(['PEXPIRE', streamKey(id), ttl]);
      }
    },
    confirm: async (id) => void (await update(id, (r) => (r.confirmed = true))),
    async remove(record) {
      await redis.sendCommand(['DEL', recordKey(record.id), streamKey(record.id)]);
      await redis.sendCommand(['SREM', grantKey(record.grantKey), record.id]);
    },
    async ofGrant(grant) {
      const ids = (await redis.sendCommand(['SMEMBERS', grantKey(grant)])) as string[];
      const live: (SessionRecord & { ttlMs: number })[] = [];
      for (const id of ids) {
        const record = parse(await redis.sendCommand(['GET', recordKey(id)]));
        if (!record) {
          await redis.sendCommand(['SREM', grantKey(grant), id]);
          continue;
        }
        live.push({ ...record, ttlMs: Number(await redis.sendCommand(['PTTL', recordKey(id)])) });
      }
      return live;
    },
    subscriptions,
    eventStore,
  };
}
