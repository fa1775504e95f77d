// Operations (contract §8), the state machine: creation with policy and hold in the caller's transaction, guarded
// terminal transitions with the activity row and outbox event of each, reads. Settlement: settlement.ts.
import type { Schema } from '../../lib/contract.js';
import type { Chain } from '../../chain/port.js';
import { txHashOf } from '../../chain/simulated.js';
import type { Db, Knex } from '../../db/knex.js';
import { withTransaction } from '../../db/knex.js';
import { appendEvent, type NewEvent } from '../../db/repositories/event.repository.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { acceptPayment } from '../../db/repositories/sql/accept-payment.js';
import { insertOperation, transitionOperation, type OperationRow, type OperationStatus } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import { sha256Hex } from '../../lib/crypto.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { ApiError } from '../../lib/errors.js';
import { refuse, type Refusal } from '../../lib/refusal.js';
import { createActivityLog, type ActivityInput } from './activity.js';
import { createChains } from './chains.js';
import { accountName, type LedgerService } from './ledger.js';
import { createOperationViews, type OperationViews } from './operation-views.js';
import type { PolicyService } from './policy.js';
import { createSettlementScheduler, DEFAULT_SETTLEMENT_BATCH_SIZE, type SettlementScheduler } from './settlement.js';
import { createBatchSettlement, type BatchSettler } from './settlement-batch.js';
import { approvalColumns } from './approval-request.js';
import { refuseWhileDeficit } from './deficits.js';
import { eventsOf, family, type CreateOperationInput } from './operation-input.js';

export type { CreateOperationInput } from './operation-input.js';

export type { PublicOperation, WriteResponse } from './operation-views.js';

export type { OperationRow, OperationStatus };

export type { ChainSettler, OwnerRef, SettleOutcome, Settler } from './settling.js';
export type { BatchFacts, BatchPlan, BatchSettler } from './settlement-batch.js';
import type { ChainSettler, SettleOutcome, Settler } from './settling.js';

export interface CreatedOperation {
  operation: OperationRow;
  holdIds: string[];
}

export interface OperationService extends SettlementScheduler, OperationViews {
  /** A policy refusal is returned (its policy_rejected operation, activity and event are written and commit as any answer). */
  create(db: Db, input: CreateOperationInput): Promise<CreatedOperation | Refusal>;
  /** Terminal transition from `from` (guarded in SQL): captures nothing itself; on failure releases the operation's holds. */
  finish(db: Db, operationId: string, from: OperationStatus, outcome: SettleOutcome): Promise<OperationRow | undefined>;
  registerSettler(type: string, settler: Settler): void;
  /** The batch form of a type's settler on the simulated chain (settlement-batch.ts); the type keeps its Settler for the rest. */
  registerBatchSettler(type: string, settler: BatchSettler): void;
  /** How a confirmed on-chain settlement of `type` moves the ledger, when not the default (capture the amount's hold). */
  registerChainSettler(type: string, settler: ChainSettler): void;
  /** Runs in the transaction that finalises an operation of `type` as execution_failed (after its holds are released). */
  registerFailureHook(type: string, hook: (trx: Knex.Transaction, op: OperationRow) => Promise<void>): void;
  settlerTypes(): string[];

  /** Writes an activity row (the ledger area's and other areas' financial events). */
  recordActivity(db: Db, input: ActivityInput): Promise<void>;
}

