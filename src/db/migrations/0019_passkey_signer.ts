// Issue 27 (a passkey as the owner's onchain signer): an agent account handed over to one of its owner's passkeys is
// owned on chain by that passkey's PasskeyOwner contract (contracts/PasskeyOwner.sol), not by the owner's key. The
// wallet records its own signer then (null: the owner's `signer_address`, as before) and which passkey it is.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('wallets', (t) => {
    // The account's owner on chain when it is not the owner's signer (the passkey's PasskeyOwner address).
    t.text('owner_signer_address');
    // The passkey whose PasskeyOwner that is (owner_passkeys.id), set with owner_signer_address.
    t.uuid('owner_passkey_id').references('owner_passkeys.id');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('wallets', (t) => {
    t.dropColumn('owner_passkey_id');
    t.dropColumn('owner_signer_address');
  });
}
