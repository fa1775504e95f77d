// The authorization server: oidc-provider 9 configured to spec 5.2, mounted in Express with discovery and /connect.
import { createHmac } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { createRequire } from 'node:module';
import type Provider from 'oidc-provider';
import type * as Oidc from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type * as Jose from 'jose';
import { ALL_SCOPES } from '../auth/principal.js';
import { resourceUrl } from '../auth/bearer.js';
import { listSigningKeys } from '../db/repositories/oauth.repository.js';
import type { Sealer } from '../lib/crypto.js';
import { createAdapterClass, revokeGrantEverywhere } from './adapter.js';
import { createConnectRouter } from './connect.js';
import { escapeHtml, securityHeaders } from './html.js';
import { loadSigningKeys, SIGNING_ALG, type SigningKey } from './keys.js';
import { REGISTRATION_THROTTLE, redirectUriProblem } from './oauth.service.js';
import type { OAuthDeps, OAuthRuntime } from './types.js';
import { clientAddress } from '../http/request.js';
import { MAX_BODY_DEPTH } from '../http/input-guard.js';
import { refuseDeepJson } from '../http/steps.js';

export type { OAuthDeps, OAuthRuntime } from './types.js';

/** Contract §12: access tokens live 15 minutes; refresh tokens expire after 30 idle days. */
export const ACCESS_TOKEN_TTL_S = 15 * 60;
export const REFRESH_TOKEN_TTL_S = 30 * 24 * 60 * 60;
const GRANT_TTL_S = 365 * 24 * 60 * 60;
const INTERACTION_TTL_S = 15 * 60;

