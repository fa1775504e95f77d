// The owner's side: owner API tokens (shown once, stored as SHA-256), which agents an owner may see
// (another owner's ids are not_found, never forbidden), the owner views of agents, and the audit log.
import { randomBytes } from 'node:crypto';
import type { Db } from '../db/knex.js';
import { findOwner } from '../db/repositories/agent.repository.js';
import * as repo from '../db/repositories/owner.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Schema } from '../lib/contract.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import type { AccountService } from './defi/account.service.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';

export const OWNER_TOKEN_PREFIX = 'owt_';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export interface OwnerSession {
  sessionId: string;
  ownerId: string;
  email: string;
  csrfToken: string;
}

/** Who acts on the owner API: an owner (token or console session) or the operator (admin token). */
export interface OwnerActor {
  kind: 'owner' | 'admin';
  /** The owner acted for; null for the admin token, which sees every owner. */
  ownerId: string | null;
  tokenId: string | null;
  clientAddress: string | null;
  requestId: string | null;
}

export type OwnedKind = 'trusted_destination' | 'webhook_endpoint' | 'oauth_grant' | 'one_off_payment';

export interface LiveAgent {
  id: string;
  owner_id: string;
  wallet_id: string;
}

export type OwnerAgentView = Schema<'OwnerAgent'>;
export type AuditEntryView = Schema<'AuditEntry'>;
/** The page query of the owner lists, as the document gives it. */
export interface OwnerPageQuery {
  cursor?: string;
  limit?: number;
}
export type OwnerSummaryView = Schema<'OwnerSummary'>;

export interface OwnerService {
  createToken(db: Db, ownerId: string, label?: string | null): Promise<{ owner_id: string; token: string; token_id: string }>;
  /** The owner a token belongs to, or undefined (unknown, revoked, or its owner deleted). */
  authenticateToken(db: Db, token: string): Promise<{ ownerId: string; tokenId: string } | undefined>;
  /** A console session for a signed-in owner: the cookie token (shown once) and its CSRF token. */
  createSession(db: Db, ownerId: string): Promise<{ token: string; csrfToken: string; expiresAt: Date }>;
  authenticateSession(db: Db, token: string): Promise<OwnerSession | undefined>;
  endSession(db: Db, sessionId: string): Promise<void>;
  /** A live agent the actor may see; not_found otherwise (also for another owner's agent). */
  requireAgent(db: Db, actor: OwnerActor, agentId: string): Promise<LiveAgent>;
  /** The live agent a resource belongs to, when the actor may see it; not_found otherwise. */
  requireOwned(db: Db, actor: OwnerActor, kind: OwnedKind, id: string): Promise<LiveAgent>;
  /** The owner an action is recorded under: the actor's own, or (admin) the one named. */
  resolveOwner(db: Db, actor: OwnerActor, requested: string | undefined): Promise<string>;
  /** The actor's agents; `owner_id` narrows the admin token's list to one owner (an owner may name only itself). */
  listAgents(db: Db, actor: OwnerActor, query: OwnerPageQuery & { owner_id?: string }): Promise<ListPage<OwnerAgentView>>;
  /** Every live owner with its live agents' count (the operator's list; the route is admin-only). */
  listOwners(db: Db, query: OwnerPageQuery): Promise<ListPage<OwnerSummaryView>>;
  getAgent(db: Db, actor: OwnerActor, agentId: string): Promise<OwnerAgentView>;
  deleteAgent(db: Db, actor: OwnerActor, agentId: string): Promise<void>;
  listEndpoints(db: Db, actor: OwnerActor, query: OwnerPageQuery): Promise<ListPage<OwnerEndpointView>>;
  audit(db: Db, entry: { ownerId: string; actor: OwnerActor | 'system'; action: string; targetType?: string | null; targetId?: string | null; details?: Record<string, unknown> }): Promise<void>;
  listAudit(db: Db, actor: OwnerActor, query: OwnerPageQuery & { since?: string }): Promise<ListPage<AuditEntryView>>;
}

const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
const isUuid = (v: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v);
const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

