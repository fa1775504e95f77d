// Trusted destinations (contract §10): the owner proposes (pending, time lock); confirm after the lock, cancel a
// pending one, remove a confirmed one. Each change is an immediate operation with its trusted_destination.* event.
import { withTransaction, type Db } from '../../db/knex.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import {
  lockPendingDestinationByAddress,
  findTrustedDestination,
  findTrustedDestinationById,
  insertTrustedDestination,
  listTrustedDestinations,
  transitionTrustedDestination,
} from '../../db/repositories/trusted-destination.repository.js';
import type { TrustedDestinationRow } from '../../db/repositories/trusted-destination.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError, type ErrorCode } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { isRefusal, type Refusal } from '../../lib/refusal.js';
import { isEvmAddress } from '../../lib/wallet-keys.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import { type OperationService, type OwnerRef, type WriteResponse } from './operations.js';

export type DestinationAction = 'confirm' | 'cancel' | 'remove';

const TRANSITIONS: Record<DestinationAction, { from: TrustedDestinationRow['status']; to: TrustedDestinationRow['status']; stamp: 'confirmed_at' | 'cancelled_at' | 'removed_at'; verb: string }> = {
  confirm: { from: 'pending', to: 'confirmed', stamp: 'confirmed_at', verb: 'Confirmed' },
  cancel: { from: 'pending', to: 'cancelled', stamp: 'cancelled_at', verb: 'Cancelled' },
  remove: { from: 'confirmed', to: 'removed', stamp: 'removed_at', verb: 'Removed' },
};

export const DEFAULT_TIMELOCK_SECONDS = 86_400;
/** How long an owner's proposal stays signable (the custody service's DEADLINE_SECONDS). */
const SIGNED_PROPOSAL_SECONDS = 3600;

/** Agent accounts (issue 24): the owner's signed add relayed to the account, the lane's confirm checked on chain. */
export interface DestinationChainMirror {
  /** Relays AddTrustedDestination(address, unlockAt) (the owner's `signature`, or the development owner key); throws when refused. */
  onAdd(db: Db, agentId: string, address: string, unlockAt: Date, signature?: unknown): Promise<void>;
  /** The eth_call of the lane's confirmTrustedDestination: null when the account would accept it. */
  confirmRefusal(db: Db, agentId: string, address: string): Promise<{ code: string; message: string } | null>;
}

