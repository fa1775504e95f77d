// Trusted destinations (contract §10): the owner proposes (pending, time lock); confirm after the lock, cancel a
// pending one, remove a confirmed one. Each change is an immediate operation with its trusted_destination.* event.
import type { Db } from '../db/knex.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import * as repo from '../db/repositories/recipient.repository.js';
import type { TrustedDestinationRow } from '../db/repositories/recipient.repository.js';
import type { Clock } from '../lib/clock.js';
import { ApiError } from '../lib/errors.js';
import { isRefusal } from '../lib/refusal.js';
import { isUuid, newId } from '../lib/ids.js';
import { isEvmAddress } from '../lib/wallet-keys.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';
import { withWriteTransaction, type OperationService, type OwnerRef, type WriteResponse } from './operation.service.js';

export type DestinationAction = 'confirm' | 'cancel' | 'remove';

const TRANSITIONS: Record<DestinationAction, { from: TrustedDestinationRow['status']; to: TrustedDestinationRow['status']; stamp: 'confirmed_at' | 'cancelled_at' | 'removed_at'; verb: string }> = {
  confirm: { from: 'pending', to: 'confirmed', stamp: 'confirmed_at', verb: 'Confirmed' },
  cancel: { from: 'pending', to: 'cancelled', stamp: 'cancelled_at', verb: 'Cancelled' },
  remove: { from: 'confirmed', to: 'removed', stamp: 'removed_at', verb: 'Removed' },
};

export const DEFAULT_TIMELOCK_SECONDS = 86_400;

export interface DestinationService {
  add(db: Db, agentId: string, input: { kind: string; chain: string; address: string; label: string; timelockSeconds?: number }): Promise<{ destination_id: string }>;
  list(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Record<string, unknown>>>;
  get(db: Db, agentId: string, id: string): Promise<Record<string, unknown>>;
  /** The agent's write (policy applies) or, with `byOwner`, the owner's agentctl action (no agent policy). */
  act(db: Db, who: OwnerRef, id: string, action: DestinationAction, opts?: { idempotencyKey?: string | null; byOwner?: boolean }): Promise<WriteResponse>;
  /** Owner path by destination id alone (agentctl). */
  actAsOwner(db: Db, id: string, action: DestinationAction): Promise<WriteResponse>;
}

export function publicDestination(d: TrustedDestinationRow): Record<string, unknown> {
  const iso = (x: Date | null) => (x ? x.toISOString() : null);
  return { id: d.id, kind: d.kind, chain: d.chain, address: d.address, label: d.label, status: d.status, unlocks_at: d.confirmable_at.toISOString(), confirmed_at: iso(d.confirmed_at), cancelled_at: iso(d.cancelled_at), removed_at: iso(d.removed_at), created_at: d.created_at.toISOString(), updated_at: d.updated_at.toISOString() };
}

export function createDestinationService(deps: { clock: Clock; operations: OperationService }): DestinationService {
  const { clock, operations } = deps;

  const service: DestinationService = {
    async add(db, agentId, input) {
      if (input.kind !== 'crypto') throw new ApiError('validation_failed', 'kind must be crypto');
      if (input.chain !== 'base') throw new ApiError('validation_failed', 'chain must be base');
      if (!isEvmAddress(input.address)) throw new ApiError('validation_failed', 'address must be a 0x EVM address');
      if (!input.label.trim()) throw new ApiError('validation_failed', 'label is required');
      const timelock = input.timelockSeconds ?? DEFAULT_TIMELOCK_SECONDS;
      if (!Number.isInteger(timelock) || timelock < 0) throw new ApiError('validation_failed', 'timelock must be a non-negative integer of seconds');
      const now = clock.now();
      const id = newId();
      await repo.insertTrustedDestination(db, { id, agent_id: agentId, kind: 'crypto', chain: 'base', address: input.address, label: input.label, status: 'pending', confirmable_at: new Date(now.getTime() + timelock * 1000), created_at: now, confirmed_at: null, cancelled_at: null, removed_at: null, updated_at: now });
      return { destination_id: id };
    },

    async list(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listTrustedDestinations(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(rows, limit, publicDestination, encodeKeyset);
    },

    async get(db, agentId, id) {
      const d = isUuid(id) ? await repo.findTrustedDestination(db, agentId, id) : undefined;
      if (!d) throw new ApiError('not_found', 'trusted destination not found');
      return publicDestination(d);
    },

    async act(db, who, id, action, opts = {}) {
      const t = TRANSITIONS[action];
      return withWriteTransaction(db, async (trx) => {
        const dest = isUuid(id) ? await repo.findTrustedDestination(trx, who.agentId, id, { lock: true }) : undefined;
        if (!dest) throw new ApiError('not_found', 'trusted destination not found');
        if (dest.status !== t.from) throw new ApiError('invalid_state_transition', `cannot ${action} a ${dest.status} trusted destination (needs ${t.from})`, { status: dest.status });
        const now = clock.now();
        if (action === 'confirm' && now < dest.confirmable_at) {
          throw new ApiError('time_delay_not_reached', `the destination can be confirmed from ${dest.confirmable_at.toISOString()}`, { unlocks_at: dest.confirmable_at.toISOString() });
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
        // Until the ledger branch lands: its callers still expect the refusal thrown (and committed).
        if (isRefusal(created)) throw new ApiError(created.refusal.code, created.refusal.message, created.refusal.details, { commit: true });
        const { operation } = created;
        const moved = await repo.transitionTrustedDestination(trx, dest.id, t.from, { status: t.to, [t.stamp]: now, updated_at: now });
        if (!moved) throw new ApiError('invalid_state_transition', 'the trusted destination changed concurrently');
        return operations.writeResponse(operation);
      });
    },

    async actAsOwner(db, id, action) {
      const dest = isUuid(id) ? await repo.findTrustedDestinationById(db, id) : undefined;
      if (!dest) throw new ApiError('not_found', 'trusted destination not found');
      const wallet = await findWalletByAgent(db, dest.agent_id);
      return service.act(db, { agentId: dest.agent_id, walletId: wallet!.id }, id, action, { byOwner: true });
    },
  };
  return service;
}
