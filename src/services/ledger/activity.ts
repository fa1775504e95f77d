// The activity log: one row per financial event of a wallet (terminal operations, receipts, deposits).
import type { Db } from '../../db/knex.js';
import { insertActivity } from '../../db/repositories/activity.repository.js';
import type { NewActivityRow } from '../../db/repositories/settlement.repository.js';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Schema } from '../../lib/contract.js';
import type { OwnerRef } from './settling.js';

export interface ActivityInput {
  principal: OwnerRef;
  type: Schema<'ActivityType'>;
  status: string;
  operationId: string | null;
  direction: 'in' | 'out' | 'none';
  asset?: string | null;
  amount?: bigint | null;
  amountUsdE8?: bigint | null;
  counterparty?: string | null;
  description: string;
  txHash?: string | null;
}

export interface ActivityLog {
  record(db: Db, input: ActivityInput): Promise<void>;
  /** The row `record` writes, for a caller that writes many in one statement (settlement-batch.ts). */
  row(input: ActivityInput): NewActivityRow;
}

export function createActivityLog(deps: { clock: Clock }): ActivityLog {
  const { clock } = deps;
  return {
    async record(db, input) {
      await insertActivity(db, {
        id: newId(),
        agent_id: input.principal.agentId,
        wallet_id: input.principal.walletId,
        type: input.type,
        status: input.status,
        operation_id: input.operationId,
        direction: input.direction,
        asset_symbol: input.asset ?? null,
        amount: input.amount ?? null,
        amount_usd_e8: input.amountUsdE8 ?? null,
        counterparty: input.counterparty ?? null,
        description: input.description,
        ...(input.txHash ? { tx_hash: input.txHash } : {}),
        created_at: clock.now(),
      });
    },

    row(input) {
      return {
        id: newId(),
        agent_id: input.principal.agentId,
        wallet_id: input.principal.walletId,
        type: input.type,
        status: input.status,
        operation_id: input.operationId,
        direction: input.direction,
        asset_symbol: input.asset ?? null,
        amount: input.amount?.toString() ?? null,
        amount_usd_e8: input.amountUsdE8?.toString() ?? null,
        counterparty: input.counterparty ?? null,
        description: input.description,
        created_at: clock.now(),
      };
    },
  };
}
