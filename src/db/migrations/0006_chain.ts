// Chain-backed settlement (evm adapter): the chain's settings (relayer key, sealed), account nonces allocated in
// Postgres, and every signed transaction recorded before broadcast (so a crash rebroadcasts the same bytes).
import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

export async function up(knex: Knex): Promise<void> {
  // Key/value settings of one chain: `relayer_key` (sealed), `bootstrapped_token`.
  await knex.schema.createTable('chain_settings', (t) => {
    t.integer('chain_id').notNullable();
    t.text('key').notNullable();
    t.text('value').notNullable();
    ts(t, 'updated_at').notNullable();
    t.primary(['chain_id', 'key']);
  });

  // The next nonce of each sending account: `UPDATE ... RETURNING` under the row lock hands each worker a
  // distinct nonce with no gap, because the signed transaction is inserted in the same database transaction.
  await knex.schema.createTable('chain_nonces', (t) => {
    t.integer('chain_id').notNullable();
    t.text('address').notNullable();
    t.bigInteger('next_nonce').notNullable();
    ts(t, 'updated_at').notNullable();
    t.primary(['chain_id', 'address']);
  });

  // One row per signed transaction (a fee bump is a new row with the same sender and nonce). `raw_tx` is recorded
  // before broadcast; after a crash the worker rebroadcasts exactly these bytes.
  await knex.schema.createTable('chain_transactions', (t) => {
    t.uuid('id').primary();
    t.integer('chain_id').notNullable();
    t.uuid('operation_id').references('operations.id');
    // `native` (ETH from the wallet), `eip3009` (token transferWithAuthorization by the relayer), `cancel` (a
    // zero-value self-transfer replacing a stuck nonce), `funding` (dev bootstrap).
    t.text('kind').notNullable();
    t.text('from_address').notNullable();
    t.text('to_address').notNullable();
    t.bigInteger('nonce').notNullable();
    t.integer('attempt').notNullable().defaultTo(0);
    t.text('raw_tx').notNullable();
    t.text('tx_hash').notNullable().unique();
    t.specificType('max_fee_per_gas', 'numeric(78,0)').notNullable();
    t.specificType('max_priority_fee_per_gas', 'numeric(78,0)').notNullable();
    // signed -> broadcast -> mined | replaced (another attempt of the same nonce was mined) | dropped
    t.text('status').notNullable();
    t.text('token_address');
    t.text('transfer_to');
    t.specificType('transfer_value', 'numeric(78,0)');
    // EIP-3009: the random 32-byte nonce and its validity window.
    t.text('authorization_nonce');
    t.bigInteger('valid_before');
    t.bigInteger('block_number');
    t.text('block_hash');
    t.integer('log_index');
    t.integer('receipt_status');
    t.specificType('gas_used', 'numeric(78,0)');
    t.specificType('effective_gas_price', 'numeric(78,0)');
    t.text('last_error');
    ts(t, 'created_at').notNullable();
    ts(t, 'broadcast_at');
    ts(t, 'mined_at');
    ts(t, 'updated_at').notNullable();
    t.index(['operation_id']);
    t.index(['chain_id', 'from_address', 'nonce']);
  });
  await knex.raw(`ALTER TABLE chain_transactions ADD CONSTRAINT chain_transactions_status_known CHECK (status IN ('signed','broadcast','mined','replaced','dropped'))`);
  await knex.raw(`CREATE INDEX chain_transactions_open ON chain_transactions (created_at) WHERE status IN ('signed','broadcast')`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['chain_transactions', 'chain_nonces', 'chain_settings']) await knex.schema.dropTableIfExists(table);
}
