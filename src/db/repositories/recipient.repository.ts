// Recipients: the agent's named payees (recurring or one-off).
import type { Db, SqlCall, SqlStatement } from '../knex.js';
import { newestFirst, type Page } from './keyset.js';
import type { TrustedDestinationRow } from './trusted-destination.repository.js';
import type { PriceRow } from './ledger.repository.js';

export interface RecipientRow {
  id: string;
  agent_id: string;
  kind: 'recurring' | 'one_off';
  name: string;
  address: string;
  chain: 'base';
  asset_symbol: string | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertRecipient(db: Db, row: RecipientRow): Promise<void> {
  await db('recipients').insert(row);
}

export async function findRecipient(db: Db, agentId: string, id: string): Promise<RecipientRow | undefined> {
  return db('recipients').where({ agent_id: agentId, id }).first();
}

/** What routing needs of the agent's recipients at `address` and its confirmed trusted destinations there, oldest first, in one statement. */
export async function findPayeesByAddress(db: Db, agentId: string, address: string): Promise<{ recipients: Pick<RecipientRow, 'id' | 'agent_id' | 'kind' | 'name' | 'address'>[]; destinations: Pick<TrustedDestinationRow, 'id' | 'address' | 'label'>[] }> {
  const result = await db.raw(
    `SELECT
       (SELECT coalesce(json_agg(json_build_object('id', r.id, 'agent_id', r.agent_id, 'kind', r.kind, 'name', r.name, 'address', r.address) ORDER BY r.created_at), '[]'::json)
          FROM recipients r WHERE r.agent_id = :agentId AND lower(r.address) = lower(:address)) AS recipients,
       (SELECT coalesce(json_agg(json_build_object('id', d.id, 'address', d.address, 'label', d.label) ORDER BY d.created_at), '[]'::json)
          FROM trusted_destinations d WHERE d.agent_id = :agentId AND d.status = 'confirmed' AND lower(d.address) = lower(:address)) AS destinations`,
    { agentId, address },
  );
  return result.rows[0];
}

type PayeesAndPriceRow = { recipients: Pick<RecipientRow, 'id' | 'agent_id' | 'kind' | 'name' | 'address'>[]; destinations: Pick<TrustedDestinationRow, 'id' | 'address' | 'label'>[] } & { [K in keyof PriceRow]: PriceRow[K] | null };
export type PayeesAndPrice = Awaited<ReturnType<typeof findPayeesByAddress>> & { price: PriceRow | null };

/**
 * findPayeesByAddress and the price row of `symbol` (null when the feed has none) as ONE statement, run prepared at
 * the head of a multi-statement round trip (policy.repository lockPolicyWithUsage, knex statementsIn): a payment to
 * an address reads both in the round trip that takes the policy lock.
 */
const PAYEES_AND_PRICE: SqlStatement = {
  name: 'agentapi_payees_and_price',
  params: ['uuid', 'text', 'text'],
  text: `SELECT
       (SELECT coalesce(json_agg(json_build_object('id', r.id, 'agent_id', r.agent_id, 'kind', r.kind, 'name', r.name, 'address', r.address) ORDER BY r.created_at), '[]'::json)
          FROM recipients r WHERE r.agent_id = $1::uuid AND lower(r.address) = lower($2::text)) AS recipients,
       (SELECT coalesce(json_agg(json_build_object('id', d.id, 'address', d.address, 'label', d.label) ORDER BY d.created_at), '[]'::json)
          FROM trusted_destinations d WHERE d.agent_id = $1::uuid AND d.status = 'confirmed' AND lower(d.address) = lower($2::text)) AS destinations,
       p.asset_symbol, p.usd_e8, p.observed_at, p.source
     FROM (SELECT 1) AS one LEFT JOIN prices p ON p.asset_symbol = $3::text`,
};

export function payeesAndPriceStatement(agentId: string, address: string, symbol: string): SqlCall {
  return { statement: PAYEES_AND_PRICE, values: [agentId, address, symbol] };
}

/** The row of payeesAndPriceStatement. */
export function payeesAndPriceOf(row: PayeesAndPriceRow): PayeesAndPrice {
  const price = row.asset_symbol === null ? null : { asset_symbol: row.asset_symbol, usd_e8: row.usd_e8!, observed_at: row.observed_at, source: row.source! };
  return { recipients: row.recipients, destinations: row.destinations, price };
}

export async function findRecipientsByName(db: Db, agentId: string, name: string): Promise<RecipientRow[]> {
  return db('recipients').where({ agent_id: agentId }).whereRaw('lower(name) = lower(?)', [name]).orderBy('created_at');
}

export async function listRecipients(db: Db, agentId: string, p: Page): Promise<RecipientRow[]> {
  return newestFirst(db('recipients').where({ agent_id: agentId }), p);
}

/** A recipient with the ids its answer links to: the first confirmed trusted destination at its address, its first active recurring payment. */
export type LinkedRecipientRow = RecipientRow & { trusted_destination_id: string | null; recurring_payment_id: string | null };

/** The links as subselects of the recipient's own statement (one round trip for a page instead of two per row). */
function withLinks(db: Db) {
  return db('recipients as r').select(
    'r.*',
    db.raw(`(SELECT t.id FROM trusted_destinations t WHERE t.agent_id = r.agent_id AND t.status = 'confirmed' AND lower(t.address) = lower(r.address) ORDER BY t.created_at, t.id LIMIT 1) AS trusted_destination_id`),
    db.raw(`(SELECT p.id FROM recurring_payments p WHERE p.agent_id = r.agent_id AND p.recipient_id = r.id AND p.status = 'active' ORDER BY p.created_at, p.id LIMIT 1) AS recurring_payment_id`),
  );
}

export async function findLinkedRecipient(db: Db, agentId: string, id: string): Promise<LinkedRecipientRow | undefined> {
  return withLinks(db).where({ 'r.agent_id': agentId, 'r.id': id }).first();
}

export async function listLinkedRecipients(db: Db, agentId: string, p: Page): Promise<LinkedRecipientRow[]> {
  return newestFirst(withLinks(db).where({ 'r.agent_id': agentId }), p);
}
