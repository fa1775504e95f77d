// Recipients: the agent's named payees (recurring or one-off).
import { rows, type Db } from '../knex.js';
import { prepared, sql } from '../sql.js';
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

/** The distinct addresses of the agent's recipients (lower case): an account's payees when its policy has no allowed_recipients. */
export async function listRecipientAddresses(db: Db, agentId: string): Promise<string[]> {
  const found: { address: string }[] = await db('recipients').where({ agent_id: agentId }).distinct(db.raw('lower(address) AS address')).orderBy('address');
  return found.map((r) => r.address);
}

/** What routing needs of the agent's payees at an address: its recipients there and its confirmed trusted destinations there, oldest first. */
export interface Payees {
  recipients: Pick<RecipientRow, 'id' | 'agent_id' | 'kind' | 'name' | 'address'>[];
  destinations: Pick<TrustedDestinationRow, 'id' | 'address' | 'label'>[];
}

/** The payees at `address` as the two columns of Payees (written once; both reads below select it). */
const payeesAt = (agentId: string, address: string) => sql`
       (SELECT coalesce(json_agg(json_build_object('id', r.id, 'agent_id', r.agent_id, 'kind', r.kind, 'name', r.name, 'address', r.address) ORDER BY r.created_at), '[]'::json)
          FROM recipients r WHERE r.agent_id = ${agentId}::uuid AND lower(r.address) = lower(${address}::text)) AS recipients,
       (SELECT coalesce(json_agg(json_build_object('id', d.id, 'address', d.address, 'label', d.label) ORDER BY d.created_at), '[]'::json)
          FROM trusted_destinations d WHERE d.agent_id = ${agentId}::uuid AND d.status = 'confirmed' AND lower(d.address) = lower(${address}::text)) AS destinations`;

/** The agent's payees at `address`, in one statement. */
export async function findPayeesByAddress(db: Db, agentId: string, address: string): Promise<Payees> {
  const [row] = await rows(db, prepared(sql<Payees>`SELECT ${payeesAt(agentId, address)}`, 'agentapi_payees'));
  return row!;
}

export type PayeesAndPrice = Payees & { price: PriceRow | null };

/** The payees at `address` and the price row of `symbol` (null when the feed has none), in one statement: what a payment to an address reads. */
export async function findPayeesAndPrice(db: Db, agentId: string, address: string, symbol: string): Promise<PayeesAndPrice> {
  const [row] = await rows(
    db,
    prepared(
      sql<Payees & { [K in keyof PriceRow]: PriceRow[K] | null }>`SELECT ${payeesAt(agentId, address)}, p.asset_symbol, p.usd_e8, p.observed_at, p.source
       FROM (SELECT 1) AS one LEFT JOIN prices p ON p.asset_symbol = ${symbol}::text`,
      'agentapi_payees_and_price',
    ),
  );
  const { recipients, destinations, asset_symbol, usd_e8, observed_at, source } = row!;
  return { recipients, destinations, price: asset_symbol === null ? null : { asset_symbol, usd_e8: usd_e8!, observed_at, source: source! } };
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
    db.raw(
      `(SELECT t.id FROM trusted_destinations t WHERE t.agent_id = r.agent_id AND t.status = 'confirmed' AND lower(t.address) = lower(r.address) ORDER BY t.created_at, t.id LIMIT 1) AS trusted_destination_id`,
    ),
    db.raw(`(SELECT p.id FROM recurring_payments p WHERE p.agent_id = r.agent_id AND p.recipient_id = r.id AND p.status = 'active' ORDER BY p.created_at, p.id LIMIT 1) AS recurring_payment_id`),
  );
}

export async function findLinkedRecipient(db: Db, agentId: string, id: string): Promise<LinkedRecipientRow | undefined> {
  return withLinks(db).where({ 'r.agent_id': agentId, 'r.id': id }).first();
}

export async function listLinkedRecipients(db: Db, agentId: string, p: Page): Promise<LinkedRecipientRow[]> {
  return newestFirst(withLinks(db).where({ 'r.agent_id': agentId }), p);
}
