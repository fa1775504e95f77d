// Ledger tables: assets, protocols, prices, the double-entry journal with materialised balances, holds,
// operations, activity, policies, recipients, recurring payments, one-off payments, trusted destinations,
// withdrawal methods and the simulated chain's failing addresses. Assets, protocols and prices are seeded.
import type { Knex } from 'knex';

const MONEY = 'NUMERIC(78,0)';

export const SEED_ASSETS = [
  {
    symbol: 'USDC',
    name: 'USD Coin',
    decimals: 6,
    category: 'cash',
    contract_address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    eip712_name: 'USD Coin',
    eip712_version: '2',
    usd_e8: '100000000',
  },
  { symbol: 'EURC', name: 'Euro Coin', decimals: 6, category: 'cash', contract_address: '0x60a3E35Cc302bFA44Cb288Bc5a4F316Fdb1adb42', eip712_name: 'EURC', eip712_version: '2', usd_e8: '108000000' },
  { symbol: 'ETH', name: 'Ether', decimals: 18, category: 'crypto', contract_address: null, eip712_name: null, eip712_version: null, usd_e8: '300000000000' },
  {
    symbol: 'WETH',
    name: 'Wrapped Ether',
    decimals: 18,
    category: 'crypto',
    contract_address: '0x4200000000000000000000000000000000000006',
    eip712_name: null,
    eip712_version: null,
    usd_e8: '300000000000',
  },
  {
    symbol: 'CBBTC',
    name: 'Coinbase Wrapped BTC (cbBTC)',
    decimals: 8,
    category: 'crypto',
    contract_address: '0xcbB7C0000aB88B473b1f5aFd9ef808440eed33Bf',
    eip712_name: null,
    eip712_version: null,
    usd_e8: '6000000000000',
  },
] as const;

export const SEED_PROTOCOLS = [
  { id: 'aave-v3', name: 'Aave v3', kinds: ['earn', 'borrow'], asset_symbols: ['USDC', 'EURC', 'WETH', 'CBBTC'] },
  { id: 'morpho', name: 'Morpho', kinds: ['earn', 'borrow'], asset_symbols: ['USDC', 'EURC', 'WETH', 'CBBTC'] },
  { id: 'moonwell', name: 'Moonwell', kinds: ['earn', 'borrow'], asset_symbols: ['USDC', 'WETH', 'CBBTC'] },
  { id: 'uniswap-v3', name: 'Uniswap v3', kinds: ['conversion'], asset_symbols: ['USDC', 'EURC', 'ETH', 'WETH', 'CBBTC'] },
  { id: 'aerodrome', name: 'Aerodrome', kinds: ['conversion'], asset_symbols: ['USDC', 'EURC', 'ETH', 'WETH', 'CBBTC'] },
];

