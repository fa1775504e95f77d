// Recipients: the agent's named payees (recurring or one-off).
import type { Db } from '../knex.js';
import { newestFirst, type Page } from './keyset.js';

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

export async function findRecipientsByAddress(db: Db, agentId: string, address: string): Promise<RecipientRow[]> {
  return db('recipients').where({ agent_id: agentId }).whereRaw('lower(address) = lower(?)', [address]).orderBy('created_at');
}

export async function findRecipientsByName(db: Db, agentId: string, name: string): Promise<RecipientRow[]> {
  return db('recipients').where({ agent_id: agentId }).whereRaw('lower(name) = lower(?)', [name]).orderBy('created_at');
}

export async function listRecipients(db: Db, agentId: string, p: Page): Promise<RecipientRow[]> {
  return newestFirst(db('recipients').where({ agent_id: agentId }), p);
}
