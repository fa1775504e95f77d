// Postgres adapter for every oidc-provider model, with an atomic consume (one winner per code or refresh token).
import { createRequire } from 'node:module';
import type * as Oidc from 'oidc-provider';
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/oauth.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';

type Payload = Record<string, unknown>;

/** oidc-provider's error classes, loaded when first needed (only the provider, built on the first OAuth request, calls the adapter). */
const oidcErrors = (
  (load) => () =>
    (load('oidc-provider') as typeof Oidc).errors
)(createRequire(import.meta.url));

export interface AdapterDeps {
  db: Db;
  clock: Clock;
  sealer: Sealer;
}

/**
 * What a dump of oauth_models must not reveal. Row ids are hashes (the repository hashes every id, uid and
 * user code), and the payload's own copy of the id (`jti`) is dropped: find(id) puts it back. Three values
 * cannot be dropped and are sealed into `sealed_secrets` instead: a Session's jti (the session cookie; the
 * provider also finds sessions by uid, where no id is given), an Interaction's `session.cookie` (the same
 * value), and a confidential Client's `client_secret` (the provider compares it and keys HS256 with it).
 */
interface SealedSecrets {
  jti?: unknown;
  client_secret?: unknown;
  session_cookie?: unknown;
}

/** Top-level payload fields that never stay in the jsonb payload (legacy rows are sealed by the cleanup loop). */
export const PLAIN_SECRET_FIELDS = ['client_secret'] as const;

function splitSecrets(model: string, payload: Payload): { plain: Payload; secrets: SealedSecrets | null } {
  const { jti, client_secret, ...plain } = payload;
  const secrets: SealedSecrets = {};
  if (model === 'Session' && jti !== undefined) secrets.jti = jti;
  if (client_secret !== undefined) secrets.client_secret = client_secret;
  const session = plain.session as Payload | undefined;
  if (session && typeof session === 'object' && session.cookie !== undefined) {
    const { cookie, ...rest } = session;
    secrets.session_cookie = cookie;
    plain.session = rest;
  }
  return { plain, secrets: Object.keys(secrets).length > 0 ? secrets : null };
}

function joinSecrets(payload: Payload, secrets: SealedSecrets): Payload {
  const joined = { ...payload };
  if (secrets.jti !== undefined) joined.jti = secrets.jti;
  if (secrets.client_secret !== undefined) joined.client_secret = secrets.client_secret;
  if (secrets.session_cookie !== undefined) joined.session = { ...(joined.session as Payload), cookie: secrets.session_cookie };
  return joined;
}

/** Moves secrets out of payloads written before 0007 (Client secrets: the migration had no MASTER_KEY). */
export async function sealLegacySecrets(db: Db, sealer: Sealer, batch = 200): Promise<number> {
  const rows = await repo.findModelsWithPlainSecrets(db, PLAIN_SECRET_FIELDS, batch);
  for (const row of rows) {
    const payload = typeof row.payload === 'string' ? (JSON.parse(row.payload) as Payload) : row.payload;
    const earlier = row.sealed_secrets ? (JSON.parse(sealer.open(row.sealed_secrets)) as SealedSecrets) : {};
    const { plain, secrets } = splitSecrets(row.model, payload);
    await repo.replaceModelSecrets(db, row.model, row.id, plain, sealer.seal(JSON.stringify({ ...earlier, ...secrets })));
  }
  return rows.length;
}

/** Revokes a grant in one transaction: every artefact, the Grant and the binding the resource server checks. */
export async function revokeGrantEverywhere(db: Db, grantId: string, at: Date, reason: string): Promise<boolean> {
  return withTransaction(db, async (trx) => {
    const removed = await repo.destroyGrantArtefacts(trx, grantId);
    const revoked = await repo.revokeGrantBinding(trx, grantId, at, reason);
    return revoked || removed > 0;
  });
}

