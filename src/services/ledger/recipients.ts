// Recipients: the agent's named payees (the owner adds them), their reads, and resolution of a `to` before a write.
import type { Db, Knex } from '../../db/knex.js';
import { findLinkedRecipient, insertRecipient, listLinkedRecipients, type LinkedRecipientRow } from '../../db/repositories/recipient.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError, type ErrorCode } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { isEvmAddress } from '../../lib/wallet-keys.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import type { LedgerService } from './ledger.js';
import type { OwnerRef } from './operations.js';
import type { PolicyService } from './policy.js';
import { pickRoute, routeTargets } from './routing.js';

export type PublicRecipient = Schema<'Recipient'>;

export interface RecipientService {
  /** `signature`: the owner's EIP-712 signature of the policy with this payee (evm mode, policy without allowed_recipients). */
  addRecipient(db: Db, agentId: string, input: { kind: 'recurring' | 'one_off'; name: string; address: string; asset?: string | null }, signature?: unknown): Promise<{ recipient_id: string }>;
  listRecipients(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicRecipient>>;
  getRecipient(db: Db, agentId: string, id: string): Promise<PublicRecipient>;
  resolve(db: Db, who: OwnerRef, body: Schema<'ResolveRecipientRequest'>): Promise<Schema<'RecipientResolution'>>;
  /** `resolve` with Hightop's `recipient` beside it (POST /recipients/resolve). */
  resolveRecipient(db: Db, who: OwnerRef, body: Schema<'ResolveRecipientRequest'>): Promise<{ resolution: Schema<'RecipientResolution'>; recipient: Schema<'ResolvedRecipient'> }>;
}

export function createRecipientService(deps: { clock: Clock; ledger: LedgerService; policy: PolicyService }): RecipientService {
  const { clock, ledger, policy } = deps;

  const publicRecipient = (r: LinkedRecipientRow): PublicRecipient => ({
    id: r.id,
    name: r.name,
    address: r.address,
    chain: r.chain,
    trusted_destination_id: r.trusted_destination_id,
    recurring_payment_id: r.recurring_payment_id,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  });

  const service: RecipientService = {
    async addRecipient(db, agentId, input, signature) {
      if (!['recurring', 'one_off'].includes(input.kind)) throw new ApiError('validation_failed', 'kind must be recurring or one_off');
      if (!isEvmAddress(input.address)) throw new ApiError('validation_failed', 'address must be a 0x EVM address');
      if (!input.name.trim()) throw new ApiError('validation_failed', 'name is required');
      if (input.asset) await ledger.requireAsset(db, input.asset);
      // The chain first (the account's payees), then the row that mirrors it, as policy.set does.
      await policy.addPayee(db, agentId, input.address, signature);
      const now = clock.now();
      const id = newId();
      await insertRecipient(db, {
        id,
        agent_id: agentId,
        kind: input.kind,
        name: input.name,
        address: input.address,
        chain: 'base',
        asset_symbol: input.asset ?? null,
        created_at: now,
        updated_at: now,
      });
      return { recipient_id: id };
    },

    async listRecipients(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await listLinkedRecipients(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(rows, limit, publicRecipient, encodeKeyset);
    },

    async getRecipient(db, agentId, id) {
      const r = isUuid(id) ? await findLinkedRecipient(db, agentId, id) : undefined;
      if (!r) throw new ApiError('not_found', 'recipient not found');
      return publicRecipient(r);
    },

    async resolve(db, who, body) {
      const targets = await routeTargets(db, who.agentId, body.to);
      const target = pickRoute(targets, 'auto');
      // Hightop's `send_payment` is our `payment`.
      const action = body.action === 'send_payment' ? 'payment' : (body.action ?? 'payment');
      const type = action === 'one_off_payment' ? 'one_off_payment.create' : action === 'withdrawal' ? 'withdrawal.crypto' : 'payment';
      let reason: ErrorCode | null = null;
      if (action === 'withdrawal' && target.route !== 'trusted_destination') reason = 'recipient_not_allowed';
      if (!reason) {
        // Evaluated in a transaction that is rolled back: resolution never records anything.
        const trx = await (db as Knex).transaction();
        try {
          const decision = await policy.evaluate(trx, who.agentId, {
            type,
            asset: body.asset ?? null,
            recipient: { ids: [target.recipientId, target.destinationId].filter((x): x is string => x !== null), address: target.address },
          });
          reason = decision.allowed ? null : decision.code;
        } finally {
          await trx.rollback();
        }
      }
      return {
        to: body.to,
        kind: target.kind,
        address: target.address,
        chain: 'base',
        name: target.name,
        recipient_id: target.recipientId,
        trusted_destination_id: target.destinationId,
        recurring_payment_id: target.recurringPaymentId,
        route: target.route,
        allowed: reason === null,
        reason,
      };
    },

    async resolveRecipient(db, who, body) {
      const resolution = await service.resolve(db, who, body);
      // Hightop's recipient shape (issue 26, item 8): what `to` names, and whether the intended action is open.
      const action = body.action === 'payment' || body.action === undefined ? 'send_payment' : body.action;
      const recipient: Schema<'ResolvedRecipient'> = {
        id: resolution.recurring_payment_id ?? resolution.recipient_id ?? resolution.trusted_destination_id ?? resolution.address,
        type: resolution.route === 'direct' ? 'address' : resolution.route,
        display_name: resolution.name ?? resolution.address,
        nickname: resolution.name,
        asset_symbols: body.asset ? [body.asset] : [],
        status: 'active',
        agent_actions: resolution.allowed ? [action] : [],
        blocked_actions: resolution.allowed ? {} : { [action]: resolution.reason ?? 'recipient_not_allowed' },
      };
      return { resolution, recipient };
    },
  };
  return service;
}
