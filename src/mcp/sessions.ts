// MCP sessions: one SDK server and transport each in this process, capped per OAuth grant, closed on DELETE or when idle; with Redis, shared by every API process.
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Principal } from '../auth/principal.js';
import type { Logger } from '../lib/logger.js';
import type { SessionRecord, SharedSessionStore } from './session-store.js';

export interface McpSession {
  id: string;
  /** Sessions are counted, and may only be used, per OAuth grant. */
  grantKey: string;
  agentId: string;
  walletId: string;
  server: Server;
  transport: WebStandardStreamableHTTPServerTransport;
  lastSeenAt: number;
  /** False until a request names the session: a client that never uses its id (stateless use) may be evicted for a new session. */
  confirmed: boolean;
  /** Open GET streams on this process: a session with a stream open is never idle. */
  openStreams: number;
  /** The access token of the session's latest request here: events are sent only while it still verifies. */
  token: string;
  /** When `token` last verified (ms). */
  verifiedAt: number;
}

/** The grant a token belongs to (header keys never reach /mcp; the fallback keeps the key total). */
export const grantKeyOf = (principal: Principal): string => principal.grantId ?? `${principal.clientId ?? 'none'}:${principal.agentId}`;

/** Why a session ends; the first two (and a failed initialize) end it for every process, the others only here. */
export type EndReason = 'deleted' | 'evicted' | 'closed' | 'idle' | 'shutdown' | 'initialize failed' | 'expired';

export interface SessionRegistry {
  /**
   * The session named by a request. With a shared store the record is read (and its expiry refreshed) on
   * every request, and a session opened by another process is rebuilt here from it (`rebuild`).
   */
  get(id: string): Promise<McpSession | undefined>;
  /**
   * Makes room for one more session of the grant: true when under the cap, or after closing the
   * grant's oldest unconfirmed session; false when every session of the grant is in use (429).
   */
  makeRoom(grantKey: string): Promise<boolean>;
  /** Seconds until the grant's least recently used session would expire (the 429's Retry-After). */
  retryAfterSeconds(grantKey: string): Promise<number>;
  add(session: McpSession, initialize: unknown): Promise<void>;
  /** A request named the session: it is in use (shared: recorded once). */
  confirm(session: McpSession): Promise<void>;
  /** Forgets the session here and closes its transport and server (idempotent); `deleted`/`evicted` end it everywhere. */
  end(id: string, why: EndReason): Promise<void>;
  all(): McpSession[];
  close(): Promise<void>;
}

export function createSessionRegistry(opts: {
  maxPerGrant: number;
  idleMs: number;
  log: Logger;
  now?: () => number;
  onEnd?: (session: McpSession) => void;
  /** Redis: sessions any process can serve. Absent: this process's memory only (the embedded default). */
  shared?: { store: SharedSessionStore; rebuild: (record: SessionRecord) => Promise<McpSession> };
}): SessionRegistry {
  const { maxPerGrant, idleMs, log, shared } = opts;
  const now = opts.now ?? Date.now;
  const sessions = new Map<string, McpSession>();
  const rebuilding = new Map<string, Promise<McpSession>>();
  const ofGrant = (grantKey: string) => [...sessions.values()].filter((s) => s.grantKey === grantKey);

  async function end(id: string, why: EndReason): Promise<void> {
    const session = sessions.get(id);
    if (shared && (why === 'deleted' || why === 'evicted' || why === 'initialize failed'))
      await shared.store.remove({ id, grantKey: session?.grantKey ?? '' }).catch((err: unknown) => log.warn({ err, sessionId: id }, 'mcp session record not removed'));
    if (!session) return;
    sessions.delete(id);
    opts.onEnd?.(session);
    log.info({ sessionId: id, agentId: session.agentId, why }, 'mcp session ended');
    await session.transport.close().catch(() => undefined);
    await session.server.close().catch(() => undefined);
  }

  const isIdle = (s: McpSession, at: number) => s.openStreams === 0 && at - s.lastSeenAt >= idleMs;
  // Sweeps idle sessions (shared: only this process's copy; the record expires by itself) and keeps the
  // records of open streams alive. Unref'd so it never holds the process open.
  const sweeper = setInterval(
    () => {
      const at = now();
      for (const s of sessions.values()) if (isIdle(s, at)) void end(s.id, 'idle');
      const streaming = [...sessions.values()].filter((s) => s.openStreams > 0).map((s) => s.id);
      if (shared && streaming.length > 0) shared.store.refresh(streaming).catch((err: unknown) => log.warn({ err }, 'mcp session records not refreshed'));
    },
    Math.max(250, Math.min(Math.floor(idleMs / 2), 30_000)),
  );
  sweeper.unref();

  let closed = false;
  async function get(id: string): Promise<McpSession | undefined> {
    // A closed registry (shutdown) rebuilds nothing: the session lives on in the store for the other processes.
    if (!shared || closed) return sessions.get(id);
    const record = await shared.store.touch(id);
    if (!record) {
      await end(id, 'expired');
      return undefined;
    }
    const local = sessions.get(id);
    if (local) return local;
    let pending = rebuilding.get(id);
    if (!pending) {
      pending = shared.rebuild(record).then((session) => {
        session.confirmed = record.confirmed;
        sessions.set(id, session);
        log.info({ sessionId: id, agentId: session.agentId }, 'mcp session rebuilt from the shared store');
        return session;
      });
      rebuilding.set(id, pending);
      void pending.finally(() => rebuilding.delete(id)).catch(() => undefined);
    }
    return pending;
  }

  return {
    get,
    async makeRoom(grantKey) {
      const mine = shared ? await shared.store.ofGrant(grantKey) : ofGrant(grantKey);
      if (mine.length < maxPerGrant) return true;
      const lastSeen = (s: (typeof mine)[number]) => ('ttlMs' in s ? s.ttlMs : s.lastSeenAt);
      const unconfirmed = mine.filter((s) => !s.confirmed).sort((a, b) => lastSeen(a) - lastSeen(b))[0];
      if (!unconfirmed) return false;
      await end(unconfirmed.id, 'evicted');
      if (shared && !sessions.has(unconfirmed.id)) await shared.store.remove(unconfirmed);
      return true;
    },
    async retryAfterSeconds(grantKey) {
      const at = now();
      const soonest = shared
        ? Math.min(...(await shared.store.ofGrant(grantKey)).map((s) => s.ttlMs))
        : Math.min(...ofGrant(grantKey).map((s) => (s.openStreams > 0 ? idleMs : s.lastSeenAt + idleMs - at)));
      return Math.max(1, Math.ceil((Number.isFinite(soonest) ? soonest : idleMs) / 1000));
    },
    async add(session, initialize) {
      sessions.set(session.id, session);
      if (shared) {
        await shared.store.save({
          id: session.id,
          grantKey: session.grantKey,
          agentId: session.agentId,
          walletId: session.walletId,
          initialize,
          confirmed: false,
          createdAt: now(),
          subscription: null,
        });
      }
    },
    async confirm(session) {
      session.lastSeenAt = now();
      if (session.confirmed) return;
      session.confirmed = true;
      if (shared) await shared.store.confirm(session.id);
    },
    end,
    all: () => [...sessions.values()],
    async close() {
      closed = true;
      clearInterval(sweeper);
      await Promise.all([...sessions.keys()].map((id) => end(id, 'shutdown')));
    },
  };
}
