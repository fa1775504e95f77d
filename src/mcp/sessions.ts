// MCP sessions of this process: one SDK server and transport each, capped per OAuth grant, closed on DELETE or when idle.
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Principal } from '../auth/principal.js';
import type { Logger } from '../lib/logger.js';

export interface McpSession {
  id: string;
  /** Sessions are counted, and may only be used, per OAuth grant. */
  grantKey: string;
  agentId: string;
  walletId: string;
  server: Server;
  transport: StreamableHTTPServerTransport;
  lastSeenAt: number;
  /** False until a request names the session: a client that never uses its id (stateless use) may be evicted for a new session. */
  confirmed: boolean;
  /** Open GET streams: a session with a stream open is never idle. */
  openStreams: number;
  /** The access token of the session's latest request: events are sent only while it still verifies. */
  token: string;
  /** When `token` last verified (ms). */
  verifiedAt: number;
}

/** The grant a token belongs to (header keys never reach /mcp; the fallback keeps the key total). */
export const grantKeyOf = (principal: Principal): string => principal.grantId ?? `${principal.clientId ?? 'none'}:${principal.agentId}`;

export interface SessionRegistry {
  get(id: string): McpSession | undefined;
  /**
   * Makes room for one more session of the grant: true when under the cap, or after closing the
   * grant's oldest unconfirmed session; false when every session of the grant is in use (429).
   */
  makeRoom(grantKey: string): Promise<boolean>;
  /** Seconds until the grant's least recently used session would expire (the 429's Retry-After). */
  retryAfterSeconds(grantKey: string): number;
  add(session: McpSession): void;
  /** Forgets the session and closes its transport and server (idempotent). */
  end(id: string, why: string): Promise<void>;
  all(): McpSession[];
  close(): Promise<void>;
}

export function createSessionRegistry(opts: { maxPerGrant: number; idleMs: number; log: Logger; now?: () => number; onEnd?: (session: McpSession) => void }): SessionRegistry {
  const { maxPerGrant, idleMs, log } = opts;
  const now = opts.now ?? Date.now;
  const sessions = new Map<string, McpSession>();
  const ofGrant = (grantKey: string) => [...sessions.values()].filter((s) => s.grantKey === grantKey);

  async function end(id: string, why: string): Promise<void> {
    const session = sessions.get(id);
    if (!session) return;
    sessions.delete(id);
    opts.onEnd?.(session);
    log.info({ sessionId: id, agentId: session.agentId, why }, 'mcp session ended');
    await session.transport.close().catch(() => undefined);
    await session.server.close().catch(() => undefined);
  }

  const isIdle = (s: McpSession, at: number) => s.openStreams === 0 && at - s.lastSeenAt >= idleMs;
  // Sweeps idle sessions; unref'd so it never holds the process open.
  const sweeper = setInterval(
    () => {
      const at = now();
      for (const s of sessions.values()) if (isIdle(s, at)) void end(s.id, 'idle');
    },
    Math.max(250, Math.min(Math.floor(idleMs / 2), 30_000)),
  );
  sweeper.unref();

  return {
    get: (id) => sessions.get(id),
    async makeRoom(grantKey) {
      const mine = ofGrant(grantKey);
      if (mine.length < maxPerGrant) return true;
      const unconfirmed = mine.filter((s) => !s.confirmed).sort((a, b) => a.lastSeenAt - b.lastSeenAt)[0];
      if (!unconfirmed) return false;
      await end(unconfirmed.id, 'evicted: never used, grant at its session cap');
      return true;
    },
    retryAfterSeconds(grantKey) {
      const at = now();
      const soonest = Math.min(...ofGrant(grantKey).map((s) => (s.openStreams > 0 ? idleMs : s.lastSeenAt + idleMs - at)));
      return Math.max(1, Math.ceil((Number.isFinite(soonest) ? soonest : idleMs) / 1000));
    },
    add: (session) => void sessions.set(session.id, session),
    end,
    all: () => [...sessions.values()],
    async close() {
      clearInterval(sweeper);
      await Promise.all([...sessions.keys()].map((id) => end(id, 'shutdown')));
    },
  };
}
