// The resource server's view of the access-token signing keys: the algorithm and the public halves
// (the authorization server's side, with the sealed private halves, is src/oauth/keys.ts).
import type { JWK } from 'jose';
import type { Db } from '../db/knex.js';
import { listSigningKeys } from '../db/repositories/oauth.repository.js';

export const SIGNING_ALG = 'ES256';

/** Public halves of the live keys (no private material is read), for the resource server. */
export async function loadPublicJwks(db: Db): Promise<JWK[]> {
  return (await listSigningKeys(db)).map((row) => row.public_jwk as JWK);
}
