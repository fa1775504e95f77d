// The settlement scheduler: claims due operations, submits accepted ones to their chain, then settles submitted
// ones (executed | execution_failed) through the registered settler or the chain's receipt.
import { ChainUnavailableError, type TrackResult } from '../../chain/port.js';
import { openSavepoint, savepoint, type Knex } from '../../db/knex.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { type OperationRow, type OperationStatus, claimDueOperations, transitionOperation } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { Chains } from './chains.js';
import type { LedgerService } from './ledger.js';
import type { ChainSettler, SettleOutcome, Settler } from './settling.js';

export interface SettlementScheduler {
  /** One settlement pass: accepted -> submitted, then due submitted -> executed | execution_failed. Returns rows moved. */
  settleDue(db: Knex, opts?: { limit?: number }): Promise<number>;
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
}): SettlementScheduler {
  const { clock, ledger, chains, retryMs, settlers } = deps;
  let lastPumpWarning = 0;

  /** On-chain confirmation: the amount's hold leaves the wallet (the recipient is credited by the chain itself); other holds (the gas reserve) are released. */
  async function captureOnChain(trx: Knex.Transaction, op: OperationRow, tracked: Extract<TrackResult, { state: 'confirmed' }>): Promise<SettleOutcome> {
    const custom = deps.chainSettlers.get(op.type);
    if (custom) return custom(trx, op, tracked.details);
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
    await ledger.post(trx, { operationId: op.id, entryType: 'gas_fee', postings: [{ account: { kind: 'available', walletId: op.wallet_id }, asset: 'ETH', amount: -feeUnits }, { account: { kind: 'external', name: 'gas' }, asset: 'ETH', amount: feeUnits }] });
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

  return {
    async settleDue(db, opts = {}) {
      const limit = opts.limit ?? 50;
      const types = deps.settlerTypes();
      let moved = 0;
      // Phase 1: accepted -> submitted. The simulated chain makes up a hash and settles SETTLEMENT_DELAY_MS later;
      // the evm chain signs and records the transfer here (broadcast after commit, by the chain's pump). A chain
      // that cannot be reached leaves the operation accepted (its holds stay) for a later pass. With a real chain,
      // one operation per transaction: a nonce row stays locked until commit, and a batch taking the relayer's and
      // a wallet's rows in claim order could deadlock with another worker taking them in the other order.
      const batch = chains.chain === chains.simulated ? limit : 1;
      let claimed = 0;
      let unreachable = false;
      while (claimed < limit && !unreachable) {
        const { due, submitted } = await db.transaction(async (trx) => {
          const now = clock.now();
          const rows = await claimDueOperations(trx, 'accepted', types, now, batch);
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
      // Phase 2: due submitted -> executed | execution_failed, one operation per transaction and its settler in a
      // savepoint. One at a time so a transaction holds the balance rows of one transfer only: a batch locking the
      // rows of many transfers in claim order deadlocks with another worker (or a write) locking them in another.
      // An unexpected error leaves that operation submitted for a later pass instead of stalling every other one.
      const skipped: string[] = [];
      for (let i = 0; i < limit; i++) {
        let claimed: OperationRow | undefined;
        try {
          const settled = await db.transaction(async (trx) => {
            [claimed] = await claimDueOperations(trx, 'submitted', types, clock.now(), 1, skipped);
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
    },
  };
}
