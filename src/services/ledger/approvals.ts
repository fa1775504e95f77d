// Owner approvals (issue 27): the inbox across an owner's agents, approve (the operation settles as any other), reject
// and expiry (the operation ends `cancelled`, its hold released, its activity and event written). Who may decide is
// the caller's business (src/handlers/owner.ts: the owner alone, approve only with a fresh passkey assertion); no
// agent route, MCP tool or OAuth scope reaches these functions.
import { withTransaction, type Db, type Knex } from '../../db/knex.js';
import { claimExpiredApprovals, findApproval, listApprovals, markApproved, markCancelled } from '../../db/repositories/approval.repository.js';
import { appendEvent } from '../../db/repositories/event.repository.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { resolveOneOff, lockPendingOneOff } from '../../db/repositories/one-off-payment.repository.js';
import type { ApprovalState, OperationRow } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage } from '../cursor.js';
import { approvalView } from './approval-request.js';
import type { LedgerService } from './ledger.js';
import type { OperationService, PublicOperation } from './operations.js';

export type ApprovalItem = Schema<'ApprovalItem'>;
export type ApprovalPage = Omit<Schema<'ApprovalPage'>, 'ok'>;

export interface ApprovalService {
  /** The owner's approvals (every owner's for null), newest first. */
  list(db: Db, ownerId: string | null, query: { state?: ApprovalState; cursor?: string; limit?: unknown }): Promise<ApprovalPage>;
  /** The approval of `operationId` when it belongs to one of `ownerId`'s agents; not_found otherwise. */
  find(db: Db, ownerId: string, operationId: string): Promise<OperationRow & { agent_name: string; owner_id: string }>;
  /** pending -> approved: the settlement loop takes the operation from now on. `decidedBy` names the owner and the passkey. */
  approve(db: Db, ownerId: string, operationId: string, decidedBy: string): Promise<PublicOperation>;
  /** pending -> rejected: the operation ends `cancelled` with its hold released. */
  reject(db: Db, ownerId: string, operationId: string): Promise<PublicOperation>;
  /** Cancels the pending approvals past their deadline (the settlement loop, on the injected clock). Returns how many. */
  expireDue(db: Knex, limit?: number): Promise<number>;
}

export function createApprovalService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService }): ApprovalService {
  const { clock, ledger, operations } = deps;

  async function item(db: Db, op: OperationRow & { agent_name: string }): Promise<ApprovalItem> {
    const pub = await operations.toPublic(db, op);
    return {
      operation_id: op.id,
      agent_id: op.agent_id,
      agent_name: op.agent_name,
      type: pub.type,
      status: pub.status,
      asset_symbol: pub.asset_symbol,
      amount: pub.amount,
      amount_usd: pub.amount_usd,
      to_address: op.to_address,
      human_message: op.human_message,
      approval: approvalView(op)!,
      created_at: pub.created_at,
    };
  }

  async function decidedEvent(trx: Db, op: OperationRow) {
    const operation = await operations.toPublic(trx, op);
    await appendEvent(trx, {
      type: 'operation.approval_decided',
      agentId: op.agent_id,
      walletId: op.wallet_id,
      operationId: op.id,
      resource: { type: op.resource_type, id: op.resource_id },
      data: { operation, approval: operation.approval },
      createdAt: clock.now(),
    });
    return operation;
  }

  /** Ends a pending operation `cancelled` in `trx`: holds released, a one-off payment cancelled, activity and event. */
  async function cancel(trx: Knex.Transaction, id: string, state: 'rejected' | 'expired', decidedBy: string): Promise<PublicOperation | undefined> {
    const now = clock.now();
    const error =
      state === 'rejected' ? { code: 'approval_rejected', message: 'the owner rejected the operation' } : { code: 'approval_expired', message: 'the owner did not approve the operation in time' };
    const op = await markCancelled(trx, id, state, now, decidedBy, error);
    if (!op) return undefined;
    for (const hold of await findHeldByOperation(trx, op.id)) await ledger.release(trx, hold.id);
    if (op.type === 'one_off_payment.create') {
      const oneOff = await lockPendingOneOff(trx, op.id);
      if (oneOff) await resolveOneOff(trx, oneOff.id, 'cancelled', now);
    }
    const asset = op.asset_symbol ? await ledger.requireAsset(trx, op.asset_symbol) : null;
    const what = asset && op.amount !== null ? `${formatAmount(BigInt(op.amount), asset.decimals)} ${asset.symbol}` : 'the operation';
    await operations.recordActivity(trx, {
      principal: { agentId: op.agent_id, walletId: op.wallet_id },
      type: op.type as Schema<'ActivityType'>,
      status: 'cancelled',
      operationId: op.id,
      direction: 'none',
      asset: op.asset_symbol,
      amount: op.amount === null ? null : BigInt(op.amount),
      amountUsdE8: op.amount_usd_e8 === null ? null : BigInt(op.amount_usd_e8),
      counterparty: op.to_address,
      description: `${op.human_message} (cancelled: approval ${state}; ${what} released)`,
    });
    return decidedEvent(trx, op);
  }

  const notPending = (op: OperationRow) =>
    new ApiError('invalid_state_transition', `the approval is ${op.approval_state === 'pending' ? 'past its deadline' : op.approval_state}, not pending`, {
      approval_state: op.approval_state,
      status: op.status,
    });

  const service: ApprovalService = {
    async list(db, ownerId, query) {
      const limit = pageLimit(query.limit);
      const rows = await listApprovals(db, ownerId, { state: query.state, before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(
        rows,
        limit,
        (r) => r,
        (r) => encodeKeyset({ created_at: r.approval_requested_at!, id: r.id }),
      );
      return { ...page, items: await Promise.all(page.items.map((r) => item(db, r))) };
    },

    async find(db, ownerId, operationId) {
      const op = await findApproval(db, ownerId, operationId);
      if (!op) throw new ApiError('not_found', 'approval not found');
      return op;
    },

    async approve(db, ownerId, operationId, decidedBy) {
      return withTransaction(db, async (trx) => {
        const op = await service.find(trx, ownerId, operationId);
        const approved = await markApproved(trx, op.id, clock.now(), decidedBy);
        if (!approved) throw notPending(op);
        return decidedEvent(trx, approved);
      });
    },

    async reject(db, ownerId, operationId) {
      return withTransaction(db, async (trx) => {
        const op = await service.find(trx, ownerId, operationId);
        const cancelled = await cancel(trx, op.id, 'rejected', `owner:${ownerId}`);
        if (!cancelled) throw notPending(op);
        return cancelled;
      });
    },

    async expireDue(db, limit = 50) {
      return db.transaction(async (trx) => {
        const due = await claimExpiredApprovals(trx, clock.now(), limit);
        for (const op of due) await cancel(trx, op.id, 'expired', 'expiry');
        return due.length;
      });
    },
  };
  return service;
}
