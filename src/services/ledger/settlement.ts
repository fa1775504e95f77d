// The settlement scheduler: claims due operations, submits accepted ones to their chain, then settles submitted
// ones (executed | execution_failed) through the registered settler or the chain's receipt. On the simulated chain
// the types with a batch settler are settled many to a transaction first (settlement-batch.ts), the rest one at a time.
import { ChainUnavailableError, type TrackResult } from '../../chain/port.js';
import { openSavepoint, savepoint, type Knex } from '../../db/knex.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { type OperationRow, type OperationStatus, claimDueOperations, claimOperationsByIds, transitionOperation } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { Chains } from './chains.js';
import type { LedgerService } from './ledger.js';
import type { BatchSettlement } from './settlement-batch.js';
import type { ChainSettler, SettleOutcome, Settler } from './settling.js';

export interface SettlementScheduler {
  /** One settlement pass: accepted -> submitted, then due submitted -> executed | execution_failed. Returns rows moved. */
  settleDue(db: Knex, opts?: { limit?: number }): Promise<number>;
}

/** Operations one batch settles (SETTLEMENT_BATCH_SIZE); 0 settles every operation one at a time, as before issue 31. */
export const DEFAULT_SETTLEMENT_BATCH_SIZE = 200;
/** How often the one-at-a-time passes run while batches keep moving work (they always run when a batch moves none). */
const OTHER_PASSES_MS = 200;

export interface BatchOptions {
  size: number;
  settlementDelayMs: number;
  settlement: BatchSettlement;
}

