// Postgres adapter for every oidc-provider model, with an atomic consume (one winner per code or refresh token).
import { errors } from 'oidc-provider';
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/oauth.repository.js';
import type { Clock } from '../lib/clock.js';

type Payload = Record<string, unknown>;

export interface AdapterDeps {
  db: Db;
  clock: Clock;
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
  const { db, clock } = deps;

  return class PostgresAdapter {
    readonly model: string;

    constructor(model: string) {
      this.model = model;
    }

    async upsert(id: string, payload: Payload, expiresIn?: number): Promise<void> {
      // Postgres cannot store U+0000: a request that smuggles one into a stored artefact is the caller's error.
      if (JSON.stringify(payload).includes('\\u0000')) {
        const Refusal = this.model === 'Client' ? errors.InvalidClientMetadata : errors.InvalidRequest;
        throw new Refusal('parameters must not contain the NUL character');
      }
      await repo.upsertModel(db, {
        model: this.model,
        id,
        payload,
        grant_id: typeof payload.grantId === 'string' ? payload.grantId : null,
        uid: typeof payload.uid === 'string' ? payload.uid : null,
        user_code: typeof payload.userCode === 'string' ? payload.userCode : null,
        expires_at: typeof expiresIn === 'number' ? new Date(clock.now().getTime() + expiresIn * 1000) : null,
      });
    }

    async find(id: string): Promise<Payload | undefined> {
      if (hasNul(id)) return undefined; // no stored artefact can carry one
      return toPayload(await repo.findModel(db, this.model, id), clock.now());
    }

    async findByUid(uid: string): Promise<Payload | undefined> {
      if (hasNul(uid)) return undefined; // no stored artefact can carry one
      return toPayload(await repo.findModelByUid(db, this.model, uid), clock.now());
    }

    async findByUserCode(userCode: string): Promise<Payload | undefined> {
      if (hasNul(userCode)) return undefined; // no stored artefact can carry one
      return toPayload(await repo.findModelByUserCode(db, this.model, userCode), clock.now());
    }

    /**
     * The provider checks `consumed` and then calls this; two parallel redemptions can both pass its
     * check, so the guarded UPDATE decides. The loser is treated as a replay: the grant is revoked.
     */
    async consume(id: string): Promise<void> {
      if (hasNul(id)) throw new errors.InvalidGrant('grant not found');
      if (await repo.consumeModel(db, this.model, id, clock.now())) return;
      const row = await repo.findModel(db, this.model, id);
      if (row?.grant_id) await revokeGrantEverywhere(db, row.grant_id, clock.now(), 'replay');
      throw new errors.InvalidGrant(`${this.model === 'RefreshToken' ? 'refresh token' : 'grant'} already consumed`);
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

/** An artefact past its expiry is gone, by the injectable clock (contract §15), whatever the row cleanup has done. */
function toPayload(row: repo.ModelRow | undefined, now: Date): Payload | undefined {
  if (!row || (row.expires_at && new Date(row.expires_at) <= now)) return undefined;
  const payload = typeof row.payload === 'string' ? (JSON.parse(row.payload) as Payload) : { ...row.payload };
  if (row.consumed_at) payload.consumed = Math.floor(new Date(row.consumed_at).getTime() / 1000);
  return payload;
}
