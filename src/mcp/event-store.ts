// One MCP session's SSE history, so a client that reconnects with Last-Event-ID gets what it missed (Streamable HTTP resumability).
import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

interface Stored {
  n: number;
  streamId: StreamId;
  message: JSONRPCMessage;
}

const SEPARATOR = '~';

/**
 * Keeps the session's last `capacity` messages in memory. Event ids are `<stream>~<n>`, `n` counting
 * up across the session, so a replay sends every kept message of that stream numbered above the
 * client's cursor, even when the cursor itself was already dropped (at least once, bounded by the
 * capacity). The session lives in this process, so its history does too (ARCHITECTURE.md, MCP).
 */
export function createSessionEventStore(capacity = 1000): EventStore & { size(): number } {
  const kept: Stored[] = [];
  let counter = 0;

  const parse = (eventId: EventId): { streamId: StreamId; n: number } | null => {
    const at = eventId.lastIndexOf(SEPARATOR);
    if (at <= 0) return null;
    const n = Number(eventId.slice(at + 1));
    return Number.isSafeInteger(n) && n > 0 ? { streamId: eventId.slice(0, at), n } : null;
  };

  return {
    async storeEvent(streamId, message) {
      counter += 1;
      kept.push({ n: counter, streamId, message });
      if (kept.length > capacity) kept.splice(0, kept.length - capacity);
      return `${streamId}${SEPARATOR}${counter}`;
    },

    async getStreamIdForEventId(eventId) {
      const parsed = parse(eventId);
      return parsed && parsed.n <= counter ? parsed.streamId : undefined;
    },

    async replayEventsAfter(lastEventId, { send }) {
      const parsed = parse(lastEventId);
      if (!parsed || parsed.n > counter) throw new Error(`unknown event id ${lastEventId}`);
      for (const event of kept.filter((e) => e.streamId === parsed.streamId && e.n > parsed.n)) {
        // Priming events (empty messages) only carry an id for the client's cursor.
        if (Object.keys(event.message).length === 0) continue;
        await send(`${event.streamId}${SEPARATOR}${event.n}`, event.message);
      }
      return parsed.streamId;
    },

    size: () => kept.length,
  };
}
