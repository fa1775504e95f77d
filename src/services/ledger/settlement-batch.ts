// Batch settlement on the simulated chain (issue 31): many due operations settled in one transaction of six round
// trips (BEGIN, claim, one read, one write of every row but the balances, the balances, COMMIT), the balance rows last
// and in one global order.
//
// Why it cannot deadlock: the operations are claimed with SKIP LOCKED (two batches never share one), a hold belongs
// to one operation, and every balance change of the batch is netted per (wallet, asset) and applied by the batch's
// last statement in (wallet, asset) order, the order every ledger posting takes its rows in (ledger.ts post) and
// a write's hold takes its one row in. Two transactions that take rows in one order cannot wait on each other in a
// cycle. The balance rows (shared by every batch that touches a wallet) are held from that statement to COMMIT
// only, so concurrent settlers overlap everything else.
import type { Knex } from '../../db/knex.js';
import type { NewEvent } from '../../db/repositories/event.repository.js';
import type { AssetRow, HoldRow } from '../../db/repositories/ledger.repository.js';
import { claimDueOperations, type OperationRow } from '../../db/repositories/operation.repository.js';
import {
  applyBalanceDeltas,
  readSettlementFacts,
  writeSettledBatch,
  type BalanceDelta,
  type JournalLeg,
  type NewActivityRow,
  type OperationFinish,
} from '../../db/repositories/settlement.repository.js';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { ActivityInput, ActivityLog } from './activity.js';
import type { Chains } from './chains.js';
import { accountName, type Account, type LedgerService, type PriceBook } from './ledger.js';

/** What a batch settler knows of one operation: read for the whole batch in one statement (settlement-batch.ts). */
export interface BatchFacts {
  /** The operation's holds still held, oldest first. */
  holds: HoldRow[];
  /** The agent wallet at the operation's `to_address`, when there is one. */
  payee: { id: string; agent_id: string } | undefined;
  /** The simulated chain refuses transfers to `to_address` (agentctl chain fail-address). */
  failing: boolean;
  assets: ReadonlyMap<string, AssetRow>;
  prices: PriceBook;
}

/**
 * How a batch settles one operation, decided without I/O: executed, every held hold captured to `capture.to`
 * (none when `capture` is null: the holds stay, as a one-off payment's escrow does), with `activity` rows beside the
 * terminal one; or failed, every held hold released.
 */
export type BatchPlan = { ok: true; details?: Record<string, unknown>; capture: { to: Account; entryType: string } | null; activity?: ActivityInput[] } | { ok: false; code: string; message: string };

/** The batch form of a type's settler; null leaves this operation to the one-at-a-time path (its Settler). */
export type BatchSettler = (op: OperationRow, facts: BatchFacts) => BatchPlan | null;

export interface BatchResult {
  /** Operations claimed by the batch (settled or deferred). */
  claimed: number;
  /** Operations moved to a terminal state. */
  settled: number;
  /** Claimed operations whose settler declined the batch: the one-at-a-time path settles them. */
  deferred: string[];
}

export interface BatchSettlement {
  /** The types with a batch settler. */
  types(): string[];
  /**
   * One batch of up to `limit` due operations of the batch-settled types in `statuses` (not in `skip`), in one
   * transaction; `onClaim` hears the ids claimed (so a caller can settle them otherwise when the batch fails).
   */
  settleBatch(db: Knex, opts: { limit: number; statuses: ('accepted' | 'submitted')[]; skip: string[]; onClaim?: (ids: string[]) => void }): Promise<BatchResult>;
}

