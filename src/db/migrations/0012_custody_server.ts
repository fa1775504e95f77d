// Issue 24 (the owner's limits hold on chain): in evm mode an agent's wallet is an AgentAccount contract whose owner
// is the owner's signer. Owners record that signer; a wallet records whether it is such an account, and the lane key
// the server holds for it (`sealed_private_key` then seals the lane key, `address` is the account's); a one-off
// payment records the cheque id it has in its account.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('owners', (t) => {
    // The address whose key the owner keeps: every owner change of an agent in evm mode is signed by it (EIP-712).
    t.text('signer_address');
  });
  await knex.schema.alterTable('wallets', (t) => {
    // 'eoa': the wallet's own key is sealed here (simulated chain, and wallets created before this issue);
    // 'account': `address` is an AgentAccount and the sealed key is its lane key (`lane_address`).
    t.text('custody').notNullable().defaultTo('eoa');
    t.text('lane_address');
  });
  await knex.raw(`ALTER TABLE wallets ADD CONSTRAINT wallets_custody_known CHECK (custody IN ('eoa','account'))`);
  await knex.schema.alterTable('one_off_payments', (t) => {
    t.text('cheque_id');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('one_off_payments', (t) => t.dropColumn('cheque_id'));
  await knex.raw('ALTER TABLE wallets DROP CONSTRAINT IF EXISTS wallets_custody_known');
  await knex.schema.alterTable('wallets', (t) => {
    t.dropColumn('custody');
    t.dropColumn('lane_address');
  });
  await knex.schema.alterTable('owners', (t) => t.dropColumn('signer_address'));
}
