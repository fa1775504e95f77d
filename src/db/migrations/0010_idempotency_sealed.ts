// Idempotency records keep the response as the exact bytes sent, sealed with MASTER_KEY (issue 10 items 5, 13).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    // `v1.<iv>.<tag>.<ciphertext>` (src/lib/crypto.ts) of the JSON body exactly as written to the wire.
    t.text('sealed_response');
  });
  // Records written before this migration keep their jsonb body until the idempotency-cleanup loop seals
  // it (the migration has no MASTER_KEY); new records leave it null.
  await knex.raw('ALTER TABLE idempotency_keys ALTER COLUMN response_body DROP NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex('idempotency_keys').whereNull('response_body').delete();
  await knex.raw('ALTER TABLE idempotency_keys ALTER COLUMN response_body SET NOT NULL');
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.dropColumn('sealed_response');
  });
}
