// Owners' passkeys (WebAuthn credentials) and the single-use challenges of their ceremonies (migration 0017).
import type { Db } from '../knex.js';

export interface PasskeyRow {
  id: string;
  owner_id: string;
  credential_id: string;
  public_key: Buffer;
  counter: string;
  transports: string[];
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

export type ChallengePurpose = 'register' | 'sign_in' | 'approve' | 'step_up';

export interface ChallengeRow {
  id: string;
  owner_id: string | null;
  purpose: ChallengePurpose;
  challenge: string;
  operation_id: string | null;
  /** A step-up's action and agent (`<action>:<agent id>`); null for the other purposes. */
  scope: string | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}

export async function insertPasskey(db: Db, row: Omit<PasskeyRow, 'counter' | 'transports' | 'last_used_at'> & { counter: number; transports: string[] }): Promise<void> {
  await db('owner_passkeys').insert({ ...row, counter: String(row.counter), transports: JSON.stringify(row.transports) });
}

export async function listPasskeys(db: Db, ownerId: string): Promise<PasskeyRow[]> {
  return db('owner_passkeys').where({ owner_id: ownerId }).orderBy('created_at', 'asc');
}

/** A passkey of a live owner by its credential id. */
/** Whether the owner has registered a passkey (then the console asks it for a step-up before key rotations and policy changes). */
export async function hasPasskey(db: Db, ownerId: string): Promise<boolean> {
  return (await db('owner_passkeys').where({ owner_id: ownerId }).first('id')) !== undefined;
}

export async function findPasskey(db: Db, credentialId: string): Promise<PasskeyRow | undefined> {
  return db('owner_passkeys as p').join('owners as o', 'o.id', 'p.owner_id').where('p.credential_id', credentialId).whereNull('o.deleted_at').first('p.*');
}

/** A passkey of `ownerId` by its own id (the API's `Passkey.id`). */
export async function findOwnerPasskey(db: Db, ownerId: string, id: string): Promise<PasskeyRow | undefined> {
  return db('owner_passkeys').where({ id, owner_id: ownerId }).first();
}

export async function recordPasskeyUse(db: Db, id: string, counter: number, at: Date): Promise<void> {
  await db('owner_passkeys')
    .where({ id })
    .update({ counter: String(counter), last_used_at: at });
}

export async function insertChallenge(db: Db, row: Omit<ChallengeRow, 'used_at'>): Promise<void> {
  await db('webauthn_challenges').insert(row);
}

/** Uses a live challenge once: the row when this caller consumed it, undefined when unknown, used or expired. */
export async function consumeChallenge(db: Db, challenge: string, purpose: ChallengePurpose, now: Date): Promise<ChallengeRow | undefined> {
  const [row] = await db('webauthn_challenges').where({ challenge, purpose }).whereNull('used_at').where('expires_at', '>', now).update({ used_at: now }).returning('*');
  return row as ChallengeRow | undefined;
}

/** Challenges past their deadline, used or not (kept an hour for the record). */
export async function deleteOldChallenges(db: Db, before: Date): Promise<number> {
  return db('webauthn_challenges').where('expires_at', '<', before).delete();
}

export async function findOwnerEmail(db: Db, ownerId: string): Promise<string | undefined> {
  const row = await db('owners').where({ id: ownerId }).whereNull('deleted_at').first('email');
  return row?.email as string | undefined;
}
