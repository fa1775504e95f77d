// OAuth bearer verification for /v1/agent and /mcp: JWT checks, grant liveness, then the agent's own state (layer two).
import { createRequire } from 'node:module';
import type * as Jose from 'jose';
import type { JWTPayload } from 'jose';
import type { Config } from '../config.js';
import type { Db } from '../db/knex.js';
import { findAuthRow } from '../db/repositories/agent.repository.js';
import { snapshotOf } from './api-key.js';
import { findLiveGrantBinding, touchGrant } from '../db/repositories/oauth.repository.js';
import type { Clock } from '../lib/clock.js';
import { ApiError } from '../lib/errors.js';
import { loadPublicJwks, SIGNING_ALG } from './signing-keys.js';
import { assertAgentActive } from './api-key.js';
import type { AgentSnapshot, Principal } from './principal.js';

/** jose loads on first use (the first bearer token or key operation), not at start: ~0.8 MB of heap. */
const jose = ((load) => () => load('jose') as typeof Jose)(createRequire(import.meta.url));

export type BearerResource = 'agent' | 'mcp';

export const resourceUrl = (baseUrl: string, resource: BearerResource): string => `${baseUrl}/${resource === 'agent' ? 'v1/agent' : 'mcp'}`;

export const resourceMetadataUrl = (baseUrl: string, resource: BearerResource): string =>
  `${baseUrl}/.well-known/oauth-protected-resource/${resource === 'agent' ? 'v1/agent' : 'mcp'}`;

/** The challenge of contract §2; with no error (no token sent) only resource_metadata is given (RFC 6750 §3). */
export function buildWwwAuthenticate(baseUrl: string, resource: BearerResource, error?: 'invalid_token' | 'insufficient_scope' | 'invalid_request', scope?: string): string {
  const parts = [`resource_metadata="${resourceMetadataUrl(baseUrl, resource)}"`];
  if (error) parts.push(`error="${error}"`);
  if (scope) parts.push(`scope="${scope}"`);
  return `Bearer ${parts.join(', ')}`;
}

/** The one verifier of access tokens; its principal always carries the agent as read (layer two passed). */
export interface BearerVerifier {
  verify(token: string, resource: BearerResource): Promise<Principal & { snapshot: AgentSnapshot }>;
}

/** Tolerated clock skew between the authorization server and this verifier for `iat`. */
const IAT_SKEW_S = 300;

/** Unknown kids reload the key set at most this often (a rotation in another process becomes visible). */
const KEY_RELOAD_MS = 1000;

export function createBearerVerifier(deps: { config: Readonly<Config>; db: Db; clock: Clock }): BearerVerifier {
  const { config, db, clock } = deps;
  let keySet: ReturnType<typeof Jose.createLocalJWKSet> | null = null;
  let kids = new Set<string>();
  let loadedAt = -Infinity;
  let loading: Promise<void> | null = null;

  async function reloadKeys(): Promise<void> {
    loading ??= (async () => {
      try {
        const jwks = await loadPublicJwks(db);
        keySet = jose().createLocalJWKSet({ keys: jwks });
        kids = new Set(jwks.map((k) => k.kid as string));
        loadedAt = Date.now();
      } finally {
        loading = null;
      }
    })();
    await loading;
  }

  async function keysFor(kid: string | undefined) {
    // Wall time here, not the injectable clock: this is a cache refresh, not a business rule.
    if (!keySet || (kid !== undefined && !kids.has(kid) && Date.now() - loadedAt >= KEY_RELOAD_MS)) await reloadKeys();
    return keySet!;
  }

  const invalid = (resource: BearerResource, message: string) =>
    new ApiError('invalid_token', message, undefined, { headers: { 'WWW-Authenticate': buildWwwAuthenticate(config.baseUrl, resource, 'invalid_token') } });

  return {
    async verify(token, resource) {
      const audience = resourceUrl(config.baseUrl, resource);
      let payload: JWTPayload;
      try {
        const header = JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: unknown };
        const jwks = await keysFor(typeof header.kid === 'string' ? header.kid : undefined);
        ({ payload } = await jose().jwtVerify(token, jwks, {
          issuer: config.baseUrl,
          audience,
          typ: 'at+jwt',
          algorithms: [SIGNING_ALG],
          currentDate: clock.now(),
          requiredClaims: ['exp', 'iat', 'sub', 'jti'],
        }));
      } catch {
        throw invalid(resource, 'The access token is invalid, expired or not meant for this resource.');
      }
      // Our tokens are issued "now": one dated in the future (beyond clock skew) was not minted by this server.
      if (typeof payload.iat !== 'number' || payload.iat > clock.now().getTime() / 1000 + IAT_SKEW_S) throw invalid(resource, 'The access token is dated in the future.');
      // A token carries exactly one audience: ours.
      if (Array.isArray(payload.aud) && payload.aud.length !== 1) throw invalid(resource, 'The access token has more than one audience.');
      const grantId = payload.gid;
      if (typeof grantId !== 'string' || typeof payload.sub !== 'string') throw invalid(resource, 'The access token does not name its grant.');

      // Access tokens are not stored, so revocation reaches them through their grant: one lookup per request.
      const grant = await findLiveGrantBinding(db, grantId, clock.now());
      if (!grant || grant.agent_id !== payload.sub || grant.resource !== audience) throw invalid(resource, 'The grant behind this access token has been revoked.');
      await touchGrant(db, grantId, clock.now());

      const row = await findAuthRow(db, grant.agent_id);
      if (!row || !row.owner_exists || row.owner_deleted_at || row.agent.owner_id !== grant.owner_id) {
        throw invalid(resource, 'The access token refers to an agent that no longer exists.');
      }
      assertAgentActive(row, clock.now());

      const scope = typeof payload.scope === 'string' ? payload.scope : '';
      return {
        agentId: row.agent.id,
        walletId: row.wallet_id,
        ownerId: row.agent.owner_id,
        agentName: row.agent.name,
        method: 'oauth',
        scopes: new Set(scope.split(' ').filter((s) => s !== '')),
        clientId: typeof payload.client_id === 'string' ? payload.client_id : null,
        grantId,
        snapshot: snapshotOf(row),
      };
    },
  };
}
