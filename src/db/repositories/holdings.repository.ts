// What the account summary values outside the wallet's balances, read in one statement: the earn positions with
// their vaults and prices, and the borrow collateral and debts with their prices and markets.
import { rows, type Db } from '../knex.js';
import { identifier, list, sql } from '../sql.js';
import { pricedHoldings, toPricedHoldings, type PricedHoldings } from './market.repository.js';
import { splitValued, VAULT_COLUMNS, type ValuedPosition } from './vault.repository.js';

export interface DefiHoldings {
  earn: ValuedPosition[];
  borrow: PricedHoldings;
}

// Carried as JSON: NUMERIC travels as text (a JSON number would lose digits), timestamps are turned back into Dates.
const VAULT_NUMERIC: ReadonlySet<string> = new Set(['total_assets', 'total_shares', 'capacity', 'reward_rate_ray', 'acc_reward_per_share_ray']);
const DATES = ['created_at', 'updated_at', 'v__last_accrued_at', 'v__created_at', 'pr__observed_at', 'm__last_accrued_at', 'm__created_at'];

const vaultColumns = list(VAULT_COLUMNS.map((c) => (VAULT_NUMERIC.has(c) ? sql`v.${identifier(c)}::text AS ${identifier(`v__${c}`)}` : sql`v.${identifier(c)} AS ${identifier(`v__${c}`)}`)));
const holdingsStatement = (walletId: string) => sql<{ earn: unknown; borrow: unknown }>`SELECT
  (SELECT coalesce(json_agg(x ORDER BY x.created_at, x.id), '[]'::json) FROM (
     SELECT e.id, e.agent_id, e.wallet_id, e.vault_id, e.shares::text AS shares, e.principal::text AS principal,
            e.reward_checkpoint_ray::text AS reward_checkpoint_ray, e.rewards_accrued::text AS rewards_accrued, e.created_at, e.updated_at,
            ${vaultColumns}, pr.usd_e8::text AS pr__usd_e8, pr.observed_at AS pr__observed_at, pr.source AS pr__source
       FROM earn_positions e JOIN earn_vaults v ON v.id = e.vault_id LEFT JOIN prices pr ON pr.asset_symbol = v.asset_symbol
      WHERE e.wallet_id = ${walletId}) x) AS earn,
  (SELECT coalesce(json_agg(y ORDER BY y.kind, y.asset_symbol), '[]'::json) FROM (${pricedHoldings(walletId)}) y) AS borrow`;

function withDates(row: Record<string, unknown>): Record<string, unknown> {
  for (const k of DATES) if (typeof row[k] === 'string') row[k] = new Date(row[k] as string);
  return row;
}

const parsed = (v: unknown): Record<string, unknown>[] => (typeof v === 'string' ? JSON.parse(v) : v) as Record<string, unknown>[];

export async function readDefiHoldings(db: Db, walletId: string): Promise<DefiHoldings> {
  const [row] = await rows(db, holdingsStatement(walletId));
  if (!row) throw new Error('the holdings statement returned no row');
  return { earn: parsed(row.earn).map(withDates).map(splitValued), borrow: toPricedHoldings(parsed(row.borrow).map(withDates)) };
}