export async function up(knex: Knex): Promise<void> {
  const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

  await knex.schema.createTable('assets', (t) => {
    t.text('symbol').primary();
    t.text('name').notNullable();
    t.text('chain').notNullable().defaultTo('base');
    t.integer('chain_id').notNullable().defaultTo(8453);
    t.text('contract_address');
    t.integer('decimals').notNullable();
    t.text('category').notNullable();
    t.text('eip712_name');
    t.text('eip712_version');
  });

  await knex.schema.createTable('protocols', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.jsonb('kinds').notNullable();
    t.jsonb('asset_symbols').notNullable();
    t.text('chain').notNullable().defaultTo('base');
  });

  // observed_at null = a configured constant price (never stale); a set price ages from observed_at.
  await knex.schema.createTable('prices', (t) => {
    t.text('asset_symbol').primary().references('assets.symbol');
    t.specificType('usd_e8', MONEY).notNullable();
    ts(t, 'observed_at');
    t.text('source').notNullable().defaultTo('configured');
  });

  await knex.schema.createTable('balances', (t) => {
    t.text('wallet_id').notNullable().references('wallets.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.specificType('available', MONEY).notNullable().defaultTo(0);
    t.specificType('held', MONEY).notNullable().defaultTo(0);
    ts(t, 'updated_at').notNullable();
    t.primary(['wallet_id', 'asset_symbol']);
  });
  await knex.raw('ALTER TABLE balances ADD CONSTRAINT balances_available_nonnegative CHECK (available >= 0)');
  await knex.raw('ALTER TABLE balances ADD CONSTRAINT balances_held_nonnegative CHECK (held >= 0)');

  // Append-only: one row per leg; every journal_id sums to zero per asset.
  await knex.schema.createTable('journal_entries', (t) => {
    t.bigIncrements('id');
    t.uuid('journal_id').notNullable();
    t.uuid('operation_id');
    t.text('account').notNullable();
    t.text('wallet_id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.specificType('amount', MONEY).notNullable();
    t.text('entry_type').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['journal_id']);
    t.index(['wallet_id', 'asset_symbol']);
    t.index(['operation_id']);
  });
  await knex.raw(`CREATE FUNCTION journal_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'journal_entries is append-only'; END $$`);
  await knex.raw('CREATE TRIGGER journal_entries_no_update BEFORE UPDATE OR DELETE ON journal_entries FOR EACH ROW EXECUTE FUNCTION journal_entries_append_only()');

  await knex.schema.createTable('operations', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable();
    t.text('type').notNullable();
    t.text('status').notNullable();
    t.text('resource_type').notNullable();
    t.text('resource_id').notNullable();
    t.text('asset_symbol');
    t.specificType('amount', MONEY);
    t.specificType('amount_usd_e8', MONEY);
    t.specificType('fee_usd_e8', MONEY).notNullable().defaultTo(0);
    t.boolean('counts_toward_limits').notNullable().defaultTo(false);
    t.text('human_message').notNullable();
    t.text('idempotency_key_hash');
    t.text('error_code');
    t.text('error_message');
    t.text('to_address');
    t.text('tx_hash');
    t.jsonb('details').notNullable().defaultTo('{}');
    ts(t, 'settle_after');
    ts(t, 'created_at').notNullable();
    ts(t, 'submitted_at');
    ts(t, 'executed_at');
    ts(t, 'failed_at');
    ts(t, 'updated_at').notNullable();
    t.index(['agent_id', 'created_at', 'id']);
  });
  await knex.raw(`ALTER TABLE operations ADD CONSTRAINT operations_status_known CHECK (status IN ('accepted','submitted','executed','execution_failed','policy_rejected','cancelled'))`);
  await knex.raw(`CREATE INDEX operations_due ON operations (settle_after) WHERE status IN ('accepted','submitted')`);
  await knex.raw(`CREATE INDEX operations_usage ON operations (agent_id, created_at) WHERE counts_toward_limits AND status IN ('accepted','submitted','executed')`);

  await knex.schema.createTable('holds', (t) => {
    t.uuid('id').primary();
    t.uuid('operation_id');
    t.text('wallet_id').notNullable();
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.specificType('amount', MONEY).notNullable();
    t.text('status').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'resolved_at');
    t.index(['operation_id']);
  });
  await knex.raw(`ALTER TABLE holds ADD CONSTRAINT holds_status_known CHECK (status IN ('held','captured','released'))`);
  await knex.raw('ALTER TABLE holds ADD CONSTRAINT holds_amount_positive CHECK (amount > 0)');

  await knex.schema.createTable('activity', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable();
    t.text('type').notNullable();
    t.text('status').notNullable();
    t.uuid('operation_id');
    t.text('direction').notNullable();
    t.text('asset_symbol');
    t.specificType('amount', MONEY);
    t.specificType('amount_usd_e8', MONEY);
    t.text('counterparty');
    t.text('description').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['agent_id', 'created_at', 'id']);
  });

  await knex.schema.createTable('agent_policies', (t) => {
    t.uuid('agent_id').primary().references('agents.id');
    t.jsonb('policy').notNullable();
    ts(t, 'updated_at').notNullable();
  });

  await knex.schema.createTable('recipients', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('kind').notNullable();
    t.text('name').notNullable();
    t.text('address').notNullable();
    t.text('chain').notNullable().defaultTo('base');
    t.text('asset_symbol').references('assets.symbol');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.index(['agent_id', 'created_at', 'id']);
  });

  await knex.schema.createTable('recurring_payments', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.uuid('recipient_id').notNullable().references('recipients.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.specificType('amount', MONEY).notNullable();
    t.text('interval').notNullable();
    t.text('status').notNullable().defaultTo('active');
    ts(t, 'next_run_at');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.index(['agent_id', 'created_at', 'id']);
  });

  await knex.schema.createTable('one_off_payments', (t) => {
    t.uuid('id').primary();
    t.uuid('operation_id').notNullable().unique();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable();
    t.uuid('hold_id').notNullable();
    t.text('to_address').notNullable();
    t.text('asset_symbol').notNullable();
    t.specificType('amount', MONEY).notNullable();
    t.text('status').notNullable();
    ts(t, 'unlock_at').notNullable();
    ts(t, 'expires_at').notNullable();
    ts(t, 'resolved_at');
    ts(t, 'created_at').notNullable();
  });
  await knex.raw(`CREATE INDEX one_off_payments_expiring ON one_off_payments (expires_at) WHERE status = 'pending'`);

  await knex.schema.createTable('trusted_destinations', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('kind').notNullable();
    t.text('chain').notNullable();
    t.text('address').notNullable();
    t.text('label').notNullable();
    t.text('status').notNullable();
    ts(t, 'confirmable_at').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'confirmed_at');
    ts(t, 'cancelled_at');
    ts(t, 'removed_at');
    ts(t, 'updated_at').notNullable();
    t.index(['agent_id', 'created_at', 'id']);
  });

  await knex.schema.createTable('withdrawal_methods', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_id').notNullable().references('owners.id');
    t.text('kind').notNullable();
    t.text('label').notNullable();
    t.text('bank_name');
    t.text('account_last4').notNullable();
    t.text('currency').notNullable().defaultTo('USD');
    t.text('status').notNullable().defaultTo('active');
    ts(t, 'created_at').notNullable();
    t.index(['owner_id', 'created_at', 'id']);
  });

  await knex.schema.createTable('chain_failing_addresses', (t) => {
    t.text('address').primary();
    ts(t, 'created_at').notNullable();
  });

  await knex.raw('CREATE UNIQUE INDEX wallets_address_unique ON wallets (lower(address)) WHERE address IS NOT NULL');

  await knex('assets').insert(SEED_ASSETS.map(({ usd_e8: _, ...asset }) => asset));
  await knex('protocols').insert(SEED_PROTOCOLS.map((p) => ({ ...p, kinds: JSON.stringify(p.kinds), asset_symbols: JSON.stringify(p.asset_symbols) })));
  await knex('prices').insert(SEED_ASSETS.map((a) => ({ asset_symbol: a.symbol, usd_e8: a.usd_e8, observed_at: null, source: 'configured' })));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS wallets_address_unique');
  for (const table of [
    'chain_failing_addresses',
    'withdrawal_methods',
    'trusted_destinations',
    'one_off_payments',
    'recurring_payments',
    'recipients',
    'agent_policies',
    'activity',
    'holds',
    'operations',
    'journal_entries',
    'balances',
    'prices',
    'protocols',
    'assets',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.raw('DROP FUNCTION IF EXISTS journal_entries_append_only()');
}
