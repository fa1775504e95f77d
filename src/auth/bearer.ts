// OAuth bearer verification for /v1/agent and /mcp: JWT checks, grant liveness, then the agent's own state (layer two).
// Tokens are verified with jsonwebtoken against keys that jwks-rsa serves from the authorization server's JWKS, so an
// API process can run apart from the authorization server (OAUTH_JWKS_URI) and still follow its key rotations.
import { createRequire } from 'node:module';
import type * as JsonWebToken from 'jsonwebtoken';
import type { JwtPayload } from 'jsonwebtoken';
import type JwksRsa from 'jwks-rsa';
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

export type BearerResource = 'agent' | 'mcp';

export const resourceUrl = (baseUrl: string, resource: BearerResource): string => `${baseUrl}/${resource === 'agent' ? 'v1/agent' : 'mcp'}`;

export const resourceMetadataUrl = (baseUrl: string, resource: BearerResource): string => `${baseUrl}/.well-known/oauth-protected-resource/${resource === 'agent' ? 'v1/agent' : 'mcp'}`;

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

/** jsonwebtoken and jwks-rsa (which loads jose) load at the first bearer token, not at start (the start-up footprint). */
const load = createRequire(import.meta.url);
const jwt = () => load('jsonwebtoken') as typeof JsonWebToken;
const jwksRsa = () => load('jwks-rsa') as typeof JwksRsa;

/**
 * Key-set fetches on unknown kids, at most this many a minute (jwks-rsa's limiter): a rotation on the authorization
 * server is seen at the first token signed with the new key, and a flood of made-up kids cannot flood the JWKS.
 */
const JWKS_REQUESTS_PER_MINUTE = 30;
/** How long a fetched key is trusted before it is fetched again (a retired key stops verifying within this). */
const JWKS_CACHE_MAX_AGE_MS = 60_000;

class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

/** What the token itself got wrong (jsonwebtoken's and jwks-rsa's names), as opposed to keys that cannot be read. */
const TOKEN_PROBLEMS = new Set(['InvalidTokenError', 'JsonWebTokenError', 'TokenExpiredError', 'NotBeforeError', 'SigningKeyNotFoundError', 'JwksRateLimitError']);
const isTokenProblem = (err: unknown): boolean => err instanceof Error && TOKEN_PROBLEMS.has(err.name);

/** The access-token types RFC 9068 allows in the header (`typ`), compared case-insensitively. */
const ACCESS_TOKEN_TYPES = new Set(['at+jwt', 'application/at+jwt']);

/**
 * The key source: the authorization server's `jwks_uri` over HTTP when configured (OAUTH_JWKS_URI, an API process
 * apart from it); else this process is the authorization server, and jwks-rsa's fetcher reads the very key set
 * `/oauth/jwks` serves (public halves only) from the database, with the same cache and rate limit.
 */
export function createJwksClient(deps: { config: Readonly<Config>; db: Db }): JwksRsa.JwksClient {
  const common = { cache: true, cacheMaxAge: JWKS_CACHE_MAX_AGE_MS, rateLimit: true, jwksRequestsPerMinute: JWKS_REQUESTS_PER_MINUTE, timeout: 5_000 };
  if (deps.config.oauthJwksUri) return jwksRsa()({ ...common, jwksUri: deps.config.oauthJwksUri });
  return jwksRsa()({ ...common, jwksUri: `${deps.config.baseUrl}/oauth/jwks`, fetcher: async () => ({ keys: await loadPublicJwks(deps.db) }) });
}

export function createBearerVerifier(deps: { config: Readonly<Config>; db: Db; clock: Clock }): BearerVerifier {
  const { config, db, clock } = deps;
  let jwksClient: JwksRsa.JwksClient | null = null;
  const jwks = () => (jwksClient ??= createJwksClient({ config, db }));

  async function verifyJwt(token: string, audience: string): Promise<JwtPayload> {
    const decoded = jwt().decode(token, { complete: true });
    if (!decoded || typeof decoded.payload === 'string') throw new InvalidTokenError('not a JWT');
    if (typeof decoded.header.typ !== 'string' || !ACCESS_TOKEN_TYPES.has(decoded.header.typ.toLowerCase())) throw new InvalidTokenError('not an access token');
    if (typeof decoded.header.kid !== 'string') throw new InvalidTokenError('no kid');
    const key = await jwks().getSigningKey(decoded.header.kid);
    const payload = jwt().verify(token, key.getPublicKey(), {
      algorithms: [SIGNING_ALG],
      issuer: config.baseUrl,
      audience,
      clockTimestamp: Math.floor(clock.now().getTime() / 1000),
    });
    if (typeof payload === 'string') throw new InvalidTokenError('not a JWT payload');
    for (const claim of ['exp', 'iat', 'sub', 'jti'] as const) if (payload[claim] === undefined) throw new InvalidTokenError(`missing ${claim}`);
    return payload;
  }

  const invalid = (resource: BearerResource, message: string) =>
    new ApiError('invalid_token', message, undefined, { headers: { 'WWW-Authenticate': buildWwwAuthenticate(config.baseUrl, resource, 'invalid_token') } });

  return {
    async verify(token, resource) {
      const audience = resourceUrl(config.baseUrl, resource);
      let payload: JwtPayload;
      try {
        payload = await verifyJwt(token, audience);
      } catch (err) {
        // The key set could not be fetched (the authorization server or the database is down): an outage, not a bad token.
        if (!isTokenProblem(err)) throw new ApiError('service_unavailable', "The authorization server's keys cannot be read right now; retry shortly.");
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
