// Withdrawals to the owner's bank methods and to confirmed trusted destinations, and the methods themselves.
import type { Db, Knex } from '../db/knex.js';
import { findHeldByOperation } from '../db/repositories/ledger.repository.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import * as repo from '../db/repositories/recipient.repository.js';
import type { WithdrawalMethodRow } from '../db/repositories/recipient.repository.js';
import type { Clock } from '../lib/clock.js';
import { ApiError } from '../lib/errors.js';
import { isRefusal } from '../lib/refusal.js';
import { isUuid, newId } from '../lib/ids.js';
import { formatAmount } from '../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';
import type { LedgerService } from './ledger.service.js';
import { withWriteTransaction, type OperationService, type OwnerRef, type SettleOutcome, type WriteResponse } from './operation.service.js';
import { checkNote, resolveMoney } from './payment.service.js';

export interface WithdrawalBody {
  asset: string;
  note?: string;
  amount?: string;
  amount_usd?: string;
}

export interface WithdrawalService {
  createBankWithdrawal(db: Db, who: OwnerRef & { ownerId: string }, body: WithdrawalBody & { method_id: string }, idempotencyKey: string | null): Promise<WriteResponse>;
  createCryptoWithdrawal(db: Db, who: OwnerRef, body: WithdrawalBody & { destination_id: string }, idempotencyKey: string | null): Promise<WriteResponse>;
  addMethod(db: Db, ownerId: string, input: { kind: string; label: string; bankName?: string | null; last4?: string | null; currency?: string | null }): Promise<{ method_id: string }>;
  listMethods(db: Db, ownerId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Record<string, unknown>>>;
  publicMethod(m: WithdrawalMethodRow): Record<string, unknown>;
  settle(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
}

export function createWithdrawalService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService }): WithdrawalService {
  const { clock, ledger, operations } = deps;
  let cashSymbols: string[] | null = null;
  const cash = async (db: Db) => (cashSymbols ??= [...(await ledger.assets(db)).values()].filter((a) => a.category === 'cash').map((a) => a.symbol));

  const service: WithdrawalService = {
    async createBankWithdrawal(db, who, body, idempotencyKey) {
      const note = checkNote(body.note);
      const method = isUuid(body.method_id) ? await repo.findWithdrawalMethod(db, who.ownerId, body.method_id) : undefined;
      if (!method || method.status !== 'active') throw new ApiError('not_found', 'withdrawal method not found', { field: 'method_id' });
      const asset = await ledger.requireAsset(db, body.asset);
      if (asset.category !== 'cash') throw new ApiError('validation_failed', `bank withdrawals take cash assets (${(await cash(db)).join(', ')})`, { field: 'asset' });
      const { amount, usdE8 } = await resolveMoney(db, ledger, asset, body);
      const created = await operations.create(db, {
        principal: who,
        type: 'withdrawal.bank',
        asset: asset.symbol,
        amount,
        amountUsdE8: usdE8,
        policy: { recipient: { ids: [method.id], address: null } },
        details: { method_id: method.id, note },
        humanMessage: `Withdrawing ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${method.label} (…${method.account_last4})`,
        idempotencyKey,
      });
      // Until the ledger branch lands: its callers still expect the refusal thrown (and committed).
      if (isRefusal(created)) throw new ApiError(created.refusal.code, created.refusal.message, created.refusal.details, { commit: true });
      const { operation } = created;
      return operations.writeResponse(operation);
    },

    async createCryptoWithdrawal(db, who, body, idempotencyKey) {
      const note = checkNote(body.note);
      return withWriteTransaction(db, async (trx) => {
        // Locked (destination, then the policy row inside operations.create: the order of destination
        // actions), so a concurrent remove or cancel waits for this withdrawal or sees it refused.
        const dest = isUuid(body.destination_id) ? await repo.findTrustedDestination(trx, who.agentId, body.destination_id, { lock: true }) : undefined;
        if (!dest) throw new ApiError('not_found', 'trusted destination not found', { field: 'destination_id' });
        if (dest.status !== 'confirmed') throw new ApiError('invalid_state_transition', `the trusted destination is ${dest.status}; only confirmed destinations take withdrawals`, { status: dest.status });
        const asset = await ledger.requireAsset(trx, body.asset);
        const { amount, usdE8 } = await resolveMoney(trx, ledger, asset, body);
        const created = await operations.create(trx, {
          principal: who,
          type: 'withdrawal.crypto',
          asset: asset.symbol,
          amount,
          amountUsdE8: usdE8,
          toAddress: dest.address,
          policy: { recipient: { ids: [dest.id], address: dest.address } },
          details: { trusted_destination_id: dest.id, note },
          humanMessage: `Withdrawing ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${dest.label} (${dest.address.slice(0, 6)}…${dest.address.slice(-4)})`,
          idempotencyKey,
        });
        // Until the ledger branch lands: its callers still expect the refusal thrown (and committed).
        if (isRefusal(created)) throw new ApiError(created.refusal.code, created.refusal.message, created.refusal.details, { commit: true });
        const { operation } = created;
        return operations.writeResponse(operation);
      });
    },

    async addMethod(db, ownerId, input) {
      if (input.kind !== 'bank') throw new ApiError('validation_failed', 'kind must be bank');
      if (!input.label.trim()) throw new ApiError('validation_failed', 'label is required');
      const id = newId();
      const last4 = input.last4 ?? id.replace(/[^0-9]/g, '').slice(-4).padStart(4, '0');
      if (!/^[0-9A-Za-z]{4}$/.test(last4)) throw new ApiError('validation_failed', 'last4 must be 4 letters or digits');
      const currency = (input.currency ?? 'USD').toUpperCase();
      if (!/^[A-Z]{3}$/.test(currency)) throw new ApiError('validation_failed', 'currency must be an ISO 4217 code');
      await repo.insertWithdrawalMethod(db, { id, owner_id: ownerId, kind: 'bank', label: input.label, bank_name: input.bankName ?? null, account_last4: last4, currency, status: 'active', created_at: clock.now() });
      return { method_id: id };
    },

    async listMethods(db, ownerId, query) {
      const limit = pageLimit(query.limit);
      const symbols = await cash(db);
      const rows = await repo.listWithdrawalMethods(db, ownerId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      return toPage(rows, limit, (m) => ({ ...service.publicMethod(m), asset_symbols: symbols }), encodeKeyset);
    },

    publicMethod(m) {
      return { id: m.id, kind: 'bank_account', label: m.label, bank_name: m.bank_name, account_last4: m.account_last4, currency: m.currency, asset_symbols: cashSymbols ?? ['USDC', 'EURC'], status: m.status, created_at: m.created_at.toISOString() };
    },

    async settle(trx, op) {
      if (op.to_address && (await ledger.isFailingAddress(trx, op.to_address))) return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${op.to_address}` };
      const wallet = op.to_address ? await ledger.walletByAddress(trx, op.to_address) : undefined;
      for (const h of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, h.id, wallet ? { kind: 'available', walletId: wallet.id } : { kind: 'external', name: 'withdrawals' }, 'withdrawal');
      return { ok: true };
    },
  };
  return service;
}
