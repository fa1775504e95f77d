// Issue 27 (owner approvals with passkeys): an operation may wait for its owner's approval (the approval_* columns,
// null when none was needed), and owners keep WebAuthn passkeys and the single-use challenges of their ceremonies.
//
// Why columns on operations rather than a table of their own: the settlement claim must skip a pending approval
// without a join on its hot path (operation.repository claimDueOperations), and every operation view shows the
// approval with the row it already read.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('operations', (t) => {
    t.text('approval_state');
    t.jsonb('approval_reasons');
    t.timestamp('approval_requested_at', { useTz: true });
    t.timestamp('approval_expires_at', { useTz: true });
    t.timestamp('approval_decided_at', { useTz: true });
    // Who decided: 'owner:<id>' (with the passkey's credential id when approved), or 'expiry'.
    t.text('approval_decided_by');
    // When the owner was e-mailed about it (the approval mail loop's outbox mark).
    t.timestamp('approval_notified_at', { useTz: true });
  });
  await knex.raw(`ALTER TABLE operations ADD CONSTRAINT operations_approval_state_known CHECK (approval_state IN ('pending','approved','rejected','expired'))`);
  // The expiry pass reads the pending ones by deadline; the inbox reads an agent's approvals newest first.
  await knex.raw(`CREATE INDEX operations_approval_pending_idx ON operations (approval_expires_at) WHERE approval_state = 'pending'`);
  await knex.raw(`CREATE INDEX operations_approval_inbox_idx ON operations (agent_id, approval_requested_at DESC) WHERE approval_state IS NOT NULL`);

  await knex.schema.createTable('owner_passkeys', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id').onDelete('CASCADE');
    // base64url credential id as the authenticator gives it (the lookup key of an assertion).
    t.text('credential_id').notNullable().unique();
    t.binary('public_key').notNullable();
    t.bigInteger('counter').notNullable().defaultTo(0);
    t.jsonb('transports').notNullable().defaultTo('[]');
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('last_used_at', { useTz: true });
    t.index(['owner_id']);
  });

  // Ceremony challenges: single use (used_at), short lived (expires_at), bound to their purpose and, for an
  // approval, to the operation (a step-up assertion for one approval cannot approve another).
  await knex.schema.createTable('webauthn_challenges', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').references('owners.id').onDelete('CASCADE');
    t.text('purpose').notNullable();
    t.text('challenge').notNullable().unique();
    t.uuid('operation_id');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
  });
  await knex.raw(`ALTER TABLE webauthn_challenges ADD CONSTRAINT webauthn_challenges_purpose_known CHECK (purpose IN ('register','sign_in','approve'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('webauthn_challenges');
  await knex.schema.dropTableIfExists('owner_passkeys');
  await knex.raw('DROP INDEX IF EXISTS operations_approval_inbox_idx');
  await knex.raw('DROP INDEX IF EXISTS operations_approval_pending_idx');
  await knex.raw('ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_approval_state_known');
  await knex.schema.alterTable('operations', (t) => {
    for (const c of ['approval_state', 'approval_reasons', 'approval_requested_at', 'approval_expires_at', 'approval_decided_at', 'approval_decided_by', 'approval_notified_at']) t.dropColumn(c);
  });
}
