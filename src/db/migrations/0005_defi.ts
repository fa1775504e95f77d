// DeFi tables: earn vaults (ERC-4626 share accounting) and positions, borrow markets (Aave-style
// reserves with a debt index), collateral and scaled debt per wallet, conversion quotes and their
// single-use consumption marker. Seeds a few vaults and markets on the ledger's assets and protocols.
import type { Knex } from 'knex';

const MONEY = 'NUMERIC(78,0)';
const RAY = 10n ** 27n;

/** Reward units per share unit per year (RAY) paying `bps` of a same-asset deposit at share price 1:10^offset. */
const rewardRate = (bps: bigint, offset: number): string => ((RAY * bps) / 10_000n / 10n ** BigInt(offset)).toString();

export const SEED_VAULTS = [
  {
    id: '6f1d2a10-0000-4000-8000-000000000001',
    name: 'Morpho USDC Prime',
    protocol_id: 'morpho',
    asset_symbol: 'USDC',
    address: '0x1111111111111111111111111111111111110001',
    apy_bps: 520,
    decimals_offset: 6,
    capacity: '50000000000000',
    reward_asset_symbol: 'USDC',
    reward_rate_ray: rewardRate(50n, 6),
  },
  {
    id: '6f1d2a10-0000-4000-8000-000000000002',
    name: 'Aave v3 USDC',
    protocol_id: 'aave-v3',
    asset_symbol: 'USDC',
    address: '0x1111111111111111111111111111111111110002',
    apy_bps: 410,
    decimals_offset: 6,
    capacity: null,
    reward_asset_symbol: null,
    reward_rate_ray: '0',
  },
  {
    id: '6f1d2a10-0000-4000-8000-000000000003',
    name: 'Moonwell USDC',
    protocol_id: 'moonwell',
    asset_symbol: 'USDC',
    address: '0x1111111111111111111111111111111111110003',
    apy_bps: 480,
    decimals_offset: 6,
    capacity: '1000000000000',
    reward_asset_symbol: 'USDC',
    reward_rate_ray: rewardRate(100n, 6),
  },
  {
    id: '6f1d2a10-0000-4000-8000-000000000004',
    name: 'Aave v3 WETH',
    protocol_id: 'aave-v3',
    asset_symbol: 'WETH',
    address: '0x1111111111111111111111111111111111110004',
    apy_bps: 190,
    decimals_offset: 0,
    capacity: null,
    reward_asset_symbol: null,
    reward_rate_ray: '0',
  },
  {
    id: '6f1d2a10-0000-4000-8000-000000000005',
    name: 'Morpho EURC',
    protocol_id: 'morpho',
    asset_symbol: 'EURC',
    address: '0x1111111111111111111111111111111111110005',
    apy_bps: 350,
    decimals_offset: 6,
    capacity: null,
    reward_asset_symbol: null,
    reward_rate_ray: '0',
  },
] as const;

export const SEED_MARKETS = [
  {
    id: '7a2e3b20-0000-4000-8000-000000000001',
    protocol_id: 'aave-v3',
    asset_symbol: 'WETH',
    collateral_enabled: true,
    borrow_enabled: true,
    ltv_bps: 8050,
    liquidation_threshold_bps: 8300,
    borrow_apr_bps: 300,
  },
  {
    id: '7a2e3b20-0000-4000-8000-000000000002',
    protocol_id: 'aave-v3',
    asset_symbol: 'CBBTC',
    collateral_enabled: true,
    borrow_enabled: false,
    ltv_bps: 7300,
    liquidation_threshold_bps: 7800,
    borrow_apr_bps: 0,
  },
  {
    id: '7a2e3b20-0000-4000-8000-000000000003',
    protocol_id: 'aave-v3',
    asset_symbol: 'USDC',
    collateral_enabled: true,
    borrow_enabled: true,
    ltv_bps: 7500,
    liquidation_threshold_bps: 7800,
    borrow_apr_bps: 500,
  },
  {
    id: '7a2e3b20-0000-4000-8000-000000000004',
    protocol_id: 'aave-v3',
    asset_symbol: 'EURC',
    collateral_enabled: true,
    borrow_enabled: true,
    ltv_bps: 7500,
    liquidation_threshold_bps: 7800,
    borrow_apr_bps: 450,
  },
  {
    id: '7a2e3b20-0000-4000-8000-000000000005',
    protocol_id: 'aave-v3',
    asset_symbol: 'ETH',
    collateral_enabled: true,
    borrow_enabled: false,
    ltv_bps: 8050,
    liquidation_threshold_bps: 8300,
    borrow_apr_bps: 0,
  },
] as const;

