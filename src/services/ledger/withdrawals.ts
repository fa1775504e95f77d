// Withdrawals to the owner's bank methods and to confirmed trusted destinations, and the methods themselves.
import { withTransaction, type Db, type Knex } from '../../db/knex.js';
import { findHeldByOperation, type AssetRow } from '../../db/repositories/ledger.repository.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import { findTrustedDestination } from '../../db/repositories/trusted-destination.repository.js';
import { findWithdrawalMethod, insertWithdrawalMethod, listWithdrawalMethods } from '../../db/repositories/withdrawal-method.repository.js';
import type { WithdrawalMethodRow } from '../../db/repositories/withdrawal-method.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid, newId } from '../../lib/ids.js';
import { formatAmount } from '../../lib/money.js';
import { isRefusal, type Refusal } from '../../lib/refusal.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from '../cursor.js';
import type { AmountFields, LedgerService } from './ledger.js';
import { payeeAccount } from './delivery.js';
import { type BatchSettler, type OperationService, type OwnerRef, type SettleOutcome, type WriteResponse } from './operations.js';
import { resolveMoney, shortAddress } from './write-input.js';

export interface WithdrawalService {
  createBankWithdrawal(db: Db, who: OwnerRef & { ownerId: string }, body: Schema<'BankWithdrawalRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  createCryptoWithdrawal(db: Db, who: OwnerRef, body: Schema<'CryptoWithdrawalRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  addMethod(db: Db, ownerId: string, input: { kind: string; label: string; bankName?: string | null; last4?: string | null; currency?: string | null }): Promise<{ method_id: string }>;
  listMethods(db: Db, ownerId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Schema<'WithdrawalMethod'>>>;
  publicMethod(m: WithdrawalMethodRow): Schema<'WithdrawalMethod'>;
  settle(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
  /** `settle` as a batch settles it (settlement-batch.ts). */
  batchSettle: BatchSettler;
}

export function createWithdrawalService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService }): WithdrawalService {
  const { clock, ledger, operations } = deps;
  let cashSymbols: string[] | null = null;
  const cash = async (db: Db) => (cashSymbols ??= [...(await ledger.assets(db)).values()].filter((a) => a.category === 'cash').map((a) => a.symbol));

  /** Records the withdrawal of `body`'s amount of `asset` to one payee (the policy sees it as the recipient). */
  async function withdraw(
    db: Db,
    who: OwnerRef,
    type: 'withdrawal.bank' | 'withdrawal.crypto',
    asset: AssetRow,
    body: AmountFields & { note?: string },
    to: { id: string; address: string | null; label: string; detail: Record<string, string> },
    idempotencyKey: string | null,
  ): Promise<WriteResponse | Refusal> {
    const { amount, usdE8 } = await resolveMoney(db, ledger, asset, body);
    const created = await operations.create(db, {
      principal: who,
      type,
      asset: asset.symbol,
      amount,
      amountUsdE8: usdE8,
      ...(to.address ? { toAddress: to.address } : {}),
      policy: { recipient: { ids: [to.id], address: to.address } },
      details: { ...to.detail, note: body.note ?? null },
      humanMessage: `Withdrawing ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${to.label}`,
      idempotencyKey,
    });
    return isRefusal(created) ? created : operations.writeResponse(created.operation);
  }

  const service: WithdrawalService = {
    async createBankWithdrawal(db, who, body, idempotencyKey) {
      const method = isUuid(body.method_id) ? await findWithdrawalMethod(db, who.ownerId, body.method_id) : undefined;
      if (!method || method.status !== 'active') throw new ApiError('not_found', 'withdrawal method not found', { field: 'method_id' });
      const asset = await ledger.requireAsset(db, body.asset);
      if (asset.category !== 'cash') throw new ApiError('validation_failed', `bank withdrawals take cash assets (${(await cash(db)).join(', ')})`, { field: 'asset' });
      return withdraw(db, who, 'withdrawal.bank', asset, body, { id: method.id, address: null, label: `${method.label} (…${method.account_last4})`, detail: { method_id: method.id } }, idempotencyKey);
    },

    async createCryptoWithdrawal(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        // Locked (destination, then the policy row inside operations.create: the order of destination
        // actions), so a concurrent remove or cancel waits for this withdrawal or sees it refused.
        const dest = isUuid(body.destination_id) ? await findTrustedDestination(trx, who.agentId, body.destination_id, { lock: true }) : undefined;
        if (!dest) throw new ApiError('not_found', 'trusted destination not found', { field: 'destination_id' });
        if (dest.status !== 'confirmed')
          throw new ApiError('invalid_state_transition', `the trusted destination is ${dest.status}; only confirmed destinations take withdrawals`, { status: dest.status });
        const asset = await ledger.requireAsset(trx, body.asset);
        return withdraw(
          trx,
          who,
          'withdrawal.crypto',
          asset,
          body,
          { id: dest.id, address: dest.address, label: `${dest.label} (${shortAddress(dest.address)})`, detail: { trusted_destination_id: dest.id } },
          idempotencyKey,
        );
      });
    },

    async addMethod(db, ownerId, input) {
      if (input.kind !== 'bank') throw new ApiError('validation_failed', 'kind must be bank');
      if (!input.label.trim()) throw new ApiError('validation_failed', 'label is required');
      const id = newId();
      const last4 =
        input.last4 ??
        id
          .replace(/[^0-9]/g, '')
          .slice(-4)
          .padStart(4, '0');
      if (!/^[0-9A-Za-z]{4}$/.test(last4)) throw new ApiError('validation_failed', 'last4 must be 4 letters or digits');
      const currency = (input.currency ?? 'USD').toUpperCase();
      if (!/^[A-Z]{3}$/.test(currency)) throw new ApiError('validation_failed', 'currency must be an ISO 4217 code');
      await insertWithdrawalMethod(db, {
        id,
        owner_id: ownerId,
        kind: 'bank',
        label: input.label,
        bank_name: input.bankName ?? null,
        account_last4: last4,
        currency,
        status: 'active',
        created_at: clock.now(),
      });
      return { method_id: id };
    },

    async listMethods(db, ownerId, query) {
      const limit = pageLimit(query.limit);
      const symbols = await cash(db);
      const rows = await listWithdrawalMethods(db, ownerId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(rows, limit, (m) => ({ ...service.publicMethod(m), asset_symbols: symbols }), encodeKeyset);
    },

    publicMethod(m) {
      return {
        id: m.id,
        kind: 'bank_account',
        label: m.label,
        bank_name: m.bank_name,
        account_last4: m.account_last4,
        currency: m.currency,
        asset_symbols: cashSymbols ?? ['USDC', 'EURC'],
        status: m.status,
        created_at: m.created_at.toISOString(),
      };
    },

    async settle(trx, op) {
      if (op.to_address && (await ledger.isFailingAddress(trx, op.to_address)))
        return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${op.to_address}` };
      const wallet = op.to_address ? await ledger.walletByAddress(trx, op.to_address) : undefined;
      for (const h of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, h.id, payeeAccount(wallet, 'withdrawals'), 'withdrawal');
      return { ok: true };
    },

    batchSettle(op, facts) {
      if (op.to_address && facts.failing) return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${op.to_address}` };
      return { ok: true, capture: { to: payeeAccount(facts.payee, 'withdrawals'), entryType: 'withdrawal' } };
    },
  };
  return service;
}
