// OAuth storage: oidc-provider models, signing keys, grant bindings, connect-page codes and throttles.
import { sha256Hex } from '../../lib/crypto.js';
import { rows, type Db } from '../knex.js';
import { sql } from '../sql.js';

/**
 * oauth_models.id, uid and user_code, and oauth_login_codes.interaction_uid, hold SHA-256 (hex) of the value the
 * provider hands out (codes, refresh tokens, session and interaction ids...), never the value: a database
 * dump gives nothing to present. Every function here takes the plain value and hashes it.
 */
export const artefactHash = (value: string): string => sha256Hex(value);
const hashOrNull = (value: string | null): string | null => (value === null ? null : artefactHash(value));
/** The same hash in SQL, for joins on a plain id held by another table. */
const SQL_HASH = (column: string) => `encode(sha256(convert_to(${column}, 'UTF8')), 'hex')`;

/** Models whose rows carry a grant id and die with the grant. */
export const GRANT_BOUND_MODELS = ['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest', 'PreAuthorizedCode'];

export interface ModelRow {
  model: string;
  id: string;
  payload: Record<string, unknown>;
  grant_id: string | null;
  uid: string | null;
  user_code: string | null;
  /** The payload's secret fields (jti, client_secret, ...), sealed with MASTER_KEY; see src/oauth/adapter.ts. */
  sealed_secrets?: string | null;
  expires_at: Date | null;
  consumed_at: Date | null;
}

/** `row.id`, `uid` and `user_code` are the plain values; the row stores their hashes. */
export async function upsertModel(db: Db, row: Omit<ModelRow, 'consumed_at'>): Promise<void> {
  // consumed_at is left alone on conflict: a re-save never resurrects a consumed artefact.
  await db('oauth_models')
    .insert({
      ...row,
      id: artefactHash(row.id),
      uid: hashOrNull(row.uid),
      user_code: hashOrNull(row.user_code),
      sealed_secrets: row.sealed_secrets ?? null,
      payload: JSON.stringify(row.payload),
    })
    .onConflict(['model', 'id'])
    .merge(['payload', 'grant_id', 'uid', 'user_code', 'sealed_secrets', 'expires_at']);
}

export async function findModel(db: Db, model: string, id: string): Promise<ModelRow | undefined> {
  return db('oauth_models')
    .where({ model, id: artefactHash(id) })
    .first();
}

export async function findModelByUid(db: Db, model: string, uid: string): Promise<ModelRow | undefined> {
  return db('oauth_models')
    .where({ model, uid: artefactHash(uid) })
    .first();
}

export async function findModelByUserCode(db: Db, model: string, userCode: string): Promise<ModelRow | undefined> {
  return db('oauth_models')
    .where({ model, user_code: artefactHash(userCode) })
    .first();
}

/** Marks a row consumed only if it was not already; returns false when another request got there first. */
export async function consumeModel(db: Db, model: string, id: string, at: Date): Promise<boolean> {
  const updated = await db('oauth_models')
    .where({ model, id: artefactHash(id) })
    .whereNull('consumed_at')
    .update({ consumed_at: at });
  return updated === 1;
}

export async function destroyModel(db: Db, model: string, id: string): Promise<void> {
  await db('oauth_models')
    .where({ model, id: artefactHash(id) })
    .delete();
}

/** Rows whose payload still holds a field that must be sealed (written before 0007), a batch at a time. */
export async function findModelsWithPlainSecrets(db: Db, fields: readonly string[], batch: number): Promise<Array<Pick<ModelRow, 'model' | 'id' | 'payload' | 'sealed_secrets'>>> {
  return db('oauth_models')
    .where((q) => {
      for (const field of fields) q.orWhereRaw('payload \\? ?', [field]);
    })
    .select('model', 'id', 'payload', 'sealed_secrets')
    .limit(batch);
}