export function createBatchSettlement(deps: {
  clock: Clock;
  ledger: LedgerService;
  chains: Chains;
  activity: Pick<ActivityLog, 'row'>;
  batchSettlers: ReadonlyMap<string, BatchSettler>;
  /** Types whose failure runs a hook of its own (operations.ts registerFailureHook): never settled in a batch. */
  hasFailureHook(type: string): boolean;
  /** The terminal activity row and outbox event of an operation in its final state (operations.ts). */
  terminalRecords(db: Knex.Transaction, op: OperationRow): Promise<{ activity: ActivityInput; event: NewEvent | null }>;
}): BatchSettlement {
  const { clock, ledger, chains } = deps;

  return {
    types: () => [...deps.batchSettlers.keys()],

    async settleBatch(db, { limit, statuses, skip, onClaim }) {
      const types = [...deps.batchSettlers.keys()];
      if (types.length === 0) return { claimed: 0, settled: 0, deferred: [] };
      return db.transaction(async (trx): Promise<BatchResult> => {
        const now = clock.now();
        const claimed = await claimDueOperations(trx, statuses, types, now, limit, skip);
        if (claimed.length === 0) return { claimed: 0, settled: 0, deferred: [] };
        onClaim?.(claimed.map((op) => op.id));
        const addresses = [...new Set(claimed.map((op) => op.to_address?.toLowerCase()).filter((a): a is string => !!a))];
        const facts = await readSettlementFacts(
          trx,
          claimed.map((op) => op.id),
          addresses,
        );
        const assets = await ledger.assets(trx);
        const prices = ledger.priceBookOf(facts.prices);
        const holdsOf = new Map<string, typeof facts.holds>();
        for (const h of facts.holds) holdsOf.set(h.operation_id!, [...(holdsOf.get(h.operation_id!) ?? []), h]);

        const deferred: string[] = [];
        const finishes: OperationFinish[] = [];
        const holdMoves: { id: string; to: 'captured' | 'released' }[] = [];
        const legs: JournalLeg[] = [];
        const extraActivity: ActivityInput[] = [];
        const deltas = new Map<string, BalanceDelta & { a: bigint; h: bigint }>();
        const addDelta = (walletId: string, asset: string, available: bigint, held: bigint) => {
          const key = `${walletId}\u0000${asset}`;
          const d = deltas.get(key) ?? { wallet_id: walletId, asset_symbol: asset, available: '0', held: '0', a: 0n, h: 0n };
          d.a += available;
          d.h += held;
          deltas.set(key, d);
        };
        /** A hold leaving `held` for `to` as its own journal entry (as ledger.capture and ledger.release post it). */
        const moveHold = (hold: (typeof facts.holds)[number], to: Account, entryType: string, status: 'captured' | 'released') => {
          const amount = BigInt(hold.amount);
          const journalId = newId();
          holdMoves.push({ id: hold.id, to: status });
          legs.push({
            journal_id: journalId,
            operation_id: hold.operation_id,
            account: accountName({ kind: 'held', walletId: hold.wallet_id }),
            wallet_id: hold.wallet_id,
            asset_symbol: hold.asset_symbol,
            amount: (-amount).toString(),
            entry_type: entryType,
          });
          legs.push({
            journal_id: journalId,
            operation_id: hold.operation_id,
            account: accountName(to),
            wallet_id: to.kind === 'external' ? null : to.walletId,
            asset_symbol: hold.asset_symbol,
            amount: amount.toString(),
            entry_type: entryType,
          });
          addDelta(hold.wallet_id, hold.asset_symbol, 0n, -amount);
          if (to.kind === 'available') addDelta(to.walletId, hold.asset_symbol, amount, 0n);
          else if (to.kind === 'held') addDelta(to.walletId, hold.asset_symbol, 0n, amount);
        };

        for (const op of claimed) {
          const settler = deps.batchSettlers.get(op.type)!;
          const address = op.to_address?.toLowerCase();
          const holds = holdsOf.get(op.id) ?? [];
          const plan = deps.hasFailureHook(op.type)
            ? null
            : settler(op, { holds, payee: address ? facts.walletsByAddress.get(address) : undefined, failing: address ? facts.failing.has(address) : false, assets, prices });
          if (!plan) {
            deferred.push(op.id);
            continue;
          }
          // An accepted operation is submitted to the simulated chain in the same instant (its hash, no I/O).
          let txHash: string | null = null;
          if (op.status === 'accepted') {
            const submitted = await chains.simulated.submit(trx, op);
            txHash = submitted.ok ? submitted.txHash : null;
          }
          if (plan.ok) {
            finishes.push({ id: op.id, status: 'executed', tx_hash: txHash, error_code: null, error_message: null, details: plan.details ?? null });
            if (plan.capture) for (const h of holds) moveHold(h, plan.capture.to, plan.capture.entryType, 'captured');
            extraActivity.push(...(plan.activity ?? []));
          } else {
            finishes.push({ id: op.id, status: 'execution_failed', tx_hash: txHash, error_code: plan.code, error_message: plan.message, details: null });
            for (const h of holds) moveHold(h, { kind: 'available', walletId: h.wallet_id }, 'release', 'released');
          }
        }

        // The rows as the guarded update leaves them (each is locked by this transaction since its claim): the terminal
        // activity and event are built from them and written by the same statement.
        const claimedById = new Map(claimed.map((op) => [op.id, op]));
        const finished = finishes.map((f) => finishedRow(claimedById.get(f.id)!, f, now));
        const activity: NewActivityRow[] = extraActivity.map((a) => deps.activity.row(a));
        const events: NewEvent[] = [];
        for (const op of finished) {
          const records = await deps.terminalRecords(trx, op);
          activity.push(deps.activity.row(records.activity));
          if (records.event) events.push(records.event);
        }
        // The shared rows last, in (wallet, asset) order (ledger.ts post sorts its keys the same way).
        const ordered = [...deltas.keys()]
          .sort()
          .map((k) => deltas.get(k)!)
          .filter((d) => d.a !== 0n || d.h !== 0n);
        const creditedRows = ordered.filter((d) => d.a >= 0n && d.h >= 0n).map(({ wallet_id, asset_symbol }) => ({ wallet_id, asset_symbol }));
        const written = await writeSettledBatch(trx, { finishes, holdMoves, legs, activity, events, creditedRows }, now);
        // Every claimed row and its holds are locked by this transaction: anything else is a bug, undone by the throw.
        if (written.finished !== finishes.length || written.holds !== holdMoves.length)
          throw new Error(`batch settlement moved ${written.finished} of ${finishes.length} operations and ${written.holds} of ${holdMoves.length} holds`);
        await applyBalanceDeltas(
          trx,
          ordered.map(({ wallet_id, asset_symbol, a, h }) => ({ wallet_id, asset_symbol, available: a.toString(), held: h.toString() })),
          now,
        );
        return { claimed: claimed.length, settled: finished.length, deferred };
      });
    },
  };
}

/** `op` as writeSettledBatch's guarded update leaves it (jsonb `||` merges `details` one level deep, as spreading does). */
function finishedRow(op: OperationRow, f: OperationFinish, now: Date): OperationRow {
  return {
    ...op,
    status: f.status,
    submitted_at: op.submitted_at ?? now,
    tx_hash: op.tx_hash ?? f.tx_hash,
    executed_at: f.status === 'executed' ? now : op.executed_at,
    failed_at: f.status === 'execution_failed' ? now : op.failed_at,
    error_code: f.error_code ?? op.error_code,
    error_message: f.error_message ?? op.error_message,
    details: f.details ? { ...op.details, ...f.details } : op.details,
    updated_at: now,
  };
}
