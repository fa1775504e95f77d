// Operations (contract §8): creation with policy and hold in the caller's transaction, guarded status transitions,
// settlement by registered settlers, and the activity row plus outbox event of every terminal transition.
import { ChainUnavailableError, type Chain, type OnchainView, type TrackResult } from '../chain/port.js';
import { createSimulatedChain, txHashOf } from '../chain/simulated.js';
import type { Db, Knex } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { appendEvent } from '../db/repositories/event.repository.js';
import { findHeldByOperation } from '../db/repositories/ledger.repository.js';
import * as repo from '../db/repositories/operation.repository.js';
import type { OperationRow, OperationStatus } from '../db/repositories/operation.repository.js';
import type { Clock } from '../lib/clock.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { refuse, type Refusal } from '../lib/refusal.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/logger.js';
import { formatAmount } from '../lib/money.js';
import { decodeKeyset, encodeKeyset, pageLimit, toPage, type ListPage } from './cursor.js';
import { USD_DECIMALS, type LedgerService } from './ledger.service.js';
import type { PolicyRequest, PolicyService } from './policy.service.js';

export type { OperationRow, OperationStatus };

/** Event types per operation type (spec 6.3, contract §8). Families without a failure event emit none on failure. */
export const OPERATION_EVENTS: Record<string, { executed?: string; failed?: string }> = {
  payment: { executed: 'payment.executed', failed: 'payment.execution_failed' },
  'withdrawal.bank': { executed: 'withdrawal.settled', failed: 'withdrawal.execution_failed' },
  'withdrawal.crypto': { executed: 'withdrawal.settled', failed: 'withdrawal.execution_failed' },
  conversion: { executed: 'conversion.executed', failed: 'conversion.execution_failed' },
  'earn.deposit': { executed: 'earn.deposit.executed' },
  'earn.withdraw': { executed: 'earn.withdraw.executed' },
  'earn.move': { executed: 'earn.move.executed' },
  'earn.rewards_claim': { executed: 'rewards.claimed' },
  'debt.borrow': { executed: 'debt.borrowed' },
  'debt.repay': { executed: 'debt.repaid' },
  'debt.deleverage': { executed: 'debt.deleveraged' },
  'collateral.add': { executed: 'collateral.added' },
  'collateral.remove': { executed: 'collateral.removed' },
  'trusted_destination.confirm': { executed: 'trusted_destination.confirmed' },
  'trusted_destination.cancel': { executed: 'trusted_destination.cancelled' },
  'trusted_destination.remove': { executed: 'trusted_destination.removed' },
};

export interface OwnerRef {
  agentId: string;
  walletId: string;
}

export interface CreateOperationInput {
  principal: OwnerRef;
  type: string;
  /** Defaults to `{ type: <family>, id: <operation id> }`. */
  resource?: { type: string; id: string };
  /** Pre-chosen operation id (so a resource row can reference it). */
  id?: string;
  asset?: string | null;
  amount?: bigint | null;
  /** USD value (8 decimals); computed from the price feed when an amount is given and this is not. */
  amountUsdE8?: bigint | null;
  /** Counts toward policy caps; default: when a USD value is known. */
  countsTowardLimits?: boolean;
  /** Extra policy facts (recipient, protocol, slippage, LTV). */
  policy?: Omit<PolicyRequest, 'type' | 'asset' | 'usdE8'>;
  /** Holds placed at acceptance; default: the amount in the asset when the operation settles later. */
  holds?: { asset: string; amount: bigint }[];
  toAddress?: string | null;
  details?: Record<string, unknown>;
  humanMessage: string;
  idempotencyKey?: string | null;
  /**
   * `worker` (default): the settlement loop runs the type's settler after SETTLEMENT_DELAY_MS;
   * `immediate`: executed in this transaction (no hold), or execution_failed when `toAddress` is a
   * failing address of the simulated chain (check `operation.status` before applying effects);
   * `manual`: stays accepted until `finish` is called.
   */
  settlement?: 'worker' | 'immediate' | 'manual';
  /** An event written at acceptance (one_off_payment.created). */
  acceptedEvent?: string;
  /** Merged into the data of the events this creation writes (beside `operation`). */
  eventData?: Record<string, unknown>;
  /** The owner acting out of band (agentctl): no agent policy applies. */
  skipPolicy?: boolean;
}

