// One-off (claimable) payments: the amount is escrowed by a hold at creation and leaves on claim (after the unlock
// delay), or returns on the owner's cancel or at expiry.
import { approvalStateOf } from '../../db/repositories/approval.repository.js';
import type { Db, Knex } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import { claimExpiredOneOffs, insertOneOffPayment, lockPendingOneOff, resolveOneOff, type OneOffPaymentRow } from '../../db/repositories/one-off-payment.repository.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import { findOneOffCheque, setOneOffCheque } from '../../db/repositories/custody.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { formatAmount } from '../../lib/money.js';
import { isRefusal, type Refusal } from '../../lib/refusal.js';
import type { Delivery } from './delivery.js';
import type { LedgerService } from './ledger.js';
import type { BatchSettler, OperationService, OwnerRef, SettleOutcome, WriteResponse } from './operations.js';
import type { Policy } from './policy-document.js';
import type { PolicyService } from './policy.js';
import { routeTargets } from './routing.js';
import { resolveMoney, shortAddress as short } from './write-input.js';

/** The request body as the document declares it. */
export type OneOffBody = Schema<'OneOffPaymentRequest'>;

export interface OneOffService {
  createOneOffPayment(db: Db, who: OwnerRef, body: OneOffBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  /** The recipient side (agentctl one-off claim): captures the hold to the recipient after the unlock delay. */
  claimOneOff(db: Db, id: string): Promise<OneOffPaymentRow>;
  /** The owner's cancel (agentctl one-off cancel): releases the hold; an account's cheque is cancelled on chain first (`signature`: the owner's). */
  cancelOneOff(db: Db, id: string, signature?: unknown): Promise<OneOffPaymentRow>;
  /** evm mode with agent accounts (issue 24): a one-off payment is a cheque in the agent's account. */
  chequesOnChain(mirror: OneOffChainMirror): void;
  /** Releases the holds of pending one-off payments past their expiry; returns how many expired. */
  expireOneOffs(db: Knex, limit?: number): Promise<number>;
  settleOneOffCreate(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
  /** settleOneOffCreate as a batch settles it: executed, the escrow hold kept. */
  batchSettleOneOffCreate: BatchSettler;
}

/** Default expiry of a one-off payment after its unlock (7 days). */
const DEFAULT_EXPIRES_SECONDS = 604_800;

/**
 * The owner's review of a one-off payment (issue 26, item 3): seconds it must wait before it can be claimed. Below
 * `one_off_instant_threshold_usd` it clears at once; at or above it (or without a threshold, or without a price) it
 * waits `one_off_review_delay_seconds`. No review delay: nothing waits.
 */
export function reviewDelayOf(p: Pick<Policy, 'one_off_instant_threshold_usd' | 'one_off_review_delay_seconds'> | null, usdE8: bigint | null): number {
  const delay = p?.one_off_review_delay_seconds ?? 0;
  if (delay === 0) return 0;
  const instant = p!.one_off_instant_threshold_usd !== undefined && usdE8 !== null && usdE8 < p!.one_off_instant_threshold_usd;
  return instant ? 0 : delay;
}

/** The account's side of one-off payments: the cheque's id, the owner's cancel and the claim, on chain. */
export interface OneOffChainMirror {
  /** The cheque id of a new one-off payment of the agent, or null when its wallet is not an account. */
  chequeIdFor(db: Db, agentId: string, oneOffId: string): Promise<string | null>;
  /** Relays CancelCheque signed by the owner (or the development owner key); throws when refused or unsigned. */
  cancel(db: Db, agentId: string, chequeId: string, signature?: unknown): Promise<void>;
  /** Submits claimCheque (the relayer pays); throws when the account refuses it. */
  claim(db: Db, agentId: string, chequeId: string): Promise<void>;
}

export function createOneOffService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService; delivery: Delivery }): OneOffService {
  const { clock, ledger, operations } = deps;
  const { paymentToAccount, recordReceived } = deps.delivery;
  let chainMirror: OneOffChainMirror | null = null;

  async function lockOneOff(trx: Db, id: string): Promise<OneOffPaymentRow> {
    if (!isUuid(id)) throw new ApiError('not_found', 'one-off payment not found');
    const row = await lockPendingOneOff(trx, id);
    if (!row) throw new ApiError('not_found', 'one-off payment not found');
    if (row.status !== 'pending') throw new ApiError('invalid_state_transition', `the one-off payment is ${row.status}`, { status: row.status });
    return row;
  }

  async function oneOffActivity(trx: Db, row: OneOffPaymentRow, type: Schema<'ActivityType'>, direction: 'in' | 'out' | 'none', description: string) {
    const asset = await ledger.requireAsset(trx, row.asset_symbol);
    await operations.recordActivity(trx, {
      principal: { agentId: row.agent_id, walletId: row.wallet_id },
      type,
      status: 'executed',
      operationId: row.operation_id,
      direction,
      asset: row.asset_symbol,
      amount: BigInt(row.amount),
      amountUsdE8: await ledger.usdValue(trx, asset, BigInt(row.amount)).catch(() => null),
      counterparty: row.to_address,
      description,
    });
  }

  return {
    async createOneOffPayment(db, who, body, idempotencyKey) {
      const note = body.note ?? null;
      const asset = await ledger.requireAsset(db, body.asset);
      const targets = await routeTargets(db, who.agentId, body.to);
      const target = targets.find((t) => t.route === 'one_off_payment') ?? targets.find((t) => t.route === 'direct') ?? targets[0]!;
      const { amount, usdE8 } = await resolveMoney(db, ledger, asset, body);
      // The agent's unlock delay works within the owner's review: the payment unlocks at the later of the two.
      const review = reviewDelayOf(await deps.policy.get(db, who.agentId), usdE8);
      const unlock = Math.max(body.unlock_delay_seconds ?? 0, review);
      const expires = body.expires_in_seconds ?? DEFAULT_EXPIRES_SECONDS + review;
      // The document bounds each field; only their order is a rule of its own.
      if (expires <= unlock) {
        const which = unlock === review && review > (body.unlock_delay_seconds ?? 0) ? `the owner's review delay (${review} s)` : 'unlock_delay_seconds';
        throw new ApiError('validation_failed', `expires_in_seconds must exceed ${which}`, { field: 'expires_in_seconds', review_delay_seconds: review });
      }
      return withTransaction(db, async (trx) => {
        const now = clock.now();
        const oneOffId = newId();
        const operationId = newId();
        // An account's one-off payment is a cheque issued in the account by the lane (settled on chain).
        const chequeId = (await chainMirror?.chequeIdFor(trx, who.agentId, oneOffId)) ?? null;
        const unlockAt = new Date(now.getTime() + unlock * 1000);
        const expiresAt = new Date(now.getTime() + expires * 1000);
        const created = await operations.create(trx, {
          id: operationId,
          principal: who,
          type: 'one_off_payment.create',
          resource: { type: 'one_off_payment', id: oneOffId },
          asset: asset.symbol,
          amount,
          amountUsdE8: usdE8,
          toAddress: target.address,
          policy: { recipient: { ids: [target.recipientId, target.destinationId].filter((x): x is string => x !== null), address: target.address } },
          details: {
            one_off_payment_id: oneOffId,
            recipient_id: target.recipientId,
            note,
            unlock_at: unlockAt.toISOString(),
            expires_at: expiresAt.toISOString(),
            review_delay_seconds: review,
            ...(chequeId ? { cheque_id: chequeId } : {}),
          },
          humanMessage: `One-off payment of ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${target.name ?? short(target.address)}, claimable from ${unlockAt.toISOString()} until ${expiresAt.toISOString()}`,
          idempotencyKey,
          acceptedEvent: 'one_off_payment.created',
          eventData: { one_off_payment: { id: oneOffId, to_address: target.address, unlock_at: unlockAt.toISOString(), expires_at: expiresAt.toISOString(), review_delay_seconds: review } },
        });
        if (isRefusal(created)) return created;
        await insertOneOffPayment(trx, {
          id: oneOffId,
          operation_id: operationId,
          agent_id: who.agentId,
          wallet_id: who.walletId,
          hold_id: created.holdIds[0]!,
          to_address: target.address,
          asset_symbol: asset.symbol,
          amount,
          status: 'pending',
          unlock_at: unlockAt,
          expires_at: expiresAt,
          resolved_at: null,
          created_at: now,
        });
        if (chequeId) await setOneOffCheque(trx, oneOffId, chequeId);
        return operations.writeResponse(created.operation);
      });
    },

    chequesOnChain(mirror) {
      chainMirror = mirror;
    },

    async claimOneOff(db, id) {
      return withTransaction(db, async (trx) => {
        const row = await lockOneOff(trx, id);
        const now = clock.now();
        // Held for the owner's approval (issue 27): nothing can be claimed before the owner approves.
        if ((await approvalStateOf(trx, row.operation_id)) === 'pending')
          throw new ApiError('invalid_state_transition', "the one-off payment waits for its owner's approval", { approval_state: 'pending' });
        if (now < row.unlock_at) throw new ApiError('time_delay_not_reached', `the payment unlocks at ${row.unlock_at.toISOString()}`, { unlocks_at: row.unlock_at.toISOString() });
        if (now >= row.expires_at) throw new ApiError('invalid_state_transition', 'the one-off payment has expired');
        const cheque = chainMirror ? (await findOneOffCheque(trx, row.id))?.cheque_id : null;
        if (cheque) await chainMirror!.claim(trx, row.agent_id, cheque);
        const { account, wallet } = await paymentToAccount(trx, row.to_address);
        if (!(await ledger.capture(trx, row.hold_id, account, 'one_off_claim'))) throw new ApiError('invalid_state_transition', 'the one-off payment hold is no longer held');
        await resolveOneOff(trx, row.id, 'claimed', now);
        const asset = await ledger.requireAsset(trx, row.asset_symbol);
        await oneOffActivity(
          trx,
          row,
          'one_off_payment.claim',
          'none',
          `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} claimed by ${short(row.to_address)}`,
        );
        await recordReceived(trx, wallet, row.operation_id, asset, BigInt(row.amount), null);
        return { ...row, status: 'claimed', resolved_at: now };
      });
    },

    async cancelOneOff(db, id, signature) {
      return withTransaction(db, async (trx) => {
        const row = await lockOneOff(trx, id);
        // The account's cheque first (the owner's cancel holds until its unlock time), then the hold.
        const cheque = chainMirror ? (await findOneOffCheque(trx, row.id))?.cheque_id : null;
        if (cheque) await chainMirror!.cancel(trx, row.agent_id, cheque, signature);
        const now = clock.now();
        await ledger.release(trx, row.hold_id);
        await resolveOneOff(trx, row.id, 'cancelled', now);
        const asset = await ledger.requireAsset(trx, row.asset_symbol);
        await oneOffActivity(trx, row, 'one_off_payment.cancel', 'in', `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} cancelled; funds released`);
        return { ...row, status: 'cancelled', resolved_at: now };
      });
    },

    async expireOneOffs(db, limit = 50) {
      return db.transaction(async (trx) => {
        const now = clock.now();
        const rows = await claimExpiredOneOffs(trx, now, limit);
        for (const row of rows) {
          await ledger.release(trx, row.hold_id);
          await resolveOneOff(trx, row.id, 'expired', now);
          const asset = await ledger.requireAsset(trx, row.asset_symbol);
          await oneOffActivity(
            trx,
            row,
            'one_off_payment.expire',
            'in',
            `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} expired unclaimed; funds released`,
          );
        }
        return rows.length;
      });
    },

    async settleOneOffCreate() {
      // The claimable payout is escrowed: its hold stays until claim, cancel or expiry.
      return { ok: true };
    },

    batchSettleOneOffCreate: () => ({ ok: true, capture: null }),
  };
}
