// DeFi on chain (issue 16): a conversion quote priced off a Uniswap v2 route records the route it read (every leg's
// pair, tokens, reserves and amounts) so execution swaps along exactly that route. Null for quotes at the price feed.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversion_quotes', (t) => {
    t.jsonb('route');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversion_quotes', (t) => {
    t.dropColumn('route');
  });
}