export type SettleOutcome = { ok: true; details?: Record<string, unknown> } | { ok: false; code: string; message: string };

/** A settler moves the money of one submitted operation; returning `ok: false` rolls its writes back and releases the holds. */
export type Settler = (trx: Knex.Transaction, op: OperationRow) => Promise<SettleOutcome>;
/** The ledger side of an operation confirmed on chain (`details`: what the adapter read from the receipt). */
export type ChainSettler = (trx: Knex.Transaction, op: OperationRow, details: Record<string, unknown>) => Promise<SettleOutcome>;

export interface PublicOperation {
  id: string;
  type: string;
  status: OperationStatus;
  resource: { type: string; id: string };
  asset_symbol: string | null;
  amount: string | null;
  amount_usd: string | null;
  fee_usd: string;
  human_message: string;
  idempotency_key_hash: string | null;
  error: { code: string; message: string } | null;
  created_at: string;
  submitted_at: string | null;
  executed_at: string | null;
  failed_at: string | null;
  onchain?: OnchainView;
}

export interface WriteResponse {
  ok: true;
  operation_id: string;
  status: OperationStatus;
  resource: { type: string; id: string };
  fee_usd: string;
  human_message: string;
}

export interface OperationService {
  /** The recorded operation and its holds, or the policy's refusal (its policy_rejected operation recorded and committed). */
  create(db: Db, input: CreateOperationInput): Promise<{ operation: OperationRow; holdIds: string[] } | Refusal>;
  /** Terminal transition from `from` (guarded in SQL): captures nothing itself; on failure releases the operation's holds. */
  finish(db: Db, operationId: string, from: OperationStatus, outcome: SettleOutcome): Promise<OperationRow | undefined>;
  registerSettler(type: string, settler: Settler): void;
  /** How a confirmed on-chain settlement of `type` moves the ledger, when not the default (capture the amount's hold). */
  registerChainSettler(type: string, settler: ChainSettler): void;
  /** Runs in the transaction that finalises an operation of `type` as execution_failed (after its holds are released). */
  registerFailureHook(type: string, hook: (trx: Knex.Transaction, op: OperationRow) => Promise<void>): void;
  settlerTypes(): string[];
  /** One settlement pass: accepted -> submitted, then due submitted -> executed | execution_failed. Returns rows moved. */
  settleDue(db: Knex, opts?: { limit?: number }): Promise<number>;

  get(db: Db, agentId: string, id: string, opts?: { types?: string[]; include?: string[] }): Promise<PublicOperation>;
  list(db: Db, agentId: string, query: { cursor?: string; limit?: unknown; status?: string; type?: string; since?: string; types?: string[] }): Promise<ListPage<PublicOperation>>;
  toPublic(db: Db, op: OperationRow, opts?: { onchain?: boolean }): Promise<PublicOperation>;
  writeResponse(op: OperationRow): WriteResponse;
  /** Writes an activity row (the ledger area's and other areas' financial events). */
  recordActivity(db: Db, input: { principal: OwnerRef; type: string; status: string; operationId: string | null; direction: 'in' | 'out' | 'none'; asset?: string | null; amount?: bigint | null; amountUsdE8?: bigint | null; counterparty?: string | null; description: string; txHash?: string | null }): Promise<void>;
}

const usd = (v: string | bigint | null): string | null => (v === null ? null : formatAmount(BigInt(v), USD_DECIMALS));
const iso = (d: Date | null) => (d ? d.toISOString() : null);