export async function up(knex: Knex): Promise<void> {
  const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

  // total_assets includes interest accrued up to last_accrued_at; acc_reward_per_share_ray likewise.
  await knex.schema.createTable('earn_vaults', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.text('protocol_id').notNullable().references('protocols.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.text('address').notNullable();
    t.integer('apy_bps').notNullable();
    t.integer('decimals_offset').notNullable().defaultTo(0);
    t.specificType('total_assets', MONEY).notNullable().defaultTo(0);
    t.specificType('total_shares', MONEY).notNullable().defaultTo(0);
    t.specificType('capacity', MONEY);
    t.text('reward_asset_symbol').references('assets.symbol');
    t.specificType('reward_rate_ray', MONEY).notNullable().defaultTo(0);
    t.specificType('acc_reward_per_share_ray', MONEY).notNullable().defaultTo(0);
    t.boolean('active').notNullable().defaultTo(true);
    ts(t, 'last_accrued_at');
    ts(t, 'created_at').notNullable();
  });
  await knex.raw('CREATE UNIQUE INDEX earn_vaults_address_unique ON earn_vaults (lower(address))');
  await knex.raw('ALTER TABLE earn_vaults ADD CONSTRAINT earn_vaults_nonnegative CHECK (total_assets >= 0 AND total_shares >= 0 AND apy_bps >= 0 AND decimals_offset BETWEEN 0 AND 18)');

  await knex.schema.createTable('earn_positions', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable().references('wallets.id');
    t.uuid('vault_id').notNullable().references('earn_vaults.id');
    t.specificType('shares', MONEY).notNullable().defaultTo(0);
    t.specificType('principal', MONEY).notNullable().defaultTo(0);
    t.specificType('reward_checkpoint_ray', MONEY).notNullable().defaultTo(0);
    t.specificType('rewards_accrued', MONEY).notNullable().defaultTo(0);
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.unique(['wallet_id', 'vault_id']);
    t.index(['agent_id', 'created_at', 'id']);
  });
  await knex.raw('ALTER TABLE earn_positions ADD CONSTRAINT earn_positions_nonnegative CHECK (shares >= 0 AND principal >= 0 AND rewards_accrued >= 0)');

  // One reserve per asset (Aave v3 style): collateral parameters and the variable-borrow index.
  await knex.schema.createTable('borrow_markets', (t) => {
    t.uuid('id').primary();
    t.text('protocol_id').notNullable().references('protocols.id');
    t.text('asset_symbol').notNullable().unique().references('assets.symbol');
    t.boolean('collateral_enabled').notNullable();
    t.boolean('borrow_enabled').notNullable();
    t.integer('ltv_bps').notNullable();
    t.integer('liquidation_threshold_bps').notNullable();
    t.integer('borrow_apr_bps').notNullable();
    t.specificType('borrow_index_ray', MONEY).notNullable().defaultTo(RAY.toString());
    ts(t, 'last_accrued_at');
    ts(t, 'created_at').notNullable();
  });
  await knex.raw(
    'ALTER TABLE borrow_markets ADD CONSTRAINT borrow_markets_params CHECK (ltv_bps >= 0 AND ltv_bps < liquidation_threshold_bps AND liquidation_threshold_bps <= 10000 AND borrow_apr_bps >= 0)',
  );

  await knex.schema.createTable('borrow_collateral', (t) => {
    t.text('wallet_id').notNullable().references('wallets.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.uuid('agent_id').notNullable().references('agents.id');
    t.specificType('amount', MONEY).notNullable().defaultTo(0);
    ts(t, 'updated_at').notNullable();
    t.primary(['wallet_id', 'asset_symbol']);
  });
  await knex.raw('ALTER TABLE borrow_collateral ADD CONSTRAINT borrow_collateral_nonnegative CHECK (amount >= 0)');

  // Debt owed = scaled_amount · borrow_index (rounded up).
  await knex.schema.createTable('borrow_debts', (t) => {
    t.text('wallet_id').notNullable().references('wallets.id');
    t.text('asset_symbol').notNullable().references('assets.symbol');
    t.uuid('agent_id').notNullable().references('agents.id');
    t.specificType('scaled_amount', MONEY).notNullable().defaultTo(0);
    ts(t, 'updated_at').notNullable();
    t.primary(['wallet_id', 'asset_symbol']);
  });
  await knex.raw('ALTER TABLE borrow_debts ADD CONSTRAINT borrow_debts_nonnegative CHECK (scaled_amount >= 0)');

  await knex.schema.createTable('conversion_quotes', (t) => {
    t.uuid('id').primary();
    t.uuid('agent_id').notNullable().references('agents.id');
    t.text('wallet_id').notNullable();
    t.text('from_asset').notNullable().references('assets.symbol');
    t.text('to_asset').notNullable().references('assets.symbol');
    t.specificType('from_amount', MONEY).notNullable();
    t.specificType('expected_out', MONEY).notNullable();
    t.specificType('min_amount_out', MONEY).notNullable();
    t.integer('slippage_bps').notNullable();
    t.integer('fee_bps').notNullable();
    t.specificType('fee_amount', MONEY).notNullable();
    t.specificType('fee_usd_e8', MONEY).notNullable();
    t.specificType('from_price_e8', MONEY).notNullable();
    t.specificType('to_price_e8', MONEY).notNullable();
    t.text('price_source').notNullable();
    t.text('protocol_id').notNullable();
    t.text('pool_address').notNullable();
    t.uuid('from_vault_id').references('earn_vaults.id');
    t.uuid('to_vault_id').references('earn_vaults.id');
    ts(t, 'expires_at').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['agent_id', 'created_at']);
  });

  // The single-use marker: the primary key makes a second consumption impossible, whatever the race.
  await knex.schema.createTable('conversion_quote_consumptions', (t) => {
    t.uuid('quote_id').primary().references('conversion_quotes.id');
    t.uuid('operation_id').notNullable().unique();
    ts(t, 'consumed_at').notNullable();
  });

  const now = new Date();
  await knex('earn_vaults').insert(SEED_VAULTS.map((v) => ({ ...v, created_at: now, last_accrued_at: null })));
  await knex('borrow_markets').insert(SEED_MARKETS.map((m) => ({ ...m, created_at: now, last_accrued_at: null })));
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['conversion_quote_consumptions', 'conversion_quotes', 'borrow_debts', 'borrow_collateral', 'borrow_markets', 'earn_positions', 'earn_vaults']) {
    await knex.schema.dropTableIfExists(table);
  }
}
