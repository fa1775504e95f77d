// OAuth tables: oidc-provider model storage, signing keys, grant→agent bindings, connect-page one-time codes, throttles.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // One table for every oidc-provider model (Client, Grant, Session, Interaction, AuthorizationCode, RefreshToken, ...).
  await knex.schema.createTable('oauth_models', (t) => {
    t.text('model').notNullable();
    t.text('id').notNullable();
    t.jsonb('payload').notNullable();
    t.text('grant_id');
    t.text('uid');
    t.text('user_code');
    t.timestamp('expires_at', { useTz: true });
    t.timestamp('consumed_at', { useTz: true });
    t.primary(['model', 'id']);
  });
  await knex.raw('CREATE INDEX oauth_models_grant ON oauth_models (grant_id) WHERE grant_id IS NOT NULL');
  await knex.raw('CREATE INDEX oauth_models_uid ON oauth_models (model, uid) WHERE uid IS NOT NULL');
  await knex.raw('CREATE INDEX oauth_models_user_code ON oauth_models (model, user_code) WHERE user_code IS NOT NULL');
  await knex.raw('CREATE INDEX oauth_models_expires ON oauth_models (expires_at) WHERE expires_at IS NOT NULL');

  await knex.schema.createTable('oauth_signing_keys', (t) => {
    t.text('kid').primary();
    // Insertion order decides which key signs (newest), independent of clocks.
    t.bigIncrements('seq', { primaryKey: false });
    t.text('alg').notNullable();
    t.text('sealed_private_jwk').notNullable();
    t.jsonb('public_jwk').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('retired_at', { useTz: true });
  });

  // The agent picked at consent for each grant; the resource server's liveness check reads it.
  await knex.schema.createTable('oauth_grants', (t) => {
    t.text('id').primary();
    t.text('client_id').notNullable();
    t.uuid('owner_id').notNullable().references('owners.id');
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('resource').notNullable();
    t.text('scope').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
    t.text('revoked_reason');
    t.index(['owner_id', 'created_at']);
  });

  // Connect-page login: one row per code sent for an interaction; owner_id is null when the e-mail is unknown.
  await knex.schema.createTable('oauth_login_codes', (t) => {
    t.uuid('id').primary();
    // "The latest code of an interaction" by insertion order, independent of clocks.
    t.bigIncrements('seq', { primaryKey: false });
    t.text('interaction_uid').notNullable();
    t.text('email_hash').notNullable();
    t.uuid('owner_id');
    t.text('code_hash').notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('verified_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['interaction_uid', 'seq']);
  });

  // Fixed-window counters for the OAuth throttles (registration per address, codes per e-mail).
  await knex.schema.createTable('oauth_throttles', (t) => {
    t.text('key').notNullable();
    t.timestamp('window_start', { useTz: true }).notNullable();
    t.integer('count').notNullable();
    t.primary(['key', 'window_start']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['oauth_throttles', 'oauth_login_codes', 'oauth_grants', 'oauth_signing_keys', 'oauth_models']) {
    await knex.schema.dropTableIfExists(table);
  }
}
