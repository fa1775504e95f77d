// Policy replay and shadow policies (issue 28). Each operation keeps what its live policy evaluation saw
// (`policy_facts`) and the order in which it took the agent's policy lock (`policy_seq`), so a candidate policy can
// be replayed over the history exactly; an agent's policy row may carry a `shadow_policy` evaluated beside the live
// one, and every decision where the two differ is a `shadow_decisions` row.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE SEQUENCE operations_policy_seq');
  // Nullable without a default first (no table rewrite: older rows keep NULL and sort first), then the default.
  await knex.raw('ALTER TABLE operations ADD COLUMN policy_seq bigint, ADD COLUMN policy_facts jsonb');
  await knex.raw(`ALTER TABLE operations ALTER COLUMN policy_seq SET DEFAULT nextval('operations_policy_seq')`);
  await knex.raw('ALTER SEQUENCE operations_policy_seq OWNED BY operations.policy_seq');
  // The replay reads one agent's operations in lock order from a date on.
  await knex.raw('CREATE INDEX operations_policy_replay ON operations (agent_id, created_at, policy_seq)');

  await knex.raw('ALTER TABLE agent_policies ADD COLUMN shadow_policy jsonb, ADD COLUMN shadow_updated_at timestamptz');

  await knex.schema.createTable('shadow_decisions', (t) => {
    t.bigIncrements('id');
    t.uuid('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    /** One decision per operation: a write evaluates its shadow once, under the policy lock. */
    t.uuid('operation_id').notNullable().unique();
    t.text('operation_type').notNullable();
    t.text('asset_symbol');
    t.specificType('amount_usd_e8', 'numeric(78,0)');
    t.boolean('live_allowed').notNullable();
    t.text('live_code');
    t.text('live_key');
    t.boolean('shadow_allowed').notNullable();
    t.text('shadow_code');
    t.text('shadow_key');
    t.text('shadow_message');
    t.jsonb('shadow_policy').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['agent_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('shadow_decisions');
  await knex.raw('ALTER TABLE agent_policies DROP COLUMN shadow_policy, DROP COLUMN shadow_updated_at');
  await knex.raw('DROP INDEX operations_policy_replay');
  await knex.raw('ALTER TABLE operations DROP COLUMN policy_seq, DROP COLUMN policy_facts');
}
