// OAuth business rules outside oidc-provider: out-of-band clients, key rotation, grants, connect-page codes, throttles.
import { createHmac, randomBytes, randomInt, randomUUID } from 'node:crypto';
import { withTransaction } from '../db/knex.js';
import { listAgentsByOwner } from '../db/repositories/agent.repository.js';
import * as repo from '../db/repositories/oauth.repository.js';
import { ALL_SCOPES } from '../auth/principal.js';
import type { Clock } from '../lib/clock.js';
import { constantTimeEqual, sha256Hex, type Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import { revokeGrantEverywhere } from './adapter.js';
import { rotateSigningKeys } from './keys.js';
import type { LoginCodeMailer } from './mailer.js';
import type { OAuthService } from '../services/oauth.types.js';

export const LOGIN_CODE_TTL_MS = 10 * 60 * 1000;
export const LOGIN_CODE_MAX_ATTEMPTS = 5;
/** Contract §15: one-time codes 10 per e-mail per 10 minutes; /oauth/reg 20 per minute per address. */
export const CODE_THROTTLE = { limit: 10, windowMs: 10 * 60 * 1000 };
export const REGISTRATION_THROTTLE = { limit: 20, windowMs: 60 * 1000 };

export class OAuthInputError extends Error {}

export type { CodeCheck, GrantSummary, OAuthService, ThrottleDecision } from '../services/oauth.types.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Redirect URIs must be https, or http on a loopback host (RFC 8252); no fragments. */
export function redirectUriProblem(uri: unknown): string | null {
  if (typeof uri !== 'string' || uri.length > 2000) return 'redirect_uris must be strings of at most 2000 characters';
  const parsed = URL.parse(uri);
  if (!parsed) return `${uri} is not a URL`;
  if (parsed.hash) return `${uri} must not contain a fragment`;
  if (parsed.protocol === 'https:') return null;
  if (parsed.protocol === 'http:' && LOOPBACK_HOSTS.has(parsed.hostname)) return null;
  return `${uri} must use https, or http on a loopback host`;
}

export const normaliseEmail = (email: string): string => email.trim().toLowerCase();
// No whitespace, no control characters (U+0000 cannot even be stored).
const EMAIL_PATTERN = /^[^\s@\u0000-\u001f\u007f]+@[^\s@\u0000-\u001f\u007f]+\.[^\s@\u0000-\u001f\u007f]+$/;
export const isPlausibleEmail = (email: string): boolean => email.length <= 254 && EMAIL_PATTERN.test(email);

/**
 * `nodeEnv`: outside production an unknown e-mail at sign-in is logged (a newcomer mistyping the demo owner's address
 * sees why no code came); in production it never is, so the log does not collect who tried which address.
 */
export function createOAuthService(deps: { clock: Clock; sealer: Sealer; masterKey: string; mailer: LoginCodeMailer; log: Logger; nodeEnv?: 'production' | 'development' | 'test' }): OAuthService {
  const { clock, sealer, mailer, log } = deps;
  const codeKey = createHmac('sha256', deps.masterKey).update('agent-api:oauth:login-code').digest();
  const hashCode = (uid: string, code: string) => createHmac('sha256', codeKey).update(`${uid}:${code}`).digest('hex');

  const service: OAuthService = {
    async addClient(db, input) {
      const name = input.name.trim();
      if (name === '' || name.length > 200) throw new OAuthInputError('--name must be 1 to 200 characters');
      if (input.redirectUris.length === 0 || input.redirectUris.length > 10) throw new OAuthInputError('give 1 to 10 redirect URIs');
      for (const uri of input.redirectUris) {
        const problem = redirectUriProblem(uri);
        if (problem) throw new OAuthInputError(problem);
      }
      const clientId = randomBytes(18).toString('base64url');
      // The same metadata a default dynamic registration produces (public client, code + refresh).
      await repo.upsertModel(db, {
        model: 'Client',
        id: clientId,
        payload: {
          client_id: clientId,
          client_id_issued_at: Math.floor(clock.now().getTime() / 1000),
          client_name: name,
          redirect_uris: input.redirectUris,
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
          application_type: 'web',
        },
        grant_id: null,
        uid: null,
        user_code: null,
        expires_at: null,
      });
      return { client_id: clientId };
    },

    rotateKeys: (db) => rotateSigningKeys(db, sealer, clock),

    async listGrants(db, ownerId) {
      const rows = await repo.listGrantsByOwner(db, ownerId);
      return rows.map((g) => ({
        grant_id: g.id,
        client_id: g.client_id,
        client_name: g.client_name,
        agent_id: g.agent_id,
        agent_name: g.agent_name,
        resource: g.resource,
        scope: g.scope.split(' ').filter((s) => s !== ''),
        status: g.revoked_at ? 'revoked' : 'active',
        created_at: new Date(g.created_at).toISOString(),
        revoked_at: g.revoked_at ? new Date(g.revoked_at).toISOString() : null,
        revoked_reason: g.revoked_reason,
        last_used_at: g.last_used_at ? new Date(g.last_used_at).toISOString() : null,
      }));
    },

    async revokeGrant(db, grantId) {
      if (!(await repo.findGrantBinding(db, grantId))) throw new OAuthInputError(`grant ${grantId} not found`);
      const revoked = await revokeGrantEverywhere(db, grantId, clock.now(), 'owner');
      return { grant_id: grantId, revoked };
    },

    async throttle(db, key, rule) {
      const now = clock.now().getTime();
      const windowStart = Math.floor(now / rule.windowMs) * rule.windowMs;
      const count = await repo.hitThrottle(db, key, new Date(windowStart));
      return { allowed: count <= rule.limit, retryAfterSeconds: Math.max(1, Math.ceil((windowStart + rule.windowMs - now) / 1000)) };
    },

    async requestLoginCode(db, input) {
      const email = normaliseEmail(input.email);
      const decision = await service.throttle(db, `code:${sha256Hex(email)}`, CODE_THROTTLE);
      if (!decision.allowed) return { throttled: true };
      const ownerId = await repo.findLiveOwnerIdByEmail(db, email);
      const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
      const now = clock.now();
      await repo.insertLoginCode(db, {
        id: randomUUID(),
        interaction_uid: input.interactionUid,
        email_hash: sha256Hex(email),
        // An unknown address gets a row too, whose code can never verify: the page looks the same either way.
        owner_id: ownerId ?? null,
        code_hash: hashCode(input.interactionUid, code),
        expires_at: new Date(now.getTime() + LOGIN_CODE_TTL_MS),
        created_at: now,
      });
      if (ownerId) {
        // Not awaited, so the response time does not tell whether the address has an account.
        mailer.sendLoginCode(email, code, { clientName: input.clientName }).catch((err: unknown) => log.error({ err }, 'sending the one-time code failed'));
      } else if (deps.nodeEnv !== undefined && deps.nodeEnv !== 'production') {
        log.warn({ email }, 'sign-in with an e-mail no owner has: no code was sent (the demo owner is demo@example.com)');
      }
      return { throttled: false };
    },

    async verifyLoginCode(db, input) {
      const latest = await repo.findLatestLoginCode(db, input.interactionUid);
      if (!latest) return { ok: false, reason: 'no_code', attemptsLeft: 0 };
      const now = clock.now();
      const spent = await repo.spendLoginCodeAttempt(db, latest.id, LOGIN_CODE_MAX_ATTEMPTS, now);
      if (!spent) {
        const reason = new Date(latest.expires_at) <= now ? 'expired' : 'locked';
        return { ok: false, reason, attemptsLeft: 0 };
      }
      const attemptsLeft = LOGIN_CODE_MAX_ATTEMPTS - spent.attempts;
      const candidate = /^\d{6}$/.test(input.code.trim()) ? input.code.trim() : '';
      if (!constantTimeEqual(hashCode(input.interactionUid, candidate), spent.code_hash) || !spent.owner_id) {
        return { ok: false, reason: attemptsLeft > 0 ? 'invalid' : 'locked', attemptsLeft };
      }
      if (!(await repo.markLoginCodeVerified(db, spent.id, now))) return { ok: false, reason: 'invalid', attemptsLeft };
      return { ok: true, ownerId: spent.owner_id };
    },

    async signedInOwner(db, interactionUid) {
      const latest = await repo.findLatestLoginCode(db, interactionUid);
      return latest?.verified_at && latest.owner_id ? latest.owner_id : undefined;
    },

    async bindGrant(db, input) {
      const unknown = input.scopes.filter((s) => !(ALL_SCOPES as readonly string[]).includes(s));
      if (unknown.length > 0) throw new OAuthInputError(`unknown scopes: ${unknown.join(' ')}`);
      await withTransaction(db, async (trx) => {
        await repo.insertGrantBinding(trx, {
          id: input.grantId,
          client_id: input.clientId,
          owner_id: input.ownerId,
          agent_id: input.agentId,
          resource: input.resource,
          scope: input.scopes.join(' '),
          created_at: clock.now(),
        });
      });
    },

    async ownerAgents(db, ownerId) {
      return (await listAgentsByOwner(db, ownerId)).map((a) => ({ id: a.id, name: a.name, enabled: a.enabled }));
    },
  };
  return service;
}