/** Replaces a row's payload and sealed secrets; `hashedId` is the stored (already hashed) id. */
export async function replaceModelSecrets(db: Db, model: string, hashedId: string, payload: Record<string, unknown>, sealedSecrets: string): Promise<void> {
  await db('oauth_models')
    .where({ model, id: hashedId })
    .update({ payload: JSON.stringify(payload), sealed_secrets: sealedSecrets });
}

export async function destroyModelsByGrant(db: Db, model: string, grantId: string): Promise<void> {
  await db('oauth_models').where({ model, grant_id: grantId }).delete();
}

/** Every artefact of a grant and the Grant itself. */
export async function destroyGrantArtefacts(db: Db, grantId: string): Promise<number> {
  return db('oauth_models')
    .where((q) => q.whereIn('model', GRANT_BOUND_MODELS).andWhere('grant_id', grantId))
    .orWhere((q) => q.where('model', 'Grant').andWhere('id', artefactHash(grantId)))
    .delete();
}

export async function deleteExpiredModels(db: Db, before: Date, limit: number): Promise<number> {
  const deleted = await rows(db, sql`DELETE FROM oauth_models WHERE ctid IN (SELECT ctid FROM oauth_models WHERE expires_at < ${before} LIMIT ${limit}) RETURNING 1`);
  return deleted.length;
}

// Signing keys

export interface SigningKeyRow {
  kid: string;
  seq?: number;
  alg: string;
  sealed_private_jwk: string;
  public_jwk: Record<string, unknown>;
  created_at: Date;
  retired_at: Date | null;
}

export async function insertSigningKey(db: Db, row: Omit<SigningKeyRow, 'retired_at'>): Promise<void> {
  await db('oauth_signing_keys').insert({ ...row, public_jwk: JSON.stringify(row.public_jwk) });
}

/** Live keys, newest first (the first one signs). */
export async function listSigningKeys(db: Db): Promise<SigningKeyRow[]> {
  return db('oauth_signing_keys').whereNull('retired_at').orderBy('seq', 'desc');
}

export async function retireSigningKeys(db: Db, kids: string[], at: Date): Promise<void> {
  if (kids.length === 0) return;
  await db('oauth_signing_keys').whereIn('kid', kids).whereNull('retired_at').update({ retired_at: at });
}

/** Serialises key bootstrap and rotation across processes (transaction-scoped). */
export async function lockSigningKeys(db: Db): Promise<void> {
  await rows(db, sql`SELECT pg_advisory_xact_lock(hashtext('oauth_signing_keys'))`);
}

// Grant bindings

export interface GrantBindingRow {
  id: string;
  client_id: string;
  owner_id: string;
  agent_id: string;
  resource: string;
  scope: string;
  created_at: Date;
  revoked_at: Date | null;
  revoked_reason: string | null;
}

export async function insertGrantBinding(db: Db, row: Omit<GrantBindingRow, 'revoked_at' | 'revoked_reason'>): Promise<void> {
  await db('oauth_grants').insert(row);
}

export async function findGrantBinding(db: Db, id: string): Promise<GrantBindingRow | undefined> {
  return db('oauth_grants').where({ id }).first();
}

/** Stamps a grant's last use; at most one write a minute per grant (bearer verification calls it per request). */
export async function touchGrant(db: Db, id: string, at: Date): Promise<void> {
  await db('oauth_grants')
    .where({ id })
    .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', new Date(at.getTime() - 60_000)))
    .update({ last_used_at: at });
}

/** The binding of a grant that is still alive: not revoked and its Grant model row still present and unexpired. */
export async function findLiveGrantBinding(db: Db, id: string, now: Date): Promise<GrantBindingRow | undefined> {
  return db('oauth_grants as g')
    .join('oauth_models as m', (j) => j.onVal('m.id', '=', artefactHash(id)).andOnVal('m.model', '=', 'Grant'))
    .where('g.id', id)
    .whereNull('g.revoked_at')
    .where((q) => q.whereNull('m.expires_at').orWhere('m.expires_at', '>', now))
    .first('g.*');
}

