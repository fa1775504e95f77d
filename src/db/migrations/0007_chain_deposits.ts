// Inbound deposits (issue 11): the block cursor of each chain's deposit watcher and every deposit it credited.
import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

export async function up(knex: Knex): Promise<void> {
  // The last block the watcher processed on a chain: its number and hash. The next block's parent hash must equal
  // `block_hash`; a mismatch is a reorganisation and the cursor walks back. Workers lock this row (FOR UPDATE)
  // while they apply a block, so two workers never credit the same block concurrently.
  await knex.schema.createTable('chain_cursors', (t) => {
    t.integer('chain_id').notNullable();
    t.text('name').notNullable();
    t.bigInteger('block_number').notNullable();
    // Null before the first block (a cursor created at block -1, i.e. starting at genesis).
    t.text('block_hash');
    ts(t, 'updated_at').notNullable();
    t.primary(['chain_id', 'name']);
  });

  // One row per credited deposit. `log_index` is the token Transfer log's index, or -1 for a plain ETH transfer
  // (a transaction carries at most one native value transfer), so (chain_id, tx_hash, log_index) names one credit.
  await knex.schema.createTable('chain_deposits', (t) => {
    t.uuid('id').primary();
    t.integer('chain_id').notNullable();
    t.text('tx_hash').notNullable();
    t.integer('log_index').notNullable();
    t.bigInteger('block_number').notNullable();
    t.text('block_hash').notNullable();
    t.text('wallet_id').notNullable();
    t.text('asset_symbol').notNullable();
    t.text('token_address');
    t.text('from_address').notNullable();
    t.text('to_address').notNullable();
    t.specificType('amount', 'numeric(78,0)').notNullable();
    ts(t, 'credited_at').notNullable();
    t.unique(['chain_id', 'tx_hash', 'log_index']);
    t.index(['wallet_id']);
  });

  // The transaction behind an activity row (on-chain deposits).
  await knex.schema.alterTable('activity', (t) => {
    t.text('tx_hash');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('activity', (t) => {
    t.dropColumn('tx_hash');
  });
  for (const table of ['chain_deposits', 'chain_cursors']) await knex.schema.dropTableIfExists(table);
}