export function createSettlementScheduler(deps: {
  clock: Clock;
  ledger: LedgerService;
  chains: Chains;
  retryMs: number;
  log?: Logger;
  settlers: ReadonlyMap<string, Settler>;
  chainSettlers: ReadonlyMap<string, ChainSettler>;
  settlerTypes(): string[];
  finish(db: Knex.Transaction, operationId: string, from: OperationStatus, outcome: SettleOutcome): Promise<OperationRow | undefined>;
  /** Batch settlement (issue 31): on the simulated chain, with `size` > 0, the batch-settled types go through it first. */
  batch?: BatchOptions;
}): SettlementScheduler {
  const { clock, ledger, chains, retryMs, settlers } = deps;
  let lastPumpWarning = 0;

  /** On-chain confirmation: the amount's hold leaves the wallet (the recipient is credited by the chain itself); other holds (the gas reserve) are released. */
  async function captureOnChain(trx: Knex.Transaction, op: OperationRow, tracked: Extract<TrackResult, { state: 'confirmed' }>): Promise<SettleOutcome> {
    const custom = await deps.chainSettlers.get(op.type)?.(trx, op, tracked.details);
    if (custom) return custom;
    let captured = false;
    for (const hold of await findHeldByOperation(trx, op.id)) {
      if (!captured && hold.asset_symbol === op.asset_symbol && hold.amount === op.amount) {
        captured = await ledger.capture(trx, hold.id, { kind: 'external', name: 'onchain' }, op.type === 'payment' ? 'payment' : 'withdrawal');
      } else {
        await ledger.release(trx, hold.id);
      }
    }
    return { ok: true, details: tracked.details };
  }

  /** Gas the wallet itself paid (ETH transfers), out of its available balance once the holds are resolved. */
  async function postGasFee(trx: Knex.Transaction, op: OperationRow, feeUnits: bigint) {
    if (feeUnits <= 0n) return;
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'gas_fee',
      postings: [
        { account: { kind: 'available', walletId: op.wallet_id }, asset: 'ETH', amount: -feeUnits },
        { account: { kind: 'external', name: 'gas' }, asset: 'ETH', amount: feeUnits },
      ],
    });
  }

  /** Runs a settler in a savepoint: a failed outcome (returned, or an ApiError thrown) undoes its writes. */
  async function settleInSavepoint(trx: Knex.Transaction, settler: Settler, op: OperationRow): Promise<SettleOutcome> {
    const sp = await openSavepoint(trx);
    try {
      const result = await settler(sp, op);
      if (result.ok) await sp.commit();
      else await sp.rollback();
      return result;
    } catch (err) {
      await sp.rollback();
      if (err instanceof ApiError) return { ok: false, code: err.code, message: err.message };
      throw err;
    }
  }

  /** Phase 1 over the rows `claim` takes: accepted -> submitted (or a terminal refusal of the chain). */
  async function submitPass(db: Knex, claim: (trx: Knex.Transaction, now: Date, batch: number) => Promise<OperationRow[]>, limit: number): Promise<number> {
    // The simulated chain makes up a hash and settles SETTLEMENT_DELAY_MS later; the evm chain signs and records the
    // transfer here (broadcast after commit, by the chain's pump). A chain that cannot be reached leaves the operation
    // accepted (its holds stay) for a later pass. With a real chain, one operation per transaction: a nonce row stays
    // locked until commit, and a batch taking the relayer's and a wallet's rows in claim order could deadlock with
    // another worker taking them in the other order.
    const batch = chains.chain === chains.simulated ? limit : 1;
    let moved = 0;
    let claimed = 0;
    let unreachable = false;
    while (claimed < limit && !unreachable) {
      const { due, submitted } = await db.transaction(async (trx) => {
        const now = clock.now();
        const rows = await claim(trx, now, batch);
        let n = 0;
        for (const [i, op] of rows.entries()) {
          const adapter = await chains.adapterFor(trx, op);
          let result;
          try {
            result = await savepoint(trx, (sp) => adapter.submit(sp, op));
          } catch (err) {
            if (!(err instanceof ChainUnavailableError)) deps.log?.error({ err, operation_id: op.id }, 'chain submission failed; retried later');
            else deps.log?.warn({ err: err.message }, 'chain unreachable; accepted operations wait');
            const later = { status: 'accepted' as const, settle_after: new Date(now.getTime() + retryMs), updated_at: now };
            for (const rest of err instanceof ChainUnavailableError ? rows.slice(i) : [op]) await transitionOperation(trx, rest.id, 'accepted', later);
            if (!(err instanceof ChainUnavailableError)) continue;
            unreachable = true;
            break;
          }
          if (!result.ok) await deps.finish(trx, op.id, 'accepted', result);
          else await transitionOperation(trx, op.id, 'accepted', { status: 'submitted', submitted_at: now, settle_after: result.recheckAt, tx_hash: result.txHash, updated_at: now });
          n += 1;
        }
        return { due: rows.length, submitted: n };
      });
      moved += submitted;
      claimed += due;
      if (due < batch) break;
    }
    if (chains.chain !== chains.simulated && !unreachable) {
      await chains.chain.pump(db).catch((err: unknown) => {
        // At most one warning a minute while the node stays away (the loop retries every few hundred ms).
        if (clock.now().getTime() - lastPumpWarning < 60_000) return;
        lastPumpWarning = clock.now().getTime();
        deps.log?.warn({ err: err instanceof Error ? err.message.split('\n')[0] : String(err) }, 'chain broadcast pass failed; retried');
      });
    }
    return moved;
  }

  /**
   * Phase 2 over the rows `claim` takes (one each call): due submitted -> executed | execution_failed, one operation per
   * transaction and its settler in a savepoint. One at a time so a transaction holds the balance rows of one transfer
   * only: a settler's postings lock rows in its own order, and a batch of them in claim order could deadlock with
   * another worker (or a write) taking them in another (settlement-batch.ts settles the types that can be batched).
   * An unexpected error leaves that operation submitted for a later pass instead of stalling every other one.
   */
  async function settlePass(db: Knex, claim: (trx: Knex.Transaction, now: Date, skipped: string[]) => Promise<OperationRow[]>, limit: number): Promise<number> {
    let moved = 0;
    const skipped: string[] = [];
    for (let i = 0; i < limit; i++) {
      let claimed: OperationRow | undefined;
      try {
        const settled = await db.transaction(async (trx) => {
          [claimed] = await claim(trx, clock.now(), skipped);
          const op = claimed;
          if (!op) return 'none' as const;
          const adapter = await chains.adapterFor(trx, op);
          const tracked = await adapter.track(trx, op);
          if (tracked.state === 'pending') {
            await transitionOperation(trx, op.id, 'submitted', { status: 'submitted', settle_after: new Date(clock.now().getTime() + retryMs), updated_at: clock.now() });
            return 'pending' as const;
          }
          if (tracked.txHash && tracked.txHash !== op.tx_hash) await transitionOperation(trx, op.id, 'submitted', { status: 'submitted', tx_hash: tracked.txHash, updated_at: clock.now() });
          let outcome: SettleOutcome;
          if (tracked.state === 'failed') {
            outcome = { ok: false, code: tracked.code, message: tracked.message };
          } else if (adapter !== chains.simulated) {
            outcome = await captureOnChain(trx, op, tracked);
          } else {
            const settler = settlers.get(op.type)!;
            outcome = await settleInSavepoint(trx, settler, op);
          }
          await deps.finish(trx, op.id, 'submitted', outcome);
          await postGasFee(trx, op, tracked.feeUnits);
          return 'settled' as const;
        });
        if (settled === 'none') break;
        if (settled === 'pending') skipped.push(claimed!.id);
        else moved += 1;
      } catch (err) {
        if (!claimed) throw err;
        if (err instanceof ChainUnavailableError) {
          deps.log?.warn({ err: err.message }, 'chain unreachable; submitted operations wait');
          break;
        }
        skipped.push(claimed.id);
        deps.log?.error({ err, operation_id: claimed.id, type: claimed.type }, 'settlement of an operation failed; retried on a later pass');
      }
    }
    return moved;
  }

  /**
   * Operations the batch declined (their settler answered null) or that failed a batch, by id, until this time:
   * kept out of later batches (which would claim them first, being the oldest due) while the one-at-a-time passes
   * settle them.
   */
  const declined = new Map<string, number>();
  let lastOtherPasses = 0;
  const DECLINED_MS = 60_000;

  /** The batch pass (simulated chain, batch-settled types); returns rows moved and the ids left to the other passes. */
  async function batchPass(db: Knex, batch: BatchOptions): Promise<{ moved: number; deferred: string[] }> {
    const at = clock.now().getTime();
    for (const [id, until] of declined) if (until <= at) declined.delete(id);
    // With no settlement delay an accepted operation is due at once: it is submitted and settled in one batch.
    const statuses: ('accepted' | 'submitted')[] = batch.settlementDelayMs === 0 ? ['accepted', 'submitted'] : ['submitted'];
    let claimedIds: string[] = [];
    try {
      const result = await batch.settlement.settleBatch(db, { limit: batch.size, statuses, skip: [...declined.keys()], onClaim: (ids) => (claimedIds = ids) });
      for (const id of result.deferred) declined.set(id, at + DECLINED_MS);
      return { moved: result.settled, deferred: result.deferred };
    } catch (err) {
      // Rolled back whole (a constraint, a lost lock wait): its operations are settled one at a time instead, where
      // an operation that cannot settle is skipped alone (the error is logged there).
      deps.log?.warn({ err: err instanceof Error ? err.message : String(err), operations: claimedIds.length }, 'batch settlement failed; its operations are settled one at a time');
      for (const id of claimedIds) declined.set(id, at + DECLINED_MS);
      return { moved: 0, deferred: claimedIds };
    }
  }

  return {
    async settleDue(db, opts = {}) {
      const limit = opts.limit ?? 50;
      const batch = deps.batch && deps.batch.size > 0 && chains.chain === chains.simulated ? deps.batch : null;
      const all = deps.settlerTypes();
      let moved = 0;
      let deferred: string[] = [];
      // Types the batch settles stay out of the one-at-a-time passes (phase 1 keeps them when a delay separates
      // submission from settlement: the batch takes them once submitted and due).
      let submitTypes = all;
      let settleTypes = all;
      if (batch) {
        const batched = new Set(batch.settlement.types());
        settleTypes = all.filter((t) => !batched.has(t));
        if (batch.settlementDelayMs === 0) submitTypes = settleTypes;
        ({ moved, deferred } = await batchPass(db, batch));
        // While batches move work the one-at-a-time passes (a transaction each, even with nothing due) run at most every
        // OTHER_PASSES_MS: under API load each round trip of the in-process worker waits behind the requests' work on
        // the event loop (tens of ms each, measured), and these six round trips would double a busy tick.
        if (moved > 0 && deferred.length === 0 && performance.now() - lastOtherPasses < OTHER_PASSES_MS) return moved;
      }
      lastOtherPasses = performance.now();
      moved += await submitPass(db, (trx, now, n) => claimDueOperations(trx, 'accepted', submitTypes, now, n), limit);
      if (deferred.length > 0) moved += await submitPass(db, (trx) => claimOperationsByIds(trx, deferred, 'accepted'), deferred.length);
      moved += await settlePass(db, (trx, now, skipped) => claimDueOperations(trx, 'submitted', settleTypes, now, 1, skipped), limit);
      if (deferred.length > 0)
        moved += await settlePass(
          db,
          async (trx, now, skipped) =>
            (
              await claimOperationsByIds(
                trx,
                deferred.filter((id) => !skipped.includes(id)),
                'submitted',
              )
            )
              .filter((op) => !op.settle_after || op.settle_after <= now)
              .slice(0, 1),
          deferred.length,
        );
      return moved;
    },
  };
}