export async function revokeGrantBinding(db: Db, id: string, at: Date, reason: string): Promise<boolean> {
  return (await db('oauth_grants').where({ id }).whereNull('revoked_at').update({ revoked_at: at, revoked_reason: reason })) === 1;
}

export interface GrantListRow extends GrantBindingRow {
  client_name: string | null;
  last_used_at: Date | null;
  agent_name: string;
}

export async function listGrantsByOwner(db: Db, ownerId: string): Promise<GrantListRow[]> {
  return db('oauth_grants as g')
    .join('agents as a', 'a.id', 'g.agent_id')
    .leftJoin('oauth_models as c', (j) => j.on('c.id', '=', db.raw(SQL_HASH('g.client_id'))).andOnVal('c.model', '=', 'Client'))
    .where('g.owner_id', ownerId)
    .orderBy('g.created_at', 'desc')
    .select('g.*', 'a.name as agent_name', db.raw(`c.payload->>'client_name' as client_name`));
}

// Connect-page one-time codes

export interface LoginCodeRow {
  id: string;
  seq?: number;
  interaction_uid: string;
  email_hash: string;
  owner_id: string | null;
  code_hash: string;
  attempts: number;
  expires_at: Date;
  verified_at: Date | null;
  created_at: Date;
}

/** `row.interaction_uid` is the plain interaction id; the row stores its hash. */
export async function insertLoginCode(db: Db, row: Omit<LoginCodeRow, 'attempts' | 'verified_at'>): Promise<void> {
  await db('oauth_login_codes').insert({ ...row, interaction_uid: artefactHash(row.interaction_uid) });
}

export async function findLatestLoginCode(db: Db, interactionUid: string): Promise<LoginCodeRow | undefined> {
  return db('oauth_login_codes')
    .where({ interaction_uid: artefactHash(interactionUid) })
    .orderBy('seq', 'desc')
    .first();
}

/**
 * Spends one attempt on a code, atomically: only while it is unverified, unexpired and under the cap.
 * Returns undefined when no attempt may be made (locked out, expired, already used).
 */
export async function spendLoginCodeAttempt(db: Db, id: string, maxAttempts: number, now: Date): Promise<LoginCodeRow | undefined> {
  const rows = await db('oauth_login_codes').where({ id }).whereNull('verified_at').where('attempts', '<', maxAttempts).where('expires_at', '>', now).increment('attempts', 1).returning('*');
  return rows[0];
}

export async function markLoginCodeVerified(db: Db, id: string, at: Date): Promise<boolean> {
  return (await db('oauth_login_codes').where({ id }).whereNull('verified_at').update({ verified_at: at })) === 1;
}

export async function findLiveOwnerIdByEmail(db: Db, email: string): Promise<string | undefined> {
  const row = await db('owners').whereRaw('lower(email) = lower(?)', [email]).whereNull('deleted_at').first('id');
  return row?.id;
}

// Throttles

/** Counts one hit in the fixed window and returns the count including it (atomic upsert). */
export async function hitThrottle(db: Db, key: string, windowStart: Date): Promise<number> {
  const [row] = await rows(
    db,
    sql<{ count: number }>`INSERT INTO oauth_throttles (key, window_start, count) VALUES (${key}, ${windowStart}, 1)
     ON CONFLICT (key, window_start) DO UPDATE SET count = oauth_throttles.count + 1
     RETURNING count`,
  );
  return Number(row!.count);
}

/** One-time login codes are dead 10 minutes after issue; rows past `before` serve nothing. */
export async function deleteOldLoginCodes(db: Db, before: Date): Promise<number> {
  return db('oauth_login_codes').where('expires_at', '<', before).delete();
}

export async function deleteOldThrottles(db: Db, before: Date): Promise<number> {
  return db('oauth_throttles').where('window_start', '<', before).delete();
}
