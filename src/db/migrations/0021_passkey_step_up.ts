// Issue 27: "key rotation and policy changes ask for a fresh assertion". A step-up challenge is bound to one action
// on one agent (`scope`: `<action>:<agent id>`, e.g. `replace_policy:<uuid>`), as an approval's is bound to its
// operation; it is single use and lives 5 minutes like the others.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webauthn_challenges', (t) => {
    t.text('scope');
  });
  await knex.raw('ALTER TABLE webauthn_challenges DROP CONSTRAINT webauthn_challenges_purpose_known');
  await knex.raw(`ALTER TABLE webauthn_challenges ADD CONSTRAINT webauthn_challenges_purpose_known CHECK (purpose IN ('register','sign_in','approve','step_up'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex('webauthn_challenges').where({ purpose: 'step_up' }).delete();
  await knex.raw('ALTER TABLE webauthn_challenges DROP CONSTRAINT webauthn_challenges_purpose_known');
  await knex.raw(`ALTER TABLE webauthn_challenges ADD CONSTRAINT webauthn_challenges_purpose_known CHECK (purpose IN ('register','sign_in','approve'))`);
  await knex.schema.alterTable('webauthn_challenges', (t) => {
    t.dropColumn('scope');
  });
}