const AS_METADATA_PATHS = new Set(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
/** Makes the validator below run for every registration and every stored client. */
const VALIDATION_MARKER = 'x_agent_api';
/** A rotation made by another process (agentctl) is picked up at most this long after it happens. */
const KEY_CHECK_MS = 1000;

/**
 * oidc-provider and its Koa stack (~3 MB of heap) load when the first OAuth request builds the provider, not
 * at start (synchronously: Node's require of an ES module, the same module instance an import would give).
 */
const loadOidc = (
  (load) => () =>
    load('oidc-provider') as typeof Oidc
)(createRequire(import.meta.url));
const loadJose = (
  (load) => () =>
    load('jose') as typeof Jose
)(createRequire(import.meta.url));

export function buildProvider(deps: OAuthDeps, keys: SigningKey[], sealer: Sealer): Provider {
  const { config, db, clock, log } = deps;
  const { default: OidcProvider, errors, interactionPolicy } = loadOidc();
  const resources = new Map(
    (['agent', 'mcp'] as const).map((r) => [
      resourceUrl(config.baseUrl, r),
      {
        scope: ALL_SCOPES.join(' '),
        audience: resourceUrl(config.baseUrl, r),
        accessTokenTTL: ACCESS_TOKEN_TTL_S,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: SIGNING_ALG, kid: keys[0]!.kid } },
      },
    ]),
  );

  const policy = interactionPolicy.base();
  // Consent (the agent choice) is asked on every authorization, even when an earlier grant would cover it.
  policy
    .get('consent')!
    .checks.add(
      new interactionPolicy.Check('agent_choice_required', 'the user picks an agent on every authorization', 'consent_required', (ctx: KoaContextWithOIDC) =>
        ctx.oidc.result?.consent ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );

  const cookieKey = (n: number) => createHmac('sha256', config.masterKey).update(`agent-api:oauth:cookies:${n}`).digest('base64url');

  const configuration: Configuration = {
    adapter: createAdapterClass({ db, clock, sealer }),
    jwks: { keys: keys.map((k) => k.privateJwk) },
    cookies: { keys: [cookieKey(1)], long: { httpOnly: true, sameSite: 'lax' }, short: { httpOnly: true, sameSite: 'lax' } },
    routes: {
      authorization: '/oauth/auth',
      token: '/oauth/token',
      registration: '/oauth/reg',
      revocation: '/oauth/token/revocation',
      jwks: '/oauth/jwks',
      userinfo: '/oauth/me',
      introspection: '/oauth/token/introspection',
      end_session: '/oauth/session/end',
      pushed_authorization_request: '/oauth/par',
      code_verification: '/oauth/device',
      device_authorization: '/oauth/device/auth',
      backchannel_authentication: '/oauth/backchannel',
      challenge: '/oauth/challenge',
      credential: '/oauth/credential',
    },
    scopes: ['openid'],
    responseTypes: ['code'],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: SIGNING_ALG,
    },
    extraClientMetadata: {
      properties: [VALIDATION_MARKER],
      validator(_ctx: unknown, key: string, _value: unknown, metadata: Record<string, unknown>) {
        if (key !== VALIDATION_MARKER) return;
        const uris = metadata.redirect_uris;
        if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10) throw new errors.InvalidRedirectUri('register 1 to 10 redirect_uris');
        for (const uri of uris) {
          const problem = redirectUriProblem(uri);
          if (problem) throw new errors.InvalidRedirectUri(problem);
        }
        // Metadata that would make the server fetch a client-supplied URL (SSRF) is not supported.
        for (const field of ['jwks_uri', 'sector_identifier_uri']) {
          if (metadata[field] !== undefined) throw new errors.InvalidClientMetadata(`${field} is not supported`);
        }
        for (const field of ['client_name', 'client_uri', 'logo_uri', 'policy_uri', 'tos_uri']) {
          const value = metadata[field];
          if (typeof value === 'string' && value.length > 2000) throw new errors.InvalidClientMetadata(`${field} is too long`);
        }
      },
    },
    // As documented (ClientRegistration.token_endpoint_auth_method): no JWT client authentication, whose keys would be fetched.
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    pkce: { required: () => true },
    allowOmittingSingleRegisteredRedirectUri: false,
    rotateRefreshToken: true,
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    // Only the grant made in this very interaction, so consent is never skipped and never loops.
    loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    extraTokenClaims: async (_ctx: unknown, token: { grantId?: string }) => (token.grantId ? { gid: token.grantId } : undefined),
    findAccount: async (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub }) }),
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      RefreshToken: REFRESH_TOKEN_TTL_S,
      Grant: GRANT_TTL_S,
      Interaction: INTERACTION_TTL_S,
      Session: 24 * 60 * 60,
      IdToken: 60 * 60,
    },
    interactions: { url: async (_ctx: unknown, interaction: { uid: string }) => `/connect/${interaction.uid}`, policy },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      revocation: {
        enabled: true,
        // A client revokes only its own tokens; another public client's attempt is ignored (RFC 7009 §2.1).
        allowedPolicy: async (_ctx: unknown, client: { clientId: string; clientAuthMethod: string }, token: { clientId: string }) => {
          if (token.clientId === client.clientId) return true;
          if (client.clientAuthMethod === 'none') return false;
          throw new errors.InvalidRequest('client is not authorized to revoke the presented token');
        },
      },
      userinfo: { enabled: false },
      introspection: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      dPoP: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx: unknown, _client: unknown, oneOf?: string | string[]) => {
          if (oneOf) return oneOf;
          throw new errors.InvalidTarget('the resource parameter is required');
        },
        useGrantedResource: async () => false,
        getResourceServerInfo: async (_ctx: unknown, indicator: string) => {
          const info = resources.get(indicator);
          if (!info) throw new errors.InvalidTarget(`resource must be ${[...resources.keys()].join(' or ')}`);
          return info;
        },
      },
    },
    renderError: async (ctx: KoaContextWithOIDC, out: Record<string, string>) => {
      for (const [name, value] of Object.entries(securityHeaders())) ctx.set(name, value);
      ctx.type = 'html';
      ctx.body = `<!doctype html><html><head><meta charset="utf-8"><title>Authorization error</title></head><body><h1>Authorization error</h1>${Object.entries(out)
        .map(([k, v]) => `<p><strong>${escapeHtml(k)}</strong>: ${escapeHtml(String(v))}</p>`)
        .join('')}</body></html>`;
    },
  };

  const provider = new OidcProvider(config.baseUrl, configuration);
  provider.proxy = config.trustProxy;

  // Discovery lists only static scopes; add the resource scopes the two resources accept.
  provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
    await next();
    if (AS_METADATA_PATHS.has(ctx.path) && ctx.status === 200 && ctx.body && typeof ctx.body === 'object') {
      ctx.body.scopes_supported = [...new Set([...(ctx.body.scopes_supported ?? []), ...ALL_SCOPES])];
    }
  });
  // JWT access tokens are not stored, so oidc-provider answers unsupported_token_type to their revocation.
  // The OpenAPI document promises a client can revoke its own access token: revoke its grant instead,
  // as the provider does for an opaque access token (RFC 7009 §2.1 allows revoking the related grant).
  const { createLocalJWKSet, jwtVerify } = loadJose();
  const publicKeys = createLocalJWKSet({ keys: keys.map((k) => k.publicJwk) });
  provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
    await next();
    if (ctx.oidc?.route !== 'revocation' || ctx.status !== 400 || ctx.body?.error !== 'unsupported_token_type' || !ctx.oidc.client) return;
    const token = String(ctx.oidc.params?.token ?? '');
    const options = { issuer: config.baseUrl, audience: [...resources.keys()], typ: 'at+jwt', algorithms: [SIGNING_ALG], currentDate: clock.now() };
    // An invalid or expired token has nothing to revoke (RFC 7009 §2.2 still answers 200).
    const payload = await jwtVerify(token, publicKeys, options).then(
      (r) => r.payload,
      () => null,
    );
    // A client revokes only its own tokens; another client's token is ignored like an unknown one.
    if (payload && payload.client_id === ctx.oidc.client.clientId && typeof payload.gid === 'string') {
      await revokeGrantEverywhere(db, payload.gid, clock.now(), 'client');
      log.info({ grantId: payload.gid, clientId: payload.client_id }, 'oauth grant revoked by its client');
    }
    ctx.status = 200;
    ctx.body = '';
  });
  provider.on('server_error', (_ctx: unknown, err: unknown) => log.error({ err }, 'oauth server error'));
  provider.on('grant.revoked', (_ctx: unknown, grantId: string) => log.info({ grantId }, 'oauth grant revoked'));
  return provider;
}