/** An endpoint in the owner's list (no named schema: the document answers OwnerResult). */
export interface OwnerEndpointView {
  id: string;
  agent_id: string;
  agent_name: string;
  url: string;
  description: string;
  event_types: string[];
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  last_delivered_at: string | null;
  last_failure_at: string | null;
  /** The newest failed attempt's error class (or `http_<status>`) while the endpoint is failing. */
  last_error: string | null;
  created_at: string | null;
}

export function createOwnerService(deps: { clock: Clock; account: AccountService }): OwnerService {
  const { clock } = deps;

  const visible = (actor: OwnerActor, ownerId: string) => actor.kind === 'admin' || actor.ownerId === ownerId;

  function agentStatus(a: { enabled: boolean; starts_at: Date | null; ends_at: Date | null }, now: Date): OwnerAgentView['status'] {
    if (!a.enabled) return 'disabled';
    if (a.starts_at && now < new Date(a.starts_at)) return 'not_yet_active';
    if (a.ends_at && now >= new Date(a.ends_at)) return 'expired';
    return 'active';
  }

  async function agentView(db: Db, a: Awaited<ReturnType<typeof repo.findLiveAgent>> & object): Promise<OwnerAgentView> {
    const balances = await deps.account.listBalances(db, { agentId: a.id, walletId: a.wallet_id }, { limit: 100 });
    return {
      agent_id: a.id,
      owner_id: a.owner_id,
      name: a.name,
      enabled: a.enabled,
      status: agentStatus(a, clock.now()),
      starts_at: iso(a.starts_at),
      ends_at: iso(a.ends_at),
      wallet_id: a.wallet_id,
      wallet_address: a.wallet_address,
      api_key_prefix: a.api_key_prefix,
      created_at: iso(a.created_at)!,
      balances: balances.items.filter((b) => b.total !== '0').map((b) => ({ asset: b.asset_symbol as string, amount: b.total as string })),
    };
  }

  const service: OwnerService = {
    async createToken(db, ownerId, label) {
      const owner = isUuid(ownerId) ? await findOwner(db, ownerId) : undefined;
      if (!owner || owner.deleted_at) throw notFound('owner');
      const token = `${OWNER_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
      const id = newId();
      await repo.insertOwnerToken(db, { id, owner_id: ownerId, token_hash: sha256Hex(token), token_prefix: token.slice(0, 12), label: label ?? null, created_at: clock.now() });
      return { owner_id: ownerId, token, token_id: id };
    },

    async authenticateToken(db, token) {
      if (!token.startsWith(OWNER_TOKEN_PREFIX)) return undefined;
      const row = await repo.findLiveOwnerToken(db, sha256Hex(token));
      if (!row) return undefined;
      await repo.touchOwnerToken(db, row.id, clock.now());
      return { ownerId: row.owner_id, tokenId: row.id };
    },

    async createSession(db, ownerId) {
      const token = randomBytes(32).toString('base64url');
      const csrfToken = randomBytes(24).toString('base64url');
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
      await repo.insertOwnerSession(db, { id: newId(), owner_id: ownerId, token_hash: sha256Hex(token), csrf_token: csrfToken, created_at: now, expires_at: expiresAt });
      return { token, csrfToken, expiresAt };
    },

    async authenticateSession(db, token) {
      const row = await repo.findLiveOwnerSession(db, sha256Hex(token), clock.now());
      return row ? { sessionId: row.id, ownerId: row.owner_id, email: row.email, csrfToken: row.csrf_token } : undefined;
    },

    async endSession(db, sessionId) {
      await repo.revokeOwnerSession(db, sessionId, clock.now());
    },

    async requireAgent(db, actor, agentId) {
      const agent = isUuid(agentId) ? await repo.findLiveAgent(db, agentId) : undefined;
      if (!agent || !visible(actor, agent.owner_id)) throw notFound('agent');
      return { id: agent.id, owner_id: agent.owner_id, wallet_id: agent.wallet_id };
    },

    async requireOwned(db, actor, kind, id) {
      const what = kind.replace('_', ' ');
      const agentId = kind === 'oauth_grant' || isUuid(id) ? await repo.findAgentIdOf(db, kind, id) : null;
      if (!agentId) throw notFound(what);
      const agent = await repo.findLiveAgent(db, agentId);
      if (!agent || !visible(actor, agent.owner_id)) throw notFound(what);
      return { id: agent.id, owner_id: agent.owner_id, wallet_id: agent.wallet_id };
    },

    async resolveOwner(db, actor, requested) {
      if (actor.kind === 'owner') {
        if (requested !== undefined && requested !== actor.ownerId) throw notFound('owner');
        return actor.ownerId!;
      }
      if (requested === undefined)
        throw new ApiError('validation_failed', 'owner_id is required with the admin token', { errors: [{ location: 'body', path: '/owner_id', message: 'is required with the admin token' }] });
      const owner = await findOwner(db, requested);
      if (!owner || owner.deleted_at) throw notFound('owner');
      return requested;
    },

    async listAgents(db, actor, query) {
      const limit = pageLimit(query.limit);
      if (query.owner_id !== undefined && actor.ownerId !== null && query.owner_id !== actor.ownerId) throw notFound('owner');
      const rows = await repo.listLiveAgents(db, actor.ownerId ?? query.owner_id ?? null, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(
        rows,
        limit,
        (r) => r,
        (r) => encodeKeyset(r),
      );
      const items = [];
      for (const row of page.items) items.push(await agentView(db, row));
      return { ...page, items };
    },

    async listOwners(db, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listLiveOwners(db, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(
        rows,
        limit,
        (r) => ({ owner_id: r.id, email: r.email, name: r.name, agent_count: Number(r.agent_count), created_at: iso(r.created_at)! }),
        (r) => encodeKeyset(r),
      );
    },

    async getAgent(db, actor, agentId) {
      await service.requireAgent(db, actor, agentId);
      return agentView(db, (await repo.findLiveAgent(db, agentId))!);
    },

    async deleteAgent(db, actor, agentId) {
      await service.requireAgent(db, actor, agentId);
      await repo.softDeleteAgent(db, agentId, clock.now());
    },

    async listEndpoints(db, actor, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listEndpointsOfOwner(db, actor.ownerId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(
        rows,
        limit,
        (r) => ({
          id: r.id,
          agent_id: r.agent_id,
          agent_name: r.agent_name,
          url: r.url,
          description: r.description ?? '',
          event_types: r.event_types,
          enabled: r.enabled,
          disabled_reason: r.disabled_reason,
          consecutive_failures: r.consecutive_failures,
          failing_since: iso(r.failing_since),
          last_delivered_at: iso(r.last_delivered_at),
          last_failure_at: iso(r.last_failure_at),
          last_error: (r as { last_error?: string | null }).last_error ?? null,
          created_at: iso(r.created_at),
        }),
        (r) => encodeKeyset(r),
      );
    },

    async audit(db, entry) {
      const actor = entry.actor === 'system' ? null : entry.actor;
      await repo.insertAudit(db, {
        id: newId(),
        owner_id: entry.ownerId,
        actor: actor?.kind ?? 'system',
        actor_token_id: actor?.tokenId ?? null,
        action: entry.action,
        target_type: entry.targetType ?? null,
        target_id: entry.targetId ?? null,
        details: entry.details ?? {},
        client_address: actor?.clientAddress ?? null,
        request_id: actor?.requestId ?? null,
        created_at: clock.now(),
      });
    },

    async listAudit(db, actor, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listAudit(db, actor.ownerId, { before: decodeKeyset(query.cursor), since: query.since ? new Date(query.since) : undefined, limit: limit + 1 });
      return toPage(
        rows,
        limit,
        (r) => ({
          id: r.id,
          owner_id: r.owner_id,
          actor: r.actor as AuditEntryView['actor'],
          action: r.action,
          target_type: r.target_type,
          target_id: r.target_id,
          // The document declares `details` an object without listing its fields.
          details: (typeof r.details === 'string' ? JSON.parse(r.details) : r.details) as AuditEntryView['details'],
          client_address: r.client_address,
          request_id: r.request_id,
          created_at: iso(r.created_at)!,
        }),
        (r) => encodeKeyset(r),
      );
    },
  };
  return service;
}
