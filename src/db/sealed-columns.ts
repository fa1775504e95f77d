// The one list of columns sealed with MASTER_KEY (the Sealer of src/lib/crypto.ts, `v1.` values): a key
// rotation re-seals exactly these, and test/db/sealed-columns.test.ts fails when a `sealed_*` column is missing here.

export interface SealedColumn {
  table: string;
  column: string;
  /** The primary key columns, to update one row at a time. */
  key: readonly string[];
}

export const SEALED_COLUMNS: readonly SealedColumn[] = [
  { table: 'wallets', column: 'sealed_private_key', key: ['id'] },
  { table: 'webhook_endpoints', column: 'sealed_secret', key: ['id'] },
  { table: 'webhook_endpoints', column: 'sealed_previous_secret', key: ['id'] },
  { table: 'oauth_signing_keys', column: 'sealed_private_jwk', key: ['kid'] },
  { table: 'idempotency_keys', column: 'sealed_response', key: ['agent_id', 'key'] },
  { table: 'oauth_models', column: 'sealed_secrets', key: ['model', 'id'] },
];