function family(type: string): string {
  if (type.startsWith('withdrawal.')) return 'withdrawal';
  if (type === 'one_off_payment.create') return 'one_off_payment';
  if (type.startsWith('trusted_destination.')) return 'trusted_destination';
  return type.replace(/\./g, '_');
}

export function createOperationService(deps: { clock: Clock; ledger: LedgerService; policy: PolicyService; settlementDelayMs: number; log?: Logger; chain?: Chain; chainRetryMs?: number }): OperationService {
  const { clock, ledger, policy } = deps;
  const settlers = new Map<string, Settler>();
  const chainSettlers = new Map<string, ChainSettler>();
  const failureHooks = new Map<string, (trx: Knex.Transaction, op: OperationRow) => Promise<void>>();
  // Operations whose money does not move on the configured chain (and every operation without CHAIN_RPC_URL)
  // settle on the simulated chain through their registered settler.
  const simulated = createSimulatedChain({ clock, settlementDelayMs: deps.settlementDelayMs });
  const chain = deps.chain ?? simulated;
  const retryMs = deps.chainRetryMs ?? 1000;
  let lastPumpWarning = 0;

  /** The adapter that settles `op`: the configured chain when its money moves there, else the simulated one. */
  async function adapterFor(db: Db, op: Pick<OperationRow, 'type' | 'details' | 'asset_symbol'>): Promise<Chain> {
    if (chain === simulated || !op.asset_symbol) return simulated;
    const asset = (await ledger.assets(db)).get(op.asset_symbol) ?? null;
    return chain.settlesOnChain(op, asset) ? chain : simulated;
  }

  /** On-chain confirmation: the amount's hold leaves the wallet (the recipient is credited by the chain itself); other holds (the gas reserve) are released. */
  async function captureOnChain(trx: Knex.Transaction, op: OperationRow, tracked: Extract<TrackResult, { state: 'confirmed' }>): Promise<SettleOutcome> {
    const custom = chainSettlers.get(op.type);
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

  async function decimalsOf(db: Db, symbol: string | null): Promise<number | null> {
    if (!symbol) return null;
    return (await ledger.assets(db)).get(symbol)?.decimals ?? null;
  }

  async function terminalEffects(trx: Db, op: OperationRow, eventType: string | undefined, extra: Record<string, unknown> = {}) {
    await service.recordActivity(trx, {
      principal: { agentId: op.agent_id, walletId: op.wallet_id },
      type: op.type,
      status: op.status,
      operationId: op.id,
      direction: op.amount !== null && op.counts_toward_limits ? 'out' : 'none',
      asset: op.asset_symbol,
      amount: op.amount === null ? null : BigInt(op.amount),
      amountUsdE8: op.amount_usd_e8 === null ? null : BigInt(op.amount_usd_e8),
      counterparty: op.to_address,
      description: op.status === 'executed' ? op.human_message : `${op.human_message} (${op.status}${op.error_message ? `: ${op.error_message}` : ''})`,
    });
    if (eventType) {
      await appendEvent(trx, {
        type: eventType,
        agentId: op.agent_id,
        walletId: op.wallet_id,
        operationId: op.id,
        resource: { type: op.resource_type, id: op.resource_id },
        data: { ...extra, operation: await service.toPublic(trx, op) },
        createdAt: clock.now(),
      });
    }
  }

  const service: OperationService = {
    async create(db, input) {
      return withWriteTransaction(db, async (trx) => {
        const now = clock.now();
        const id = input.id ?? newId();
        const settlement = input.settlement ?? 'worker';
        const asset = input.asset ? await ledger.requireAsset(trx, input.asset) : null;
        const amount = input.amount ?? null;
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
        };

        const decision = input.skipPolicy ? ({ allowed: true } as const) : await policy.evaluate(trx, input.principal.agentId, { ...input.policy, type: input.type, asset: asset?.symbol ?? null, usdE8: counts ? usdE8 : null });
        if (!decision.allowed) {
          const op = await repo.insertOperation(trx, { ...base, status: 'policy_rejected', counts_toward_limits: false, error_code: decision.code, error_message: decision.message, settle_after: null, human_message: `${input.humanMessage} (rejected by policy)` });
          await terminalEffects(trx, op, 'operation.policy_rejected');
          return refuse(decision.code, decision.message, { ...decision.details, operation_id: op.id });
        }

        const holdIds: string[] = [];
        const holds = input.holds ?? (settlement !== 'immediate' && asset && amount !== null ? [{ asset: asset.symbol, amount }] : []);
        // An ETH transfer on a real chain also holds its gas reserve (the wallet pays the gas).
        if (!input.holds && settlement === 'worker' && asset && amount !== null && chain.settlesOnChain({ type: input.type, details: input.details ?? {} }, asset)) {
          const reserve = chain.gasReserve(asset);
          if (reserve > 0n) holds.push({ asset: asset.symbol, amount: reserve });
        }
        for (const h of holds) holdIds.push((await ledger.hold(trx, { walletId: input.principal.walletId, asset: h.asset, amount: h.amount, operationId: id })).holdId);

        const immediate = settlement === 'immediate';
        // The simulated chain refuses settlements to a failing address (agentctl chain fail-address): an
        // immediate operation that moves money there finalises execution_failed here, and its caller
        // applies no effects. (Trusted-destination actions name an address but move nothing.)
        if (immediate && amount !== null && input.toAddress && (await ledger.isFailingAddress(trx, input.toAddress))) {
          const failed = await repo.insertOperation(trx, {
            ...base,
            status: 'execution_failed',
            error_code: 'settlement_failed',
            error_message: `the simulated chain refused the settlement to ${input.toAddress}`,
            settle_after: null,
            submitted_at: now,
            failed_at: now,
          });
          await terminalEffects(trx, failed, OPERATION_EVENTS[failed.type]?.failed);
          return { operation: failed, holdIds: [] };
        }
        const op = await repo.insertOperation(trx, {
          ...base,
          status: immediate ? 'executed' : 'accepted',
          error_code: null,
          error_message: null,
          settle_after: settlement === 'worker' ? now : null,
          submitted_at: immediate ? now : null,
          executed_at: immediate ? now : null,
          tx_hash: immediate ? txHashOf(id) : null,
        });
        if (input.acceptedEvent) {
          await appendEvent(trx, { type: input.acceptedEvent, agentId: op.agent_id, walletId: op.wallet_id, operationId: op.id, resource: { type: op.resource_type, id: op.resource_id }, data: { ...input.eventData, operation: await service.toPublic(trx, op) }, createdAt: now });
        }
        if (immediate) await terminalEffects(trx, op, OPERATION_EVENTS[op.type]?.executed, input.eventData);
        return { operation: op, holdIds };
      });
    },

    async finish(db, operationId, from, outcome) {
      return withTransaction(db, async (trx) => {
        const now = clock.now();
        let op: OperationRow | undefined;
        if (outcome.ok) {
          op = await repo.transitionOperation(trx, operationId, from, { status: 'executed', executed_at: now, updated_at: now, details: outcome.details });
          if (!op) return undefined;
          await terminalEffects(trx, op, OPERATION_EVENTS[op.type]?.executed);
        } else {
          op = await repo.transitionOperation(trx, operationId, from, { status: 'execution_failed', failed_at: now, updated_at: now, error_code: outcome.code, error_message: outcome.message });
          if (!op) return undefined;
          for (const hold of await ledgerHolds(trx, operationId)) await ledger.release(trx, hold);
          await failureHooks.get(op.type)?.(trx, op);
          await terminalEffects(trx, op, OPERATION_EVENTS[op.type]?.failed);
        }
        return op;
      });
    },

    registerChainSettler(type, settler) {
      chainSettlers.set(type, settler);
    },

    registerFailureHook(type, hook) {
      failureHooks.set(type, hook);
    },

    registerSettler(type, settler) {
      settlers.set(type, settler);
    },

    settlerTypes: () => [...new Set([...settlers.keys(), ...chainSettlers.keys()])],

    async settleDue(db, opts = {}) {
      const limit = opts.limit ?? 50;
      const types = service.settlerTypes();
      let moved = 0;
      // Phase 1: accepted -> submitted. The simulated chain makes up a hash and settles SETTLEMENT_DELAY_MS later;
      // the evm chain signs and records the transfer here (broadcast after commit, by the chain's pump). A chain
      // that cannot be reached leaves the operation accepted (its holds stay) for a later pass. With a real chain,
      // one operation per transaction: a nonce row stays locked until commit, and a batch taking the relayer's and
      // a wallet's rows in claim order could deadlock with another worker taking them in the other order.
      const batch = chain === simulated ? limit : 1;
      let claimed = 0;
      let unreachable = false;
      while (claimed < limit && !unreachable) {
        const { due, submitted } = await db.transaction(async (trx) => {
          const now = clock.now();
          const rows = await repo.claimDueOperations(trx, 'accepted', types, now, batch);
          let n = 0;
          for (const [i, op] of rows.entries()) {
            const adapter = await adapterFor(trx, op);
            let result;
            try {
              result = await trx.transaction((sp) => adapter.submit(sp, op));
            } catch (err) {
              if (!(err instanceof ChainUnavailableError)) deps.log?.error({ err, operation_id: op.id }, 'chain submission failed; retried later');
              else deps.log?.warn({ err: err.message }, 'chain unreachable; accepted operations wait');
              const later = { status: 'accepted' as const, settle_after: new Date(now.getTime() + retryMs), updated_at: now };
              for (const rest of err instanceof ChainUnavailableError ? rows.slice(i) : [op]) await repo.transitionOperation(trx, rest.id, 'accepted', later);
              if (!(err instanceof ChainUnavailableError)) continue;
              unreachable = true;
              break;
            }
            if (!result.ok) await service.finish(trx, op.id, 'accepted', result);
            else await repo.transitionOperation(trx, op.id, 'accepted', { status: 'submitted', submitted_at: now, settle_after: result.recheckAt, tx_hash: result.txHash, updated_at: now });
            n += 1;
          }
          return { due: rows.length, submitted: n };
        });
        moved += submitted;
        claimed += due;
        if (due < batch) break;
      }
      if (chain !== simulated && !unreachable) {
        await chain.pump(db).catch((err: unknown) => {
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
            [claimed] = await repo.claimDueOperations(trx, 'submitted', types, clock.now(), 1, skipped);
            const op = claimed;
            if (!op) return 'none' as const;
            const adapter = await adapterFor(trx, op);
            const tracked = await adapter.track(trx, op);
            if (tracked.state === 'pending') {
              await repo.transitionOperation(trx, op.id, 'submitted', { status: 'submitted', settle_after: new Date(clock.now().getTime() + retryMs), updated_at: clock.now() });
              return 'pending' as const;
            }
            if (tracked.txHash && tracked.txHash !== op.tx_hash) await repo.transitionOperation(trx, op.id, 'submitted', { status: 'submitted', tx_hash: tracked.txHash, updated_at: clock.now() });
            let outcome: SettleOutcome;
            if (tracked.state === 'failed') {
              outcome = { ok: false, code: tracked.code, message: tracked.message };
            } else if (adapter !== simulated) {
              outcome = await captureOnChain(trx, op, tracked);
            } else {
              const settler = settlers.get(op.type)!;
              try {
                outcome = await trx.transaction(async (sp) => {
                  const result = await settler(sp, op);
                  if (!result.ok) throw new SettlementFailed(result);
                  return result;
                });
              } catch (err) {
                if (err instanceof SettlementFailed) outcome = err.outcome;
                else if (err instanceof ApiError) outcome = { ok: false, code: err.code, message: err.message };
                else throw err;
              }
            }
            await service.finish(trx, op.id, 'submitted', outcome);
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

    async get(db, agentId, id, opts = {}) {
      const op = await repo.findOperation(db, agentId, id);
      if (!op || (opts.types && !opts.types.includes(op.type))) throw new ApiError('not_found', 'operation not found');
      return service.toPublic(db, op, { onchain: opts.include?.includes('onchain') ?? false });
    },

    async list(db, agentId, query) {
      const limit = pageLimit(query.limit);
      let since: Date | undefined;
      if (query.since) {
        since = new Date(query.since);
        if (Number.isNaN(since.getTime())) throw new ApiError('validation_failed', 'since must be an ISO 8601 timestamp', { field: 'since' });
      }
      const types = query.type ? (query.types && !query.types.includes(query.type) ? [] : [query.type]) : query.types;
      const rows = types && types.length === 0 ? [] : await repo.listOperations(db, { agentId, types, status: query.status, since, before: decodeKeyset(query.cursor), limit: limit + 1 });
      const page = toPage(rows, limit, (r) => r, encodeKeyset);
      return { ...page, items: await Promise.all(page.items.map((r) => service.toPublic(db, r))) };
    },

    async toPublic(db, op, opts = {}) {
      const decimals = await decimalsOf(db, op.asset_symbol);
      const out: PublicOperation = {
        id: op.id,
        type: op.type,
        status: op.status,
        resource: { type: op.resource_type, id: op.resource_id },
        asset_symbol: op.asset_symbol,
        amount: op.amount === null || decimals === null ? null : formatAmount(BigInt(op.amount), decimals),
        amount_usd: usd(op.amount_usd_e8),
        fee_usd: usd(op.fee_usd_e8) ?? '0',
        human_message: op.human_message,
        idempotency_key_hash: op.idempotency_key_hash,
        error: op.error_code ? { code: op.error_code, message: op.error_message ?? '' } : null,
        created_at: op.created_at.toISOString(),
        submitted_at: iso(op.submitted_at),
        executed_at: iso(op.executed_at),
        failed_at: iso(op.failed_at),
      };
      if (opts.onchain) {
        const wallet = await findWalletByAgent(db, op.agent_id);
        out.onchain = await (await adapterFor(db, op)).onchain(db, op, wallet?.address ?? null);
      }
      return out;
    },

    writeResponse(op) {
      return { ok: true, operation_id: op.id, status: op.status, resource: { type: op.resource_type, id: op.resource_id }, fee_usd: usd(op.fee_usd_e8) ?? '0', human_message: op.human_message };
    },

    async recordActivity(db, input) {
      await repo.insertActivity(db, {
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
  };

  async function ledgerHolds(trx: Db, operationId: string): Promise<string[]> {
    return (await findHeldByOperation(trx, operationId)).map((h) => h.id);
  }

  return service;
}

/**
 * `withTransaction` for writes whose refusals may need committing: an ApiError with `commit: true` commits the
 * transaction this call opened (the rejected operation and its event stay) and is rethrown afterwards. Inside a
 * caller's transaction the error simply propagates for the caller (the idempotency layer) to commit.
 */
export async function withWriteTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if ((db as Knex.Transaction).isTransaction) return fn(db as Knex.Transaction);
  let deferred: ApiError | null = null;
  const result = await (db as Knex).transaction(async (trx) => {
    try {
      return await fn(trx);
    } catch (err) {
      if (err instanceof ApiError && err.commit) {
        deferred = err;
        return undefined;
      }
      throw err;
    }
  });
  if (deferred) throw deferred;
  return result as T;
}

class SettlementFailed extends Error {
  constructor(readonly outcome: SettleOutcome) {
    super('settlement failed');
  }
}

export { simulatedBlock, txHashOf } from '../chain/simulated.js';
