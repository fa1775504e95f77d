// The owner's side: owner API tokens and console sessions (hashed), the owner audit log, agent soft delete, the stamps
// of the 24 h / 48 h failing-endpoint warnings, and event recovery (the events' insertion order and
// the order recovered deliveries must keep).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('owner_tokens', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id').onDelete('CASCADE');
    // SHA-256 of the token: looked up by hash, never stored in clear.
    t.text('token_hash').notNullable().unique();
    t.text('token_prefix').notNullable();
    t.text('label');
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['owner_id']);
  });

  // Console sessions (cookie): the token hashed; the CSRF token the console echoes on writes.
  await knex.schema.createTable('owner_sessions', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id').onDelete('CASCADE');
    t.text('token_hash').notNullable().unique();
    t.text('csrf_token').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
  });

  await knex.schema.createTable('owner_audit', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id').onDelete('CASCADE');
    t.text('actor').notNullable();
    t.uuid('actor_token_id');
    t.text('action').notNullable();
    t.text('target_type');
    t.text('target_id');
    t.jsonb('details').notNullable().defaultTo('{}');
    t.text('client_address');
    t.text('request_id');
    t.timestamp('created_at', { useTz: true }).notNullable();
    // Insertion order: entries of one request or one clock tick share created_at, and a log reads in order.
    t.bigIncrements('seq', { primaryKey: false });
  });
  // The audit page: newest first per owner (keyset on created_at, id).
  await knex.raw('CREATE INDEX owner_audit_owner_created ON owner_audit (owner_id, created_at DESC, seq DESC)');

  await knex.schema.alterTable('agents', (t) => {
    t.timestamp('deleted_at', { useTz: true });
  });

  await knex.schema.alterTable('webhook_endpoints', (t) => {
    // Set when the owner was warned after 24 h / 48 h of failures; cleared on a success or re-enable.
    t.timestamp('warned_24h_at', { useTz: true });
    t.timestamp('warned_48h_at', { useTz: true });
  });

  // Connected apps show when a grant was last used (stamped by bearer verification, at most once a minute).
  await knex.schema.alterTable('oauth_grants', (t) => {
    t.timestamp('last_used_at', { useTz: true });
  });

  // Insertion order of events (created_at ties within one transaction, and clocks can step back).
  await knex.raw('ALTER TABLE events ADD COLUMN seq bigserial');
  await knex.raw('CREATE INDEX events_agent_seq ON events (agent_id, seq)');
  // A recovered delivery carries its event's seq: the claim sends an endpoint's recovered
  // deliveries one at a time in this order (src/db/repositories/delivery.repository.ts).
  await knex.raw('ALTER TABLE webhook_deliveries ADD COLUMN recovery_seq bigint');
  await knex.raw("CREATE INDEX webhook_deliveries_recovery ON webhook_deliveries (endpoint_id, recovery_seq) WHERE recovery_seq IS NOT NULL AND status IN ('pending', 'retrying', 'in_flight')");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_deliveries DROP COLUMN recovery_seq');
  await knex.raw('ALTER TABLE events DROP COLUMN seq');
  await knex.raw('ALTER TABLE oauth_grants DROP COLUMN last_used_at');
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.dropColumn('warned_24h_at');
    t.dropColumn('warned_48h_at');
  });
  await knex.schema.alterTable('agents', (t) => {
    t.dropColumn('deleted_at');
  });
  await knex.schema.dropTableIfExists('owner_audit');
  await knex.schema.dropTableIfExists('owner_sessions');
  await knex.schema.dropTableIfExists('owner_tokens');
}