export function createOperationService(deps: {
  clock: Clock;
  ledger: LedgerService;
  policy: PolicyService;
  settlementDelayMs: number;
  settlementBatchSize?: number;
  log?: Logger;
  chain?: Chain;
  chainRetryMs?: number;
}): OperationService {
  const { clock, ledger, policy } = deps;
  const settlers = new Map<string, Settler>();
  const batchSettlers = new Map<string, BatchSettler>();
  const chainSettlers = new Map<string, ChainSettler>();
  const failureHooks = new Map<string, (trx: Knex.Transaction, op: OperationRow) => Promise<void>>();
  const chains = createChains({ clock, ledger, settlementDelayMs: deps.settlementDelayMs, chain: deps.chain });
  const { chain } = chains;
  const activity = createActivityLog({ clock });
  const views = createOperationViews({ ledger, chains });
  const finish: typeof service.finish = (trx, id, from, outcome) => service.finish(trx, id, from, outcome);
  const batch = createBatchSettlement({
    clock,
    ledger,
    chains,
    activity,
    batchSettlers,
    hasFailureHook: (type) => failureHooks.has(type),
    terminalRecords: (trx, op) => terminalRecords(trx, op, eventsOf(op.type)[op.status === 'executed' ? 'executed' : 'failed']),
  });
  const scheduler = createSettlementScheduler({
    clock,
    ledger,
    chains,
    retryMs: deps.chainRetryMs ?? 1000,
    log: deps.log,
    settlers,
    chainSettlers,
    settlerTypes: () => service.settlerTypes(),
    finish,
    batch: { size: deps.settlementBatchSize ?? DEFAULT_SETTLEMENT_BATCH_SIZE, settlementDelayMs: deps.settlementDelayMs, settlement: batch },
  });

  /** The terminal activity row of `op` and, when its type announces `eventType`, the outbox event (written by the caller). */
  async function terminalRecords(trx: Db, op: OperationRow, eventType: string | undefined, extra: Record<string, unknown> = {}): Promise<{ activity: ActivityInput; event: NewEvent | null }> {
    const row: ActivityInput = {
      principal: { agentId: op.agent_id, walletId: op.wallet_id },
      // Every operation type of the document is an activity type (the document lists both).
      type: op.type as Schema<'ActivityType'>,
      status: op.status,
      operationId: op.id,
      direction: op.amount !== null && op.counts_toward_limits ? 'out' : 'none',
      asset: op.asset_symbol,
      amount: op.amount === null ? null : BigInt(op.amount),
      amountUsdE8: op.amount_usd_e8 === null ? null : BigInt(op.amount_usd_e8),
      counterparty: op.to_address,
      description: op.status === 'executed' ? op.human_message : `${op.human_message} (${op.status}${op.error_message ? `: ${op.error_message}` : ''})`,
    };
    if (!eventType) return { activity: row, event: null };
    const event: NewEvent = {
      type: eventType,
      agentId: op.agent_id,
      walletId: op.wallet_id,
      operationId: op.id,
      resource: { type: op.resource_type, id: op.resource_id },
      data: { ...extra, operation: await views.toPublic(trx, op) },
      createdAt: clock.now(),
    };
    return { activity: row, event };
  }

  async function terminalEffects(trx: Db, op: OperationRow, eventType: string | undefined, extra: Record<string, unknown> = {}) {
    const { activity: row, event } = await terminalRecords(trx, op, eventType, extra);
    await service.recordActivity(trx, row);
    if (event) await appendEvent(trx, event);
  }

  /** The events of an acceptance: the type's own (one_off_payment.created), operation.approval_requested (issue 27). */
  async function appendAcceptedEvent(trx: Db, op: OperationRow, input: CreateOperationInput, type = input.acceptedEvent!) {
    await appendEvent(trx, {
      type,
      agentId: op.agent_id,
      walletId: op.wallet_id,
      operationId: op.id,
      resource: { type: op.resource_type, id: op.resource_id },
      data: { ...input.eventData, operation: await views.toPublic(trx, op) },
      createdAt: op.created_at,
    });
  }

  const service: OperationService = {
    async create(db, input) {
      return withTransaction(db, async (trx): Promise<CreatedOperation | Refusal> => {
        const now = clock.now();
        const id = input.id ?? newId();
        const settlement = input.settlement ?? 'worker';
        const asset = input.asset ? await ledger.requireAsset(trx, input.asset) : null;
        const amount = input.amount ?? null;
        // A wallet owing a deficit (a reversed deposit it had spent) moves no money until it is covered. Only an evm
        // chain reorganises, so only there can a wallet owe one (the simulated chain's writes keep their round trips).
        if (deps.chain?.mode === 'evm' && (amount !== null || (input.holds?.length ?? 0) > 0)) await refuseWhileDeficit(trx, input.principal.walletId, await ledger.assets(trx));
        let usdE8 = input.amountUsdE8 ?? null;
        // Rounded up: a value counted toward caps never falls below the amount's worth (dust is not free).
        if (usdE8 === null && asset && amount !== null) usdE8 = await ledger.usdValue(trx, asset, amount, 'up');
        const counts = input.countsTowardLimits ?? usdE8 !== null;
        const base = {
          id,
          agent_id: input.principal.agentId,
          wallet_id: input.principal.walletId,
          type: input.type,
          resource_type: input.resource?.type ?? family(input.type),
          resource_id: input.resource?.id ?? id,
          asset_symbol: asset?.symbol ?? null,
          amount,
          amount_usd_e8: usdE8,
          fee_usd_e8: 0n,
          counts_toward_limits: counts,
          human_message: input.humanMessage,
          idempotency_key_hash: input.idempotencyKey ? sha256Hex(input.idempotencyKey) : null,
          to_address: input.toAddress ?? null,
          tx_hash: null,
          details: input.details ?? {},
          created_at: now,
          submitted_at: null,
          executed_at: null,
          failed_at: null,
          updated_at: now,
          policy_facts: null as object | null,
        };

        // The decision, what it saw (kept as policy_facts for replays) and the shadow policy's, under the same lock.
        const { decision, facts } = await policy.decideWrite(trx, {
          agentId: input.principal.agentId,
          operationId: id,
          request: { ...input.policy, type: input.type, asset: asset?.symbol ?? null, usdE8: counts ? usdE8 : null },
          counts,
          skip: input.skipPolicy === true,
          locked: input.lockedPolicy,
        });
        base.policy_facts = facts;
        if (!decision.allowed) {
          const op = await insertOperation(trx, {
            ...base,
            status: 'policy_rejected',
            counts_toward_limits: false,
            error_code: decision.code,
            error_message: decision.message,
            settle_after: null,
            human_message: `${input.humanMessage} (rejected by policy)`,
          });
          await terminalEffects(trx, op, 'operation.policy_rejected');
          return refuse(decision.code, decision.message, { ...decision.details, operation_id: op.id });
        }
        // Allowed, but the owner must approve it first (issue 27): accepted and held, not settled while pending.
        const approval =
          decision.approval && settlement === 'worker' ? await approvalColumns(trx, decision.approval, { agentId: input.principal.agentId, toAddress: input.toAddress ?? null, now }) : {};
        const announce = async (op: OperationRow) => {
          if (input.acceptedEvent) await appendAcceptedEvent(trx, op, input);
          if (approval.approval_state) await appendAcceptedEvent(trx, op, input, 'operation.approval_requested');
        };

        const holdIds: string[] = [];
        const holds = input.holds ?? (settlement !== 'immediate' && asset && amount !== null ? [{ asset: asset.symbol, amount }] : []);
        // An ETH transfer on a real chain also holds its gas reserve (the wallet pays the gas).
        if (!input.holds && settlement === 'worker' && asset && amount !== null && chain.settlesOnChain({ type: input.type, details: input.details ?? {} }, asset)) {
          const reserve = chain.gasReserve(asset);
          if (reserve > 0n) holds.push({ asset: asset.symbol, amount: reserve });
        }
        const immediate = settlement === 'immediate';
        // The usual case, one hold for an operation settled later: the hold and the operation row in one statement.
        if (holds.length === 1 && !immediate) {
          const [h] = holds as [{ asset: string; amount: bigint }];
          if (h.amount <= 0n) throw new Error('hold amount must be positive');
          const holdId = newId();
          const walletId = input.principal.walletId;
          const accepted = { ...base, ...approval, status: 'accepted' as const, error_code: null, error_message: null, settle_after: settlement === 'worker' ? now : null };
          const hold = {
            id: holdId,
            journalId: newId(),
            operationId: id,
            walletId,
            asset: h.asset,
            amount: h.amount,
            availableAccount: accountName({ kind: 'available', walletId }),
            heldAccount: accountName({ kind: 'held', walletId }),
          };
          let placed = await acceptPayment(trx, accepted, hold, now);
          let holdless = false;
          // Short: nothing was written; a top-up moves money into the wallet in this transaction, then the same statement again.
          const topped = placed.holdPlaced || !input.topUp ? null : await input.topUp(trx);
          if (topped) {
            const toppedRow = { ...accepted, details: { ...accepted.details, ...topped.details } };
            const held = topped.hold ?? h.amount;
            // Nothing of it in the wallet (all of it redeemed on chain at settlement): the operation holds nothing.
            holdless = held <= 0n;
            if (holdless) placed = { operation: await insertOperation(trx, toppedRow), holdPlaced: true };
            else placed = await acceptPayment(trx, toppedRow, { ...hold, amount: held }, now);
          }
          if (!placed.holdPlaced) throw new ApiError('insufficient_funds', `insufficient ${h.asset} balance`, { asset: h.asset });
          const { operation } = placed;
          await announce(operation);
          return { operation, holdIds: holdless ? [] : [holdId] };
        }
        for (const h of holds) holdIds.push((await ledger.hold(trx, { walletId: input.principal.walletId, asset: h.asset, amount: h.amount, operationId: id })).holdId);

        // The simulated chain refuses settlements to a failing address (agentctl chain fail-address): an
        // immediate operation that moves money there finalises execution_failed here, and its caller
        // applies no effects. (Trusted-destination actions name an address but move nothing.)
        if (immediate && amount !== null && input.toAddress && (await ledger.isFailingAddress(trx, input.toAddress))) {
          const failed = await insertOperation(trx, {
            ...base,
            status: 'execution_failed',
            error_code: 'settlement_failed',
            error_message: `the simulated chain refused the settlement to ${input.toAddress}`,
            settle_after: null,
            submitted_at: now,
            failed_at: now,
          });
          await terminalEffects(trx, failed, eventsOf(failed.type).failed);
          return { operation: failed, holdIds: [] };
        }
        const op = await insertOperation(trx, {
          ...base,
          ...approval,
          status: immediate ? 'executed' : 'accepted',
          error_code: null,
          error_message: null,
          settle_after: settlement === 'worker' ? now : null,
          submitted_at: immediate ? now : null,
          executed_at: immediate ? now : null,
          tx_hash: immediate ? txHashOf(id) : null,
        });
        await announce(op);
        if (immediate) await terminalEffects(trx, op, eventsOf(op.type).executed, input.eventData);
        return { operation: op, holdIds };
      });
    },

    async finish(db, operationId, from, outcome) {
      return withTransaction(db, async (trx) => {
        const now = clock.now();
        let op: OperationRow | undefined;
        if (outcome.ok) {
          op = await transitionOperation(trx, operationId, from, { status: 'executed', executed_at: now, updated_at: now, details: outcome.details });
          if (!op) return undefined;
          await terminalEffects(trx, op, eventsOf(op.type).executed);
        } else {
          op = await transitionOperation(trx, operationId, from, { status: 'execution_failed', failed_at: now, updated_at: now, error_code: outcome.code, error_message: outcome.message });
          if (!op) return undefined;
          for (const hold of await findHeldByOperation(trx, operationId)) await ledger.release(trx, hold.id);
          await failureHooks.get(op.type)?.(trx, op);
          await terminalEffects(trx, op, eventsOf(op.type).failed);
        }
        return op;
      });
    },

    registerChainSettler: (type, settler) => void chainSettlers.set(type, settler),
    registerFailureHook: (type, hook) => void failureHooks.set(type, hook),
    registerSettler: (type, settler) => void settlers.set(type, settler),
    registerBatchSettler: (type, settler) => void batchSettlers.set(type, settler),

    settlerTypes: () => [...new Set([...settlers.keys(), ...chainSettlers.keys()])],

    settleDue: (db, opts) => scheduler.settleDue(db, opts),

    recordActivity: (db, input) => activity.record(db, input),

    ...views,
  };

  return service;
}
