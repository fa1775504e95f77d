// OAuth artefacts are stored by hash (issue 10 item 6): oauth_models ids, uids and user codes and the
// connect page's interaction ids become SHA-256 hex of the value handed out; payloads lose their copy of the id.
import type { Knex } from 'knex';

const hash = (column: string) => `encode(sha256(convert_to(${column}, 'UTF8')), 'hex')`;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('oauth_models', (t) => {
    // Secrets a payload cannot drop, sealed with MASTER_KEY (src/oauth/adapter.ts, src/db/sealed-columns.ts).
    t.text('sealed_secrets');
  });
  // A session's id is its cookie, and interactions copy it; sealing needs MASTER_KEY, which a migration does
  // not have. Sessions (a day at most) and interactions (15 minutes) are dropped: their users sign in again.
  await knex('oauth_models').whereIn('model', ['Session', 'Interaction']).delete();
  await knex.raw(`UPDATE oauth_models SET id = ${hash('id')}, uid = ${hash('uid')}, user_code = ${hash('user_code')}, payload = payload - 'jti'`);
  await knex.raw(`UPDATE oauth_login_codes SET interaction_uid = ${hash('interaction_uid')}`);
}

export async function down(): Promise<void> {
  throw new Error('0007_oauth_hashed_ids cannot be undone: the plain ids are gone');
}
