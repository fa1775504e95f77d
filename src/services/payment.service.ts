// Payments, one-off (claimable) payments, recipients, recurring payments and recipient resolution.
import type { Db, Knex } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import { findHeldByOperation, type AssetRow } from '../db/repositories/ledger.repository.js';
import type { OperationRow } from '../db/repositories/operation.repository.js';
import * as repo from '../db/repositories/recipient.repository.js';
import type { OneOffPaymentRow, RecipientRow, RecurringPaymentRow } from '../db/repositories/recipient.repository.js';
import type { Clock } from '../lib/clock.js';
import { ApiError, type ErrorCode } from '../lib/errors.js';
import { isRefusal } from '../lib/refusal.js';
import { isUuid, newId } from '../lib/ids.js';
import { formatAmount, mulDiv, parseAmount } from '../lib/money.js';
import { isEvmAddress } from '../lib/wallet-keys.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';
import { USD_DECIMALS, type Account, type AmountFields, type LedgerService } from './ledger.service.js';
import { withWriteTransaction, type OperationService, type OwnerRef, type SettleOutcome, type WriteResponse } from './operation.service.js';
import type { PolicyService } from './policy.service.js';

export type Route = 'recurring_payment' | 'one_off_payment' | 'trusted_destination' | 'direct';

export interface Target {
  route: Route;
  kind: 'recipient' | 'trusted_destination' | 'address';
  address: string;
  name: string | null;
  recipientId: string | null;
  destinationId: string | null;
  recurringPaymentId: string | null;
}

const ROUTE_ORDER: Route[] = ['recurring_payment', 'trusted_destination', 'one_off_payment', 'direct'];
const usd = (v: bigint) => formatAmount(v, USD_DECIMALS);

/** Exactly one of `amount` / `amount_usd` (contract §1), as base units of `asset` plus its USD value. */
export async function resolveMoney(db: Db, ledger: LedgerService, asset: AssetRow, body: AmountFields): Promise<{ amount: bigint; usdE8: bigint }> {
  const amount = (await ledger.resolveAmount(db, asset, body)) as bigint;
  // A USD amount is its own USD value; an asset amount is valued at the feed, rounded up as it counts toward caps.
  const usdE8 = body.amount_usd != null ? parseAmount(body.amount_usd, USD_DECIMALS) : await ledger.usdValue(db, asset, amount, 'up');
  return { amount, usdE8 };
}

export function checkNote(note: unknown): string | null {
  if (note === undefined || note === null) return null;
  if (typeof note !== 'string' || note.length > 500) throw new ApiError('validation_failed', 'note must be a string of at most 500 characters', { field: 'note' });
  return note;
}

const short = (address: string) => `${address.slice(0, 6)}…${address.slice(-4)}`;

export interface PaymentService {
  createPayment(db: Db, who: OwnerRef, body: PaymentBody, idempotencyKey: string | null): Promise<WriteResponse>;
  createOneOffPayment(db: Db, who: OwnerRef, body: OneOffBody, idempotencyKey: string | null): Promise<WriteResponse>;
  /** The recipient side (agentctl one-off claim): captures the hold to the recipient after the unlock delay. */
  claimOneOff(db: Db, id: string): Promise<OneOffPaymentRow>;
  /** The owner's cancel (agentctl one-off cancel): releases the hold. */
  cancelOneOff(db: Db, id: string): Promise<OneOffPaymentRow>;
  /** Releases the holds of pending one-off payments past their expiry; returns how many expired. */
  expireOneOffs(db: Knex, limit?: number): Promise<number>;