export function createOAuthRuntime(deps: OAuthDeps): OAuthRuntime {
  const { sealer } = deps;
  let current: { provider: Provider; kids: string } | null = null;
  let building: Promise<Provider> | null = null;
  let checkedAt = -Infinity;

  async function build(): Promise<Provider> {
    const keys = await loadSigningKeys(deps.db, sealer, deps.clock);
    const provider = buildProvider(deps, keys, sealer);
    current = { provider, kids: keys.map((k) => k.kid).join(',') };
    checkedAt = Date.now();
    return provider;
  }

  return {
    async provider() {
      if (building) return building;
      // Wall time: a cache refresh, not a business rule.
      if (current && Date.now() - checkedAt < KEY_CHECK_MS) return current.provider;
      building = (async () => {
        try {
          if (!current) return await build();
          const kids = (await listSigningKeys(deps.db)).map((k) => k.kid).join(',');
          checkedAt = Date.now();
          return kids === current.kids ? current.provider : await build();
        } finally {
          building = null;
        }
      })();
      return building;
    },
  };
}

/** RFC 9728 protected-resource metadata for one of our two resources. */
export function protectedResourceMetadata(baseUrl: string, resource: 'agent' | 'mcp') {
  return {
    resource: resourceUrl(baseUrl, resource),
    authorization_servers: [baseUrl],
    scopes_supported: [...ALL_SCOPES],
    bearer_methods_supported: ['header'],
    resource_signing_alg_values_supported: [SIGNING_ALG],
    resource_name: resource === 'agent' ? 'Agent API' : 'Agent API MCP server',
  };
}

/** oidc-provider's own cap on a request body (lib/shared/selective_body.js). */
const OAUTH_BODY_LIMIT_BYTES = 56 * 1024;
const oauthJsonReader = express.raw({ type: ['application/json', 'application/*+json'], limit: OAUTH_BODY_LIMIT_BYTES, verify: refuseDeepJson });

/**
 * A JSON body (client registration) is read here, as bytes, so that its nesting is counted before oidc-provider
 * parses and walks it (MAX_BODY_DEPTH, as on /v1/agent and /mcp); the provider then parses the Buffer left in
 * req.body (its documented fallback for a body read upstream, which it notes once on stderr). Form bodies are
 * flat (querystring) and stay the provider's to read. False when the refusal was sent.
 */
function readOAuthJsonBody(req: Request, res: Response): Promise<boolean> {
  if (req.method === 'GET' || req.method === 'HEAD' || !req.is(['application/json', 'application/*+json'])) return Promise.resolve(true);
  return new Promise((resolve) => {
    oauthJsonReader(req, res, (err?: unknown) => {
      if (!err) return resolve(true);
      const e = err as { type?: string; status?: number };
      const [status, description] =
        e.type === 'entity.too.deep'
          ? [400, `the request body nests objects and arrays more than ${MAX_BODY_DEPTH} levels deep`]
          : e.type === 'entity.too.large'
            ? [413, 'request entity too large']
            : [400, 'failed to parse the request body'];
      res.status(status).setHeader('Cache-Control', 'no-store');
      res.json({ error: 'invalid_request', error_description: description });
      resolve(false);
    });
  });
}

/**
 * Mounts /oauth/*, the two authorization-server discovery documents, the two RFC 9728 documents and
 * /connect/*. No body parser runs before the provider but readOAuthJsonBody's, which leaves it the raw bytes.
 */
export function mountOAuth(app: express.Express, deps: OAuthDeps): OAuthRuntime {
  const runtime = createOAuthRuntime(deps);
  const callbacks = new WeakMap<Provider, (req: IncomingMessage, res: ServerResponse) => void>();

  for (const resource of ['agent', 'mcp'] as const) {
    app.get(`/.well-known/oauth-protected-resource/${resource === 'agent' ? 'v1/agent' : 'mcp'}`, (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.json(protectedResourceMetadata(deps.config.baseUrl, resource));
    });
  }

  app.use('/connect', createConnectRouter({ ...deps, runtime }));

  app.use(async (req: Request, res: Response, next: NextFunction) => {
    if (!req.path.startsWith('/oauth/') && !AS_METADATA_PATHS.has(req.path)) return next();
    try {
      if (!(await readOAuthJsonBody(req, res))) return;
      if (req.method === 'POST' && req.path === '/oauth/reg') {
        const decision = await deps.services.oauth.throttle(deps.db, `reg:${clientAddress(req)}`, REGISTRATION_THROTTLE);
        if (!decision.allowed) {
          res.status(429).setHeader('Retry-After', String(decision.retryAfterSeconds));
          res.json({ error: 'rate_limited', error_description: `Too many client registrations from this address; retry after ${decision.retryAfterSeconds} s.` });
          return;
        }
      }
      const provider = await runtime.provider();
      let callback = callbacks.get(provider);
      if (!callback) {
        callback = provider.callback();
        callbacks.set(provider, callback);
      }
      callback(req, res);
    } catch (err) {
      next(err);
    }
  });
  return runtime;
}
