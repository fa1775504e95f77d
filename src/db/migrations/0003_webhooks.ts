// Webhook endpoints (sealed signing secrets) and one delivery record per (event, endpoint).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.text('description');
    t.specificType('event_types', 'text[]').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('disabled_reason');
    t.timestamp('disabled_at', { useTz: true });
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.timestamp('failing_since', { useTz: true });
    t.timestamp('last_delivered_at', { useTz: true });
    t.timestamp('last_failure_at', { useTz: true });
    // AES-256-GCM sealed (src/lib/crypto.ts); never the plain secret.
    t.text('sealed_secret').notNullable();
    t.text('sealed_previous_secret');
    t.timestamp('previous_secret_expires_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.index(['agent_id', 'created_at']);
  });

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('event_id').notNullable().references('events.id').onDelete('CASCADE');
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id').onDelete('CASCADE');
    t.uuid('agent_id').notNullable();
    t.text('event_type').notNullable();
    t.timestamp('event_created_at', { useTz: true }).notNullable();
    t.text('status').notNullable();
    t.integer('attempt').notNullable().defaultTo(0);
    t.integer('http_status');
    t.text('error_class');
    t.integer('latency_ms');
    t.text('response_body');
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('first_attempt_at', { useTz: true });
    t.timestamp('last_attempt_at', { useTz: true });
    t.timestamp('terminal_at', { useTz: true });
    t.timestamp('deadline_at', { useTz: true });
    t.uuid('claim_token');
    t.timestamp('lease_until', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.unique(['event_id', 'endpoint_id']);
    t.index(['endpoint_id', 'created_at', 'id']);
  });
  await knex.raw("ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'in_flight', 'retrying', 'delivered', 'failed'))");
  // The claim query scans only live rows: due ones by next_attempt_at, leased ones by lease_until.
  await knex.raw("CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'retrying')");
  await knex.raw("CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status IN ('pending', 'retrying')");
  await knex.raw("CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id, lease_until) WHERE status = 'in_flight'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('webhook_deliveries');
  await knex.schema.dropTableIfExists('webhook_endpoints');
}