  addRecipient(db: Db, agentId: string, input: { kind: 'recurring' | 'one_off'; name: string; address: string; asset?: string | null }): Promise<{ recipient_id: string }>;
  listRecipients(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicRecipient>>;
  getRecipient(db: Db, agentId: string, id: string): Promise<PublicRecipient>;
  resolve(db: Db, who: OwnerRef, body: { to: string; asset?: string; action?: string }): Promise<Record<string, unknown>>;
  /** Every route `to` can take, best first (prefer=auto takes the first). */
  targets(db: Db, agentId: string, to: string): Promise<Target[]>;

  addRecurring(db: Db, agentId: string, input: { recipientId: string; asset: string; amount: string; interval: string }): Promise<{ recurring_payment_id: string }>;
  listRecurring(db: Db, agentId: string, query: { cursor?: string; limit?: unknown }): Promise<ListPage<Record<string, unknown>>>;
  getRecurring(db: Db, agentId: string, id: string): Promise<Record<string, unknown>>;

  settlePayment(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
  settleOneOffCreate(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
}

export interface PaymentBody {
  to: string;
  asset: string;
  deliver_as?: string;
  note?: string;
  slippage_percent?: number;
  prefer?: 'auto' | Route;
  amount?: string;
  amount_usd?: string;
}

export interface OneOffBody {
  to: string;
  asset: string;
  note?: string;
  unlock_delay_seconds?: number;
  expires_in_seconds?: number;
  amount?: string;
  amount_usd?: string;
}

export interface PublicRecipient {
  id: string;
  name: string;
  address: string;
  chain: string;
  trusted_destination_id: string | null;
  recurring_payment_id: string | null;
  created_at: string;
  updated_at: string;
}

export function createPaymentService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService }): PaymentService {
  const { clock, ledger, operations, policy } = deps;

  async function publicRecipient(db: Db, r: RecipientRow): Promise<PublicRecipient> {
    const [dest] = await repo.findConfirmedDestinationsByAddress(db, r.agent_id, r.address);
    const recurring = await repo.findActiveRecurringByRecipient(db, r.agent_id, r.id);
    return { id: r.id, name: r.name, address: r.address, chain: r.chain, trusted_destination_id: dest?.id ?? null, recurring_payment_id: recurring?.id ?? null, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() };
  }

  async function publicRecurring(db: Db, r: RecurringPaymentRow): Promise<Record<string, unknown>> {
    const recipient = await repo.findRecipient(db, r.agent_id, r.recipient_id);
    const asset = await ledger.requireAsset(db, r.asset_symbol);
    const amountUsd = await ledger.usdValue(db, asset, BigInt(r.amount)).then(usd, () => null);
    return {
      id: r.id,
      name: recipient?.name ?? '',
      recipient_id: r.recipient_id,
      to_address: recipient?.address,
      asset_symbol: r.asset_symbol,
      amount: formatAmount(BigInt(r.amount), asset.decimals),
      amount_usd: amountUsd,
      interval: r.interval,
      status: r.status,
      next_run_at: r.next_run_at ? r.next_run_at.toISOString() : null,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    };
  }

  async function recipientTarget(db: Db, r: RecipientRow): Promise<Target> {
    const recurring = r.kind === 'recurring' ? await repo.findActiveRecurringByRecipient(db, r.agent_id, r.id) : undefined;
    return { route: r.kind === 'recurring' ? 'recurring_payment' : 'one_off_payment', kind: 'recipient', address: r.address, name: r.name, recipientId: r.id, destinationId: null, recurringPaymentId: recurring?.id ?? null };
  }

  function pick(targets: Target[], prefer: string | undefined): Target {
    const want = prefer ?? 'auto';
    const ordered = [...targets].sort((a, b) => ROUTE_ORDER.indexOf(a.route) - ROUTE_ORDER.indexOf(b.route));
    const found = want === 'auto' ? ordered[0] : ordered.find((t) => t.route === want || (want === 'one_off_payment' && t.route === 'direct'));
    if (!found) throw new ApiError('validation_failed', `\`to\` has no ${want} route`, { field: 'prefer', available: [...new Set(ordered.map((t) => t.route))] });
    return found;
  }

  async function paymentToAccount(trx: Db, address: string): Promise<{ account: Account; wallet: { id: string; agent_id: string } | undefined }> {
    const wallet = await ledger.walletByAddress(trx, address);
    return { account: wallet ? { kind: 'available', walletId: wallet.id } : { kind: 'external', name: 'payments' }, wallet };
  }

  async function recordReceived(trx: Db, wallet: { id: string; agent_id: string } | undefined, operationId: string, asset: AssetRow, amount: bigint, from: string | null) {
    if (!wallet) return;
    await operations.recordActivity(trx, {
      principal: { agentId: wallet.agent_id, walletId: wallet.id },
      type: 'payment.received',
      status: 'executed',
      operationId,
      direction: 'in',
      asset: asset.symbol,
      amount,
      amountUsdE8: await ledger.usdValue(trx, asset, amount).catch(() => null),
      counterparty: from,
      description: `Received ${formatAmount(amount, asset.decimals)} ${asset.symbol}`,
    });
  }

  async function lockOneOff(trx: Db, id: string): Promise<OneOffPaymentRow> {
    if (!isUuid(id)) throw new ApiError('not_found', 'one-off payment not found');
    const row = await repo.lockPendingOneOff(trx, id);
    if (!row) throw new ApiError('not_found', 'one-off payment not found');
    if (row.status !== 'pending') throw new ApiError('invalid_state_transition', `the one-off payment is ${row.status}`, { status: row.status });
    return row;
  }

  async function oneOffActivity(trx: Db, row: OneOffPaymentRow, type: string, direction: 'in' | 'out' | 'none', description: string) {
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

  const service: PaymentService = {
    async targets(db, agentId, to) {
      const out: Target[] = [];
      if (isUuid(to)) {
        const recipient = await repo.findRecipient(db, agentId, to);
        if (recipient) out.push(await recipientTarget(db, recipient));
        const dest = await repo.findTrustedDestination(db, agentId, to);
        if (dest) {
          if (dest.status !== 'confirmed') throw new ApiError('invalid_state_transition', `trusted destination is ${dest.status}, not confirmed`, { field: 'to', status: dest.status });
          out.push({ route: 'trusted_destination', kind: 'trusted_destination', address: dest.address, name: dest.label, recipientId: null, destinationId: dest.id, recurringPaymentId: null });
        }
        if (out.length === 0) throw new ApiError('not_found', 'no recipient or trusted destination has this id', { field: 'to' });
        return out;
      }
      if (isEvmAddress(to)) {
        for (const r of await repo.findRecipientsByAddress(db, agentId, to)) out.push(await recipientTarget(db, r));
        for (const d of await repo.findConfirmedDestinationsByAddress(db, agentId, to)) out.push({ route: 'trusted_destination', kind: 'trusted_destination', address: d.address, name: d.label, recipientId: null, destinationId: d.id, recurringPaymentId: null });
        out.push({ route: 'direct', kind: 'address', address: to, name: null, recipientId: null, destinationId: null, recurringPaymentId: null });
        return out;
      }
      const byName = await repo.findRecipientsByName(db, agentId, to);
      if (byName.length === 0) throw new ApiError('not_found', 'no recipient has this id, address or name', { field: 'to' });
      for (const r of byName) out.push(await recipientTarget(db, r));
      return out;
    },

    async createPayment(db, who, body, idempotencyKey) {
      const note = checkNote(body.note);
      const asset = await ledger.requireAsset(db, body.asset);
      const deliverAs = body.deliver_as ? await ledger.requireAsset(db, body.deliver_as, 'deliver_as') : asset;
      const target = pick(await service.targets(db, who.agentId, body.to), body.prefer);
      const { amount, usdE8 } = await resolveMoney(db, ledger, asset, body);
      const converting = deliverAs.symbol !== asset.symbol;
      const slippagePercent = body.slippage_percent ?? 1;
      if (!(slippagePercent > 0 && slippagePercent <= 50)) throw new ApiError('validation_failed', 'slippage_percent must be in (0, 50]', { field: 'slippage_percent' });
      const slippageBps = Math.round(slippagePercent * 100);
      const details: Record<string, unknown> = { route: target.route, recipient_id: target.recipientId, trusted_destination_id: target.destinationId, recurring_payment_id: target.recurringPaymentId, note };
      if (converting) {
        const quoted = await ledger.convert(db, asset, deliverAs, amount);
        if (quoted <= 0n) throw new ApiError('validation_failed', 'the amount converts to nothing', { field: 'amount' });
        Object.assign(details, { deliver_as: deliverAs.symbol, quoted_deliver_amount: quoted.toString(), min_deliver_amount: mulDiv(quoted, BigInt(10_000 - slippageBps), 10_000n).toString(), slippage_bps: slippageBps });
      }
      const who2 = target.name ? `${target.name} (${short(target.address)})` : short(target.address);
      const created = await operations.create(db, {
        principal: who,
        type: 'payment',
        asset: asset.symbol,
        amount,
        amountUsdE8: usdE8,
        toAddress: target.address,
        policy: { recipient: { ids: [target.recipientId, target.destinationId].filter((x): x is string => x !== null), address: target.address }, slippageBps: converting ? slippageBps : null },
        details,
        humanMessage: `Paying ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${who2}${converting ? ` delivered as ${deliverAs.symbol}` : ''}`,
        idempotencyKey,
      });
      // Until the ledger branch lands: its callers still expect the refusal thrown (and committed).
      if (isRefusal(created)) throw new ApiError(created.refusal.code, created.refusal.message, created.refusal.details, { commit: true });
      const { operation } = created;
      return operations.writeResponse(operation);
    },

    async createOneOffPayment(db, who, body, idempotencyKey) {
      const note = checkNote(body.note);
      const asset = await ledger.requireAsset(db, body.asset);
      const targets = await service.targets(db, who.agentId, body.to);
      const target = targets.find((t) => t.route === 'one_off_payment') ?? targets.find((t) => t.route === 'direct') ?? targets[0]!;
      const { amount, usdE8 } = await resolveMoney(db, ledger, asset, body);
      const unlock = body.unlock_delay_seconds ?? 0;
      const expires = body.expires_in_seconds ?? 604_800;
      if (!Number.isInteger(unlock) || unlock < 0 || unlock > 2_592_000) throw new ApiError('validation_failed', 'unlock_delay_seconds must be an integer in [0, 2592000]', { field: 'unlock_delay_seconds' });
      if (!Number.isInteger(expires) || expires < 60 || expires > 2_592_000) throw new ApiError('validation_failed', 'expires_in_seconds must be an integer in [60, 2592000]', { field: 'expires_in_seconds' });
      if (expires <= unlock) throw new ApiError('validation_failed', 'expires_in_seconds must exceed unlock_delay_seconds', { field: 'expires_in_seconds' });
      return withWriteTransaction(db, async (trx) => {
        const now = clock.now();
        const oneOffId = newId();
        const operationId = newId();
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
          details: { one_off_payment_id: oneOffId, recipient_id: target.recipientId, note, unlock_at: unlockAt.toISOString(), expires_at: expiresAt.toISOString() },
          humanMessage: `One-off payment of ${formatAmount(amount, asset.decimals)} ${asset.symbol} to ${target.name ?? short(target.address)}, claimable from ${unlockAt.toISOString()} until ${expiresAt.toISOString()}`,
          idempotencyKey,
          acceptedEvent: 'one_off_payment.created',
          eventData: { one_off_payment: { id: oneOffId, to_address: target.address, unlock_at: unlockAt.toISOString(), expires_at: expiresAt.toISOString() } },
        });
        // Until the ledger branch lands: its callers still expect the refusal thrown (and committed).
        if (isRefusal(created)) throw new ApiError(created.refusal.code, created.refusal.message, created.refusal.details, { commit: true });
        const { operation, holdIds } = created;
        await repo.insertOneOffPayment(trx, { id: oneOffId, operation_id: operationId, agent_id: who.agentId, wallet_id: who.walletId, hold_id: holdIds[0]!, to_address: target.address, asset_symbol: asset.symbol, amount, status: 'pending', unlock_at: unlockAt, expires_at: expiresAt, resolved_at: null, created_at: now });
        return operations.writeResponse(operation);
      });
    },

    async claimOneOff(db, id) {
      return withTransaction(db, async (trx) => {
        const row = await lockOneOff(trx, id);
        const now = clock.now();
        if (now < row.unlock_at) throw new ApiError('time_delay_not_reached', `the payment unlocks at ${row.unlock_at.toISOString()}`, { unlocks_at: row.unlock_at.toISOString() });
        if (now >= row.expires_at) throw new ApiError('invalid_state_transition', 'the one-off payment has expired');
        const { account, wallet } = await paymentToAccount(trx, row.to_address);
        if (!(await ledger.capture(trx, row.hold_id, account, 'one_off_claim'))) throw new ApiError('invalid_state_transition', 'the one-off payment hold is no longer held');
        await repo.resolveOneOff(trx, row.id, 'claimed', now);
        const asset = await ledger.requireAsset(trx, row.asset_symbol);
        await oneOffActivity(trx, row, 'one_off_payment.claim', 'none', `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} claimed by ${short(row.to_address)}`);
        await recordReceived(trx, wallet, row.operation_id, asset, BigInt(row.amount), null);
        return { ...row, status: 'claimed', resolved_at: now };
      });
    },

    async cancelOneOff(db, id) {
      return withTransaction(db, async (trx) => {
        const row = await lockOneOff(trx, id);
        const now = clock.now();
        await ledger.release(trx, row.hold_id);
        await repo.resolveOneOff(trx, row.id, 'cancelled', now);
        const asset = await ledger.requireAsset(trx, row.asset_symbol);
        await oneOffActivity(trx, row, 'one_off_payment.cancel', 'in', `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} cancelled; funds released`);
        return { ...row, status: 'cancelled', resolved_at: now };
      });
    },

    async expireOneOffs(db, limit = 50) {
      return db.transaction(async (trx) => {
        const now = clock.now();
        const rows = await repo.claimExpiredOneOffs(trx, now, limit);
        for (const row of rows) {
          await ledger.release(trx, row.hold_id);
          await repo.resolveOneOff(trx, row.id, 'expired', now);
          const asset = await ledger.requireAsset(trx, row.asset_symbol);
          await oneOffActivity(trx, row, 'one_off_payment.expire', 'in', `One-off payment of ${formatAmount(BigInt(row.amount), asset.decimals)} ${row.asset_symbol} expired unclaimed; funds released`);
        }
        return rows.length;
      });
    },

    async addRecipient(db, agentId, input) {
      if (!['recurring', 'one_off'].includes(input.kind)) throw new ApiError('validation_failed', 'kind must be recurring or one_off');
      if (!isEvmAddress(input.address)) throw new ApiError('validation_failed', 'address must be a 0x EVM address');
      if (!input.name.trim()) throw new ApiError('validation_failed', 'name is required');
      if (input.asset) await ledger.requireAsset(db, input.asset);
      const now = clock.now();
      const id = newId();
      await repo.insertRecipient(db, { id, agent_id: agentId, kind: input.kind, name: input.name, address: input.address, chain: 'base', asset_symbol: input.asset ?? null, created_at: now, updated_at: now });
      return { recipient_id: id };
    },

    async listRecipients(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listRecipients(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      return { ...page, items: await Promise.all(page.items.map((r) => publicRecipient(db, r))) };
    },

    async getRecipient(db, agentId, id) {
      const r = isUuid(id) ? await repo.findRecipient(db, agentId, id) : undefined;
      if (!r) throw new ApiError('not_found', 'recipient not found');
      return publicRecipient(db, r);
    },

    async resolve(db, who, body) {
      const targets = await service.targets(db, who.agentId, body.to);
      const target = pick(targets, 'auto');
      const action = body.action ?? 'payment';
      const type = action === 'one_off_payment' ? 'one_off_payment.create' : action === 'withdrawal' ? 'withdrawal.crypto' : 'payment';
      let reason: ErrorCode | null = null;
      if (action === 'withdrawal' && target.route !== 'trusted_destination') reason = 'recipient_not_allowed';
      if (!reason) {
        // Evaluated in a transaction that is rolled back: resolution never records anything.
        reason = await (db as Knex)
          .transaction(async (trx) => {
            const decision = await policy.evaluate(trx, who.agentId, { type, asset: body.asset ?? null, recipient: { ids: [target.recipientId, target.destinationId].filter((x): x is string => x !== null), address: target.address } });
            throw new ResolveDone(decision.allowed ? null : decision.code);
          })
          .catch((err: unknown) => {
            if (err instanceof ResolveDone) return err.code;
            throw err;
          });
      }
      return {
        to: body.to,
        kind: target.kind,
        address: target.address,
        chain: 'base',
        name: target.name,
        recipient_id: target.recipientId,
        trusted_destination_id: target.destinationId,
        recurring_payment_id: target.recurringPaymentId,
        route: target.route,
        allowed: reason === null,
        reason,
      };
    },

    async addRecurring(db, agentId, input) {
      const recipient = isUuid(input.recipientId) ? await repo.findRecipient(db, agentId, input.recipientId) : undefined;
      if (!recipient) throw new ApiError('not_found', 'recipient not found');
      if (!['day', 'week', 'month'].includes(input.interval)) throw new ApiError('validation_failed', 'interval must be day, week or month');
      const asset = await ledger.requireAsset(db, input.asset);
      const amount = ledger.parseAssetAmount(asset, input.amount);
      const now = clock.now();
      const id = newId();
      await repo.insertRecurringPayment(db, { id, agent_id: agentId, recipient_id: recipient.id, asset_symbol: asset.symbol, amount, interval: input.interval as 'day', status: 'active', next_run_at: null, created_at: now, updated_at: now });
      return { recurring_payment_id: id };
    },

    async listRecurring(db, agentId, query) {
      const limit = pageLimit(query.limit);
      const rows = await repo.listRecurringPayments(db, agentId, { before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      return { ...page, items: await Promise.all(page.items.map((r) => publicRecurring(db, r))) };
    },

    async getRecurring(db, agentId, id) {
      const r = isUuid(id) ? await repo.findRecurringPayment(db, agentId, id) : undefined;
      if (!r) throw new ApiError('not_found', 'recurring payment not found');
      return publicRecurring(db, r);
    },

    async settlePayment(trx, op) {
      const address = op.to_address!;
      if (await ledger.isFailingAddress(trx, address)) return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${address}` };
      const asset = await ledger.requireAsset(trx, op.asset_symbol!);
      const amount = BigInt(op.amount!);
      const details = op.details as { deliver_as?: string; min_deliver_amount?: string };
      const { account, wallet } = await paymentToAccount(trx, address);
      const holds = await findHeldByOperation(trx, op.id);
      if (details.deliver_as && details.deliver_as !== asset.symbol) {
        const target = await ledger.requireAsset(trx, details.deliver_as);
        const out = await ledger.convert(trx, asset, target, amount);
        if (out < BigInt(details.min_deliver_amount ?? '0')) {
          return { ok: false, code: 'slippage_exceeded', message: `the conversion would deliver ${formatAmount(out, target.decimals)} ${target.symbol}, below the minimum ${formatAmount(BigInt(details.min_deliver_amount!), target.decimals)}` };
        }
        for (const h of holds) await ledger.capture(trx, h.id, { kind: 'external', name: 'conversion' }, 'payment');
        await ledger.post(trx, { operationId: op.id, entryType: 'payment_conversion', postings: [{ account: { kind: 'external', name: 'conversion' }, asset: target.symbol, amount: -out }, { account, asset: target.symbol, amount: out }] });
        await recordReceived(trx, wallet, op.id, target, out, null);
        return { ok: true, details: { delivered_asset: target.symbol, delivered_amount: out.toString() } };
      }
      for (const h of holds) await ledger.capture(trx, h.id, account, 'payment');
      await recordReceived(trx, wallet, op.id, asset, amount, null);
      return { ok: true, details: { delivered_asset: asset.symbol, delivered_amount: amount.toString() } };
    },

    async settleOneOffCreate() {
      // The claimable payout is escrowed: its hold stays until claim, cancel or expiry.
      return { ok: true };
    },
  };
  return service;
}

class ResolveDone extends Error {
  constructor(readonly code: ErrorCode | null) {
    super('resolved');
  }
}
