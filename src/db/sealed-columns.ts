// The one registry of columns sealed under MASTER_KEY (the Sealer of src/lib/crypto.ts, `v1.` values):
// `npm run rotate-master-key` re-seals exactly these. A new sealed column is one line here;
// test/db/sealed-columns.test.ts fails while a `sealed_*` column of the schema is missing.

export interface SealedColumn {
  table: string;
  /** The table's primary key, one or more columns (rows are walked in batches in this order). */
  key: readonly string[];
  /** Text holding `v1.<iv>.<tag>.<ciphertext>` or NULL. */
  column: string;
}

export const SEALED_COLUMNS: readonly SealedColumn[] = [
  { table: 'wallets', key: ['id'], column: 'sealed_private_key' },
  { table: 'webhook_endpoints', key: ['id'], column: 'sealed_secret' },
  { table: 'webhook_endpoints', key: ['id'], column: 'sealed_previous_secret' },
  { table: 'oauth_signing_keys', key: ['kid'], column: 'sealed_private_jwk' },
  { table: 'idempotency_keys', key: ['agent_id', 'key'], column: 'sealed_response' },
  { table: 'oauth_models', key: ['model', 'id'], column: 'sealed_secrets' },
];
