// The one registry of columns sealed under MASTER_KEY (src/lib/crypto.ts); `npm run rotate-master-key` re-seals exactly these.
// A new sealed column is one line here; test/foundation/master-key.test.ts fails while a `sealed_*` column is missing.

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
];
