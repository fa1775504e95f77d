// The settlement worker loop: accepted operations are submitted, then settled (executed or execution_failed)
// SETTLEMENT_DELAY_MS later; pending one-off payments past their expiry release their holds, and so do operations
// whose owner's approval expired (issue 27: cancelled).
import type { Knex } from 'knex';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { createPollingLoop, type WorkerLoop } from '../../worker.js';
import type { LedgerArea } from './area.js';

export interface SettlementDeps {
  db: Knex;
  ledger: Pick<LedgerArea, 'operations' | 'payments' | 'approvals'>;
  log: Logger;
  clock?: Clock;
  idleMs?: number;
}

/** One pass of everything the loop does; returns how many rows moved (0 = idle). */
export async function runSettlementTick(deps: Pick<SettlementDeps, 'db' | 'ledger'>): Promise<number> {
  const settled = await deps.ledger.operations.settleDue(deps.db);
  const expired = await deps.ledger.payments.expireOneOffs(deps.db);
  const approvals = await deps.ledger.approvals.expireDue(deps.db);
  return settled + expired + approvals;
}

export function createSettlementLoop(deps: SettlementDeps): WorkerLoop {
  let lastExpiry = 0;
  const tick = async () => {
    const settled = await deps.ledger.operations.settleDue(deps.db);
    // The expiry pass is a transaction of its own: while settlement is busy it runs at most once a second.
    if (settled > 0 && performance.now() - lastExpiry < 1000) return settled;
    lastExpiry = performance.now();
    return settled + (await deps.ledger.payments.expireOneOffs(deps.db)) + (await deps.ledger.approvals.expireDue(deps.db));
  };
  return createPollingLoop('settlement', tick, { idleMs: deps.idleMs ?? 100, log: deps.log });
}
