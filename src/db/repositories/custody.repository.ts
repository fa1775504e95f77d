// Agent accounts (issue 24, migration 0012): the owner's signer, an account wallet's lane key, cheque ids.
import type { Db } from '../knex.js';

/** An account wallet with what the custody service needs of its agent and owner. */
export interface AccountWalletRow {
  agent_id: string;
  owner_id: string;
  wallet_id: string;
  address: string;
  lane_address: string;
  sealed_private_key: string;
  /** The account's owner on chain as mirrored: the wallet's own signer (a passkey's) or else the owner's. */
  signer_address: string | null;
  /** The owner passkey whose PasskeyOwner owns the account (issue 27), or null (the owner's key). */
  owner_passkey_id: string | null;
}

export async function setOwnerSigner(db: Db, ownerId: string, signer: string): Promise<number> {
  return db('owners').where({ id: ownerId }).whereNull('signer_address').update({ signer_address: signer });
}

/** Makes the wallet an AgentAccount at `address` whose lane key is `sealedLaneKey` (its address `laneAddress`). */
export async function setWalletAccount(db: Db, walletId: string, address: string, laneAddress: string, sealedLaneKey: string): Promise<number> {
  return db('wallets').where({ id: walletId }).update({ address, lane_address: laneAddress, sealed_private_key: sealedLaneKey, custody: 'account' });
}

/** The account's owner on chain is now `signer`, the PasskeyOwner of the owner's passkey `passkeyId` (issue 27). */
export async function setWalletSigner(db: Db, walletId: string, signer: string, passkeyId: string): Promise<number> {
  return db('wallets').where({ id: walletId, custody: 'account' }).update({ owner_signer_address: signer, owner_passkey_id: passkeyId });
}

/** A new lane key after the owner rotated it on chain. */
export async function setWalletLane(db: Db, walletId: string, laneAddress: string, sealedLaneKey: string): Promise<number> {
  return db('wallets').where({ id: walletId, custody: 'account' }).update({ lane_address: laneAddress, sealed_private_key: sealedLaneKey });
}

/** Account wallets with their agent and owner (the signer is the wallet's own, else the owner's). */
const accountWallets = (db: Db) => db('wallets as w').join('agents as a', 'a.id', 'w.agent_id').join('owners as o', 'o.id', 'a.owner_id').where({ 'w.custody': 'account' });
const accountWalletColumns = (db: Db) => [
  'w.agent_id',
  'a.owner_id',
  'w.id as wallet_id',
  'w.address',
  'w.lane_address',
  'w.sealed_private_key',
  db.raw('coalesce(w.owner_signer_address, o.signer_address) as signer_address'),
  'w.owner_passkey_id',
];

export async function findAccountWallet(db: Db, agentId: string): Promise<AccountWalletRow | undefined> {
  return accountWallets(db)
    .where({ 'w.agent_id': agentId })
    .first(...accountWalletColumns(db));
}

export async function listAccountWallets(db: Db, agentId?: string): Promise<AccountWalletRow[]> {
  const q = accountWallets(db)
    .whereNull('a.deleted_at')
    .select(...accountWalletColumns(db))
    .orderBy('w.agent_id');
  return agentId ? q.andWhere('w.agent_id', agentId) : q;
}

export async function setOneOffCheque(db: Db, oneOffId: string, chequeId: string): Promise<void> {
  await db('one_off_payments').where({ id: oneOffId }).update({ cheque_id: chequeId });
}

export async function findOneOffCheque(db: Db, oneOffId: string): Promise<{ agent_id: string; cheque_id: string | null } | undefined> {
  return db('one_off_payments').where({ id: oneOffId }).first('agent_id', 'cheque_id');
}

/** Confirmed trusted destinations of an agent (the mirror's view, for policy drift). */
export async function listDestinationStates(db: Db, agentId: string): Promise<{ id: string; address: string; status: string; confirmable_at: Date }[]> {
  return db('trusted_destinations').where({ agent_id: agentId }).whereIn('status', ['pending', 'confirmed']).select('id', 'address', 'status', 'confirmable_at');
}