/** Builds the adapter class oidc-provider instantiates once per model name. */
export function createAdapterClass(deps: AdapterDeps) {
  const { db, clock, sealer } = deps;

  /** An artefact past its expiry is gone, by the injectable clock (contract §15), whatever the row cleanup has done. */
  const toPayload = (model: string, row: repo.ModelRow | undefined, id?: string): Payload | undefined => {
    const now = clock.now();
    if (!row || (row.expires_at && new Date(row.expires_at) <= now)) return undefined;
    let payload = typeof row.payload === 'string' ? (JSON.parse(row.payload) as Payload) : { ...row.payload };
    if (row.sealed_secrets) payload = joinSecrets(payload, JSON.parse(sealer.open(row.sealed_secrets)) as SealedSecrets);
    // Every model but Client carries its id as jti; it is not stored, the caller just gave it.
    if (id !== undefined && model !== 'Client') payload.jti = id;
    if (row.consumed_at) payload.consumed = Math.floor(new Date(row.consumed_at).getTime() / 1000);
    return payload;
  };

  return class PostgresAdapter {
    readonly model: string;

    constructor(model: string) {
      this.model = model;
    }

    async upsert(id: string, payload: Payload, expiresIn?: number): Promise<void> {
      // Postgres cannot store U+0000: a request that smuggles one into a stored artefact is the caller's error.
      if (JSON.stringify(payload).includes('\\u0000')) {
        const Refusal = this.model === 'Client' ? oidcErrors().InvalidClientMetadata : oidcErrors().InvalidRequest;
        throw new Refusal('parameters must not contain the NUL character');
      }
      const { plain, secrets } = splitSecrets(this.model, payload);
      await repo.upsertModel(db, {
        model: this.model,
        id,
        payload: plain,
        sealed_secrets: secrets ? sealer.seal(JSON.stringify(secrets)) : null,
        grant_id: typeof payload.grantId === 'string' ? payload.grantId : null,
        uid: typeof payload.uid === 'string' ? payload.uid : null,
        user_code: typeof payload.userCode === 'string' ? payload.userCode : null,
        expires_at: typeof expiresIn === 'number' ? new Date(clock.now().getTime() + expiresIn * 1000) : null,
      });
    }

    async find(id: string): Promise<Payload | undefined> {
      if (hasNul(id)) return undefined; // no stored artefact can carry one
      return toPayload(this.model, await repo.findModel(db, this.model, id), id);
    }

    async findByUid(uid: string): Promise<Payload | undefined> {
      if (hasNul(uid)) return undefined;
      return toPayload(this.model, await repo.findModelByUid(db, this.model, uid));
    }

    async findByUserCode(userCode: string): Promise<Payload | undefined> {
      if (hasNul(userCode)) return undefined;
      return toPayload(this.model, await repo.findModelByUserCode(db, this.model, userCode));
    }

    /**
     * The provider checks `consumed` and then calls this; two parallel redemptions can both pass its
     * check, so the guarded UPDATE decides. The loser is treated as a replay: the grant is revoked.
     */
    async consume(id: string): Promise<void> {
      if (hasNul(id)) throw new (oidcErrors().InvalidGrant)('grant not found');
      if (await repo.consumeModel(db, this.model, id, clock.now())) return;
      const row = await repo.findModel(db, this.model, id);
      if (row?.grant_id) await revokeGrantEverywhere(db, row.grant_id, clock.now(), 'replay');
      throw new (oidcErrors().InvalidGrant)(`${this.model === 'RefreshToken' ? 'refresh token' : 'grant'} already consumed`);
    }

    async destroy(id: string): Promise<void> {
      if (hasNul(id)) return;
      if (this.model === 'Grant') {
        // The provider destroys a Grant on refresh-token replay, code reuse and revocation.
        await revokeGrantEverywhere(db, id, clock.now(), 'revoked_by_authorization_server');
        return;
      }
      await repo.destroyModel(db, this.model, id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      if (hasNul(grantId)) return;
      await repo.destroyModelsByGrant(db, this.model, grantId);
    }
  };
}

/** Identifiers come from requests; U+0000 cannot be in Postgres text, so such an id matches nothing. */
const hasNul = (value: unknown): boolean => typeof value === 'string' && value.includes('\u0000');
