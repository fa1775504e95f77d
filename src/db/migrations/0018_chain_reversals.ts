// Issue 30 (items 4 and 5): deposits reversed by deep reorganisations, the deficits they can leave, and ETH that
// arrives through internal calls.
//
// A deposit credited from a block later orphaned is reversed, not deleted: `reversed_at` marks the row, and the
// uniqueness of (chain_id, tx_hash, log_index) now holds among the live rows only, so the same transaction mined
// again on the new branch is credited again (once). Internal ETH transfers (a contract forwarding ETH to a wallet)
// are rows of their own with log_index -2 - k (the k-th value-carrying internal call of the transaction into one of
// our wallets), beside token logs (>= 0) and the transaction's own value (-1).
//
// wallet_deficits: what a reversal could not take back because the wallet had already spent it, per wallet and
// asset. While a row exists the wallet's money writes are refused; a later deposit of the asset covers it.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('chain_deposits', (t) => {
    t.timestamp('reversed_at', { useTz: true });
  });
  await knex.raw('ALTER TABLE chain_deposits DROP CONSTRAINT chain_deposits_chain_id_tx_hash_log_index_unique');
  await knex.raw('CREATE UNIQUE INDEX chain_deposits_live_unique ON chain_deposits (chain_id, tx_hash, log_index) WHERE reversed_at IS NULL');
  // The rewind lists the live deposits above the fork point.
  await knex.raw('CREATE INDEX chain_deposits_live_block ON chain_deposits (chain_id, block_number) WHERE reversed_at IS NULL');

  await knex.schema.createTable('wallet_deficits', (t) => {
    t.text('wallet_id').notNullable().references('wallets.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    // Base units still owed (> 0; the row is deleted once covered).
    t.specificType('amount', 'numeric(78,0)').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.primary(['wallet_id', 'asset_symbol']);
  });
  await knex.raw('ALTER TABLE wallet_deficits ADD CONSTRAINT wallet_deficits_positive CHECK (amount > 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('wallet_deficits');
  await knex.raw('DROP INDEX IF EXISTS chain_deposits_live_block');
  await knex.raw('DROP INDEX IF EXISTS chain_deposits_live_unique');
  await knex.raw('ALTER TABLE chain_deposits ADD CONSTRAINT chain_deposits_chain_id_tx_hash_log_index_unique UNIQUE (chain_id, tx_hash, log_index)');
  await knex.schema.alterTable('chain_deposits', (t) => {
    t.dropColumn('reversed_at');
  });
}
