// Delivery to a payee: the account a payment to an address credits (the wallet of another agent here, else the
// outside world) and the payment.received activity of a receiving agent.
import type { Db } from '../../db/knex.js';
import type { AssetRow } from '../../db/repositories/ledger.repository.js';
import { formatAmount } from '../../lib/money.js';
import type { ActivityInput, ActivityLog } from './activity.js';
import type { Account, LedgerService } from './ledger.js';

export type Payee = { id: string; agent_id: string } | undefined;

export interface Delivery {
  paymentToAccount(trx: Db, address: string): Promise<{ account: Account; wallet: Payee }>;
  recordReceived(trx: Db, wallet: Payee, operationId: string, asset: AssetRow, amount: bigint, from: string | null): Promise<void>;
}

/** The account a payment to `wallet`'s address credits (else the outside world under `external`). */
export const payeeAccount = (wallet: Payee, external = 'payments'): Account => (wallet ? { kind: 'available', walletId: wallet.id } : { kind: 'external', name: external });

/** The payment.received activity of a receiving agent (`usdE8` null when the price is unknown or stale). */
export function receivedActivity(wallet: NonNullable<Payee>, operationId: string, asset: AssetRow, amount: bigint, usdE8: bigint | null, from: string | null): ActivityInput {
  return {
    principal: { agentId: wallet.agent_id, walletId: wallet.id },
    type: 'payment.received',
    status: 'executed',
    operationId,
    direction: 'in',
    asset: asset.symbol,
    amount,
    amountUsdE8: usdE8,
    counterparty: from,
    description: `Received ${formatAmount(amount, asset.decimals)} ${asset.symbol}`,
  };
}

export function createDelivery(deps: { ledger: LedgerService; activity: Pick<ActivityLog, 'record'> }): Delivery {
  const { ledger } = deps;
  return {
    async paymentToAccount(trx, address) {
      const wallet = await ledger.walletByAddress(trx, address);
      return { account: payeeAccount(wallet), wallet };
    },

    async recordReceived(trx, wallet, operationId, asset, amount, from) {
      if (!wallet) return;
      await deps.activity.record(trx, receivedActivity(wallet, operationId, asset, amount, await ledger.usdValue(trx, asset, amount).catch(() => null), from));
    },
  };
}