export interface DestinationService {
  add(db: Db, agentId: string, input: { kind: string; chain: string; address: string; label: string; timelockSeconds?: number; signature?: unknown }): Promise<{ destination_id: string }>;
  mirrorOnChain(mirror: DestinationChainMirror): void;
  list(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'TrustedDestination'>>>;
  get(db: Db, agentId: string, id: string): Promise<Schema<'TrustedDestination'>>;
  /** The agent's write (policy applies) or, with `byOwner`, the owner's agentctl action (no agent policy). */
  act(db: Db, who: OwnerRef, id: string, action: DestinationAction, opts?: { idempotencyKey?: string | null; byOwner?: boolean }): Promise<WriteResponse | Refusal>;
  /** Owner path by destination id alone (agentctl). */
  actAsOwner(db: Db, id: string, action: DestinationAction): Promise<WriteResponse | Refusal>;
}

export function publicDestination(d: TrustedDestinationRow): Schema<'TrustedDestination'> {
  const iso = (x: Date | null) => (x ? x.toISOString() : null);
  return {
    id: d.id,
    kind: d.kind,
    chain: d.chain,
    address: d.address,
    label: d.label,
    status: d.status,
    unlocks_at: d.confirmable_at.toISOString(),
    confirmed_at: iso(d.confirmed_at),
    cancelled_at: iso(d.cancelled_at),
    removed_at: iso(d.removed_at),
    created_at: d.created_at.toISOString(),
    updated_at: d.updated_at.toISOString(),
  };
}

export function createDestinationService(deps: { clock: Clock; operations: OperationService }): DestinationService {
  const { clock, operations } = deps;
  let chainMirror: DestinationChainMirror | null = null;

  const service: DestinationService = {
    mirrorOnChain(mirror) {
      chainMirror = mirror;
    },

    async add(db, agentId, input) {
      if (input.kind !== 'crypto') throw new ApiError('validation_failed', 'kind must be crypto');
      if (input.chain !== 'base') throw new ApiError('validation_failed', 'chain must be base');
      if (!isEvmAddress(input.address)) throw new ApiError('validation_failed', 'address must be a 0x EVM address');
      if (!input.label.trim()) throw new ApiError('validation_failed', 'label is required');
      const timelock = input.timelockSeconds ?? DEFAULT_TIMELOCK_SECONDS;
      if (!Number.isInteger(timelock) || timelock < 0) throw new ApiError('validation_failed', 'timelock must be a non-negative integer of seconds');
      const now = clock.now();
      const id = newId();
      // A signed proposal fixes the unlock time (the owner's message holds it); it was made at most an hour ago.
      const signedUnlock = (input.signature as { unlock_at?: string } | undefined)?.unlock_at;
      const confirmableAt = signedUnlock === undefined ? new Date(now.getTime() + timelock * 1000) : new Date(Number(signedUnlock) * 1000);
      if (signedUnlock !== undefined && confirmableAt.getTime() < now.getTime() + (timelock - SIGNED_PROPOSAL_SECONDS) * 1000)
        throw new ApiError('validation_failed', `owner_signature.unlock_at is earlier than this destination's time lock of ${timelock} s allows`, {
          errors: [{ location: 'body', path: '/owner_signature/unlock_at', message: 'earlier than the time lock allows' }],
        });
      // One time lock per address at a time (Hightop's pending_time_lock_exists): refused before the chain is asked.
      const pendingRefusal = (pending: TrustedDestinationRow | undefined) =>
        pending &&
        new ApiError('pending_time_lock_exists', `a destination for ${input.address} is already pending until ${pending.confirmable_at.toISOString()}: confirm or cancel it first`, {
          destination_id: pending.id,
          confirmable_at: pending.confirmable_at.toISOString(),
        });
      const early = pendingRefusal(await withTransaction(db, (trx) => lockPendingDestinationByAddress(trx, agentId, input.address)));
      if (early) throw early;
      // The account first (its time lock is the one that holds), then the mirror.
      await chainMirror?.onAdd(db, agentId, input.address, confirmableAt, input.signature);
      await withTransaction(db, async (trx) => {
        const raced = pendingRefusal(await lockPendingDestinationByAddress(trx, agentId, input.address));
        if (raced) throw raced;
        await insertTrustedDestination(trx, {
          id,
          agent_id: agentId,
          kind: 'crypto',
          chain: 'base',
          address: input.address,
          label: input.label,
          status: 'pending',
          confirmable_at: confirmableAt,
          created_at: now,
          confirmed_at: null,
          cancelled_at: null,
          removed_at: null,
          updated_at: now,
        });
      });
      return { destination_id: id };
    },

    async list(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await listTrustedDestinations(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(rows, limit, publicDestination, encodeKeyset);
    },

    async get(db, agentId, id) {
      const d = isUuid(id) ? await findTrustedDestination(db, agentId, id) : undefined;
      if (!d) throw new ApiError('not_found', 'trusted destination not found');
      return publicDestination(d);
    },

    async act(db, who, id, action, opts = {}) {
      const t = TRANSITIONS[action];
      return withTransaction(db, async (trx) => {
        const dest = isUuid(id) ? await findTrustedDestination(trx, who.agentId, id, { lock: true }) : undefined;
        if (!dest) throw new ApiError('not_found', 'trusted destination not found');
        if (dest.status !== t.from) throw new ApiError('invalid_state_transition', `cannot ${action} a ${dest.status} trusted destination (needs ${t.from})`, { status: dest.status });
        const now = clock.now();
        if (action === 'confirm' && now < dest.confirmable_at) {
          throw new ApiError('time_delay_not_reached', `the destination can be confirmed from ${dest.confirmable_at.toISOString()}`, { unlocks_at: dest.confirmable_at.toISOString() });
        }
        if (action === 'confirm' && chainMirror) {
          // The account's own time lock decides (the database's is its mirror).
          const refused = await chainMirror.confirmRefusal(trx, who.agentId, dest.address);
          if (refused) throw new ApiError(refused.code as ErrorCode, refused.message, { chain: true });
        }
        const opId = newId();
        const updated = { ...dest, status: t.to, [t.stamp]: now, updated_at: now } as TrustedDestinationRow;
        // The operation first: a policy refusal commits only the rejected operation, never the change.
        const created = await operations.create(trx, {
          id: opId,
          principal: who,
          type: `trusted_destination.${action}`,
          resource: { type: 'trusted_destination', id: dest.id },
          toAddress: dest.address,
          countsTowardLimits: false,
          settlement: 'immediate',
          skipPolicy: opts.byOwner ?? false,
          details: { trusted_destination_id: dest.id, by: opts.byOwner ? 'owner' : 'agent' },
          humanMessage: `${t.verb} trusted destination ${dest.label} (${dest.address.slice(0, 6)}…${dest.address.slice(-4)})${opts.byOwner ? ' by the owner' : ''}`,
          idempotencyKey: opts.idempotencyKey ?? null,
          eventData: { trusted_destination: publicDestination(updated) },
        });
        if (isRefusal(created)) return created;
        const moved = await transitionTrustedDestination(trx, dest.id, t.from, { status: t.to, [t.stamp]: now, updated_at: now });
        if (!moved) throw new ApiError('invalid_state_transition', 'the trusted destination changed concurrently');
        return operations.writeResponse(created.operation);
      });
    },

    async actAsOwner(db, id, action) {
      const dest = isUuid(id) ? await findTrustedDestinationById(db, id) : undefined;
      if (!dest) throw new ApiError('not_found', 'trusted destination not found');
      const wallet = await findWalletByAgent(db, dest.agent_id);
      return service.act(db, { agentId: dest.agent_id, walletId: wallet!.id }, id, action, { byOwner: true });
    },
  };
  return service;
}
