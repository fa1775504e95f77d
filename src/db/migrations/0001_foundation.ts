// Foundation tables: owners, agents, wallets, rate-limit overrides, idempotency records, the events outbox.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('owners', (t) => {
    t.uuid('id').primary();
    t.text('email').notNullable();
    t.text('name');
    t.timestamp('deleted_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX owners_email_live ON owners (lower(email)) WHERE deleted_at IS NULL');

  await knex.schema.createTable('agents', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id');
    t.text('name').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.timestamp('starts_at', { useTz: true });
    t.timestamp('ends_at', { useTz: true });
    t.text('api_key_hash').notNullable();
    t.text('api_key_prefix').notNullable();
    t.timestamp('api_key_rotated_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['owner_id']);
  });

  await knex.schema.createTable('wallets', (t) => {
    t.text('id').primary();
    t.uuid('agent_id').notNullable().unique().references('agents.id');
    t.text('address');
    t.text('sealed_private_key');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('rate_limit_overrides', (t) => {
    t.uuid('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('class').notNullable();
    t.integer('limit').notNullable();
    t.integer('burst').notNullable();
    t.integer('window_seconds').notNullable();
    t.primary(['agent_id', 'class']);
  });

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.uuid('agent_id').notNullable();
    t.text('key').notNullable();
    t.text('fingerprint').notNullable();
    t.text('operation_id').notNullable();
    t.integer('status_code').notNullable();
    t.jsonb('response_body').notNullable();
    t.jsonb('response_headers').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.primary(['agent_id', 'key']);
    t.index(['expires_at']);
  });

  await knex.schema.createTable('events', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable();
    t.text('type').notNullable();
    t.uuid('operation_id');
    t.text('resource_type');
    t.text('resource_id');
    t.text('payload').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['agent_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['events', 'idempotency_keys', 'rate_limit_overrides', 'wallets', 'agents', 'owners']) {
    await knex.schema.dropTableIfExists(table);
  }
}
