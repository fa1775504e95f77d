// Issue 27: the approval e-mail is retried per operation. A notice the mail server refuses (a bad address, an
// outage) waits `approval_notice_after` (doubling from 2 s up to an hour, counted in `approval_notice_attempts`)
// without holding back the notices of other owners; it is retried while the approval is pending.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('operations', (t) => {
    t.integer('approval_notice_attempts').notNullable().defaultTo(0);
    t.timestamp('approval_notice_after', { useTz: true });
  });
  // The mail loop reads the pending approvals not yet notified, oldest first.
  await knex.raw(`CREATE INDEX operations_approval_unnotified_idx ON operations (approval_requested_at) WHERE approval_state = 'pending' AND approval_notified_at IS NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS operations_approval_unnotified_idx');
  await knex.schema.alterTable('operations', (t) => {
    t.dropColumn('approval_notice_attempts');
    t.dropColumn('approval_notice_after');
  });
}
