// Payments to a recipient, trusted destination or address (optionally delivered as another asset), and the
// payments service the area exposes: these with one-off payments, recipients, recurring payments and routing.
import { withTransaction, type Db, type Knex } from '../../db/knex.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { findPayeesAndPrice } from '../../db/repositories/recipient.repository.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { Schema } from '../../lib/contract.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount, mulDiv } from '../../lib/money.js';
import { isRefusal, type Refusal } from '../../lib/refusal.js';
import { newId } from '../../lib/ids.js';
import { isEvmAddress } from '../../lib/wallet-keys.js';
import { createDelivery, payeeAccount, receivedActivity } from './delivery.js';
import type { LedgerService } from './ledger.js';
import { createOneOffService, type OneOffService } from './one-off-payments.js';
import type { BatchSettler, OperationService, OwnerRef, SettleOutcome, WriteResponse } from './operations.js';
import type { ChainSettler } from './settling.js';
import type { LockedPolicy, PolicyService } from './policy.js';
import { createRecipientService, type RecipientService } from './recipients.js';
import { createRecurringService, type RecurringService } from './recurring.js';
import { addressTargets, pickRoute, routeTargets, type Target } from './routing.js';
import { resolveMoney, shortAddress as short } from './write-input.js';

/**
 * One position a payment drew on (its operation's `details.drawn_from_earn`): base units of the asset, shares burned.
 * `onchain`: an on-chain vault's position, redeemed at settlement in the same account call as the transfer (its
 * `amount` is the least the redemption must return); the others were redeemed on the ledger at acceptance.
 */
export interface DrawnFromEarn {
  position_id: string;
  vault_id: string;
  vault: string;
  amount: string;
  shares: string;
  onchain?: true;
}

/** What a draw found: the positions, and how much of the shortfall is redeemed on chain at settlement (not yet in the wallet). */
export interface EarnDrawPlan {
  drawn: DrawnFromEarn[];
  onchain: bigint;
}

/** Redeems a payment's shortfall out of the agent's Earn positions into its wallet, under the payment's operation id (earn/draw.ts); null when they fall short. */
export type EarnDraw = (trx: Knex.Transaction, who: OwnerRef, need: { asset: string; amount: bigint; slippageBps: number; operationId: string }) => Promise<EarnDrawPlan | null>;

/** The positions a payment redeems on chain (none for a payment that drew on ledger vaults or not at all). */
export const onchainDraws = (op: Pick<OperationRow, 'details'>): DrawnFromEarn[] => ((op.details as { drawn_from_earn?: DrawnFromEarn[] } | null)?.drawn_from_earn ?? []).filter((d) => d.onchain);

/** The request body as the document declares it. */
export type PaymentBody = Schema<'PaymentRequest'>;

export interface PaymentService extends OneOffService, RecipientService, RecurringService {
  createPayment(db: Db, who: OwnerRef, body: PaymentBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  /** Every route `to` can take, best first (prefer=auto takes the first). */
  targets(db: Db, agentId: string, to: string): Promise<Target[]>;
  settlePayment(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
  /** settlePayment as a batch settles it (settlement-batch.ts); null for a payment converted at settlement. */
  batchSettlePayment: BatchSettler;
  /**
   * The DeFi area's Earn draw (defi/area.ts): without one, a payment pays from the wallet alone. `settleOnchain`
   * settles, from the account call's receipt, a payment that redeemed positions on chain.
   */
  registerEarnDraw(draw: EarnDraw, settleOnchain: ChainSettler): void;
}

const PAYMENT_RAILS: readonly string[] = ['auto', 'recurring_payment', 'one_off_payment', 'trusted_destination'];

export function createPaymentService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService }): PaymentService {
  const { ledger, operations } = deps;
  const delivery = createDelivery({ ledger, activity: { record: operations.recordActivity } });
  const { paymentToAccount, recordReceived } = delivery;
  let earnDraw: EarnDraw | null = null;
  let settleDraw: ChainSettler | null = null;
  // On chain a payment settles by the default capture (settlement.ts) unless it redeemed Earn positions in its call.
  operations.registerChainSettler('payment', async (trx, op, tracked) => (settleDraw && onchainDraws(op).length > 0 ? settleDraw(trx, op, tracked) : null));

  /** createPayment inside its transaction (the caller's, or one of its own when the request has no Idempotency-Key). */
  async function createPaymentIn(db: Knex.Transaction, who: OwnerRef, body: PaymentBody, idempotencyKey: string | null): Promise<WriteResponse | Refusal> {
    const note = body.note ?? null;
    const asset = await ledger.requireAsset(db, body.asset);
    // Hightop's `deliver_as` names a rail (issue 26, item 2): it routes like `prefer` (a rail other than auto wins);
    // an upper-case asset symbol still converts into that asset, as before.
    const deliverRail = PAYMENT_RAILS.includes(body.deliver_as as string) ? body.deliver_as : undefined;
    const prefer = deliverRail && deliverRail !== 'auto' ? deliverRail : body.prefer;
    const deliverAs = body.deliver_as && !deliverRail ? await ledger.requireAsset(db, body.deliver_as, 'deliver_as') : asset;
    let target: Target;
    let locked: LockedPolicy | undefined;
    let amount: bigint;
    let usdE8: bigint;
    if (isEvmAddress(body.to) && body.amount_usd == null && deliverAs.symbol === asset.symbol) {
      // To an address, in asset units, no conversion (the usual payment): the payees and the price are read while the
      // policy lock is taken. Both go out together on the transaction's pipelined connection (one round trip), so
      // nothing waits between the lock and these reads but this process's own work. Refusals in the order of the
      // general path: the route, the amount, then the price (then policy).
      const [payees, lockedNow] = await Promise.all([findPayeesAndPrice(db, who.agentId, body.to, asset.symbol), deps.policy.lock(db, who.agentId)]);
      locked = lockedNow;
      target = pickRoute(await addressTargets(db, body.to, payees), prefer);
      amount = (await ledger.resolveAmount(db, asset, body)) as bigint;
      usdE8 = ledger.priceBookOf(payees.price ? [payees.price] : []).usdValue(asset, amount, 'up');
    } else {
      target = pickRoute(await routeTargets(db, who.agentId, body.to), prefer);
      ({ amount, usdE8 } = await resolveMoney(db, ledger, asset, body));
    }
    const converting = deliverAs.symbol !== asset.symbol;
    const slippagePercent = body.slippage_percent ?? 1;
    const slippageBps = Math.round(slippagePercent * 100);
    const details: Record<string, unknown> = {
      route: target.route,
      recipient_id: target.recipientId,
      trusted_destination_id: target.destinationId,
      recurring_payment_id: target.recurringPaymentId,
      note,
    };
    if (converting) {
      const quoted = await ledger.convert(db, asset, deliverAs, amount);
      if (quoted <= 0n) throw new ApiError('validation_failed', 'the amount converts to nothing', { field: 'amount' });
      Object.assign(details, {
        deliver_as: deliverAs.symbol,
        quoted_deliver_amount: quoted.toString(),
        min_deliver_amount: mulDiv(quoted, BigInt(10_000 - slippageBps), 10_000n).toString(),
        slippage_bps: slippageBps,
      });
    }
    const who2 = target.name ? `${target.name} (${short(target.address)})` : short(target.address);
    const id = newId();
    // Short of the asset: the shortfall is redeemed out of Earn in this transaction and the hold placed again; the
    // redemption is journalled under this payment, which alone counts toward the caps (issue 26, item 2).
    const topUp =
      earnDraw &&
      (async (trx: Knex.Transaction) => {
        const { available } = await ledger.balance(trx, who.walletId, asset.symbol);
        const plan = await earnDraw!(trx, who, { asset: asset.symbol, amount: amount - available, slippageBps, operationId: id });
        return plan && { details: { drawn_from_earn: plan.drawn }, hold: amount - plan.onchain };
      });
    const created = await operations.create(db, {
      id,
      topUp: topUp ?? undefined,
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
      lockedPolicy: locked,
    });
    return isRefusal(created) ? created : operations.writeResponse(created.operation);
  }

  return {
    ...createOneOffService({ ...deps, delivery }),
    ...createRecipientService(deps),
    ...createRecurringService(deps),
    targets: routeTargets,
    registerEarnDraw(draw, settleOnchain) {
      earnDraw = draw;
      settleDraw = settleOnchain;
    },

    /**
     * Round trips of one accepted payment through HTTP (test/ledger/payment-round-trips.test.ts fails above 6):
     *   Redis     1  rate limit: one script call (src/ratelimit)
     *   Postgres  1  authenticate the API key (src/auth/api-key.ts, outside the transaction)
     *             2  BEGIN
     *             3  claim the Idempotency-Key: advisory lock + record insert in one statement (idempotency.repository
     *                claimRecord). No SAVEPOINT: a refusal thrown later rolls the whole transaction back and is stored
     *                in a transaction of its own (idempotency.ts storeRefusal)
     *             4  one round trip of three statements, sent together on the pipelined connection: the payees at the
     *                address and the asset's price (recipient.repository findPayeesAndPrice), the policy row lock, then
     *                the usage sums its caps need (policy.repository lockPolicy, a batch). Each statement takes its own
     *                snapshot, so the sums start after the lock is granted and see every payment committed under it
     *                before (test/ledger/payments.test.ts races 100 and 60 writes at the caps)
     *             5  hold + operation: balance guard, hold row, both journal legs and the operation row in one
     *                statement (sql/accept-payment.ts). An accepted payment writes no outbox event (settlement writes
     *                payment.executed later; a type that announces acceptance adds its event here, operations.ts)
     *             6  the Idempotency-Key record's answer, stored by the idempotency layer, sent with the COMMIT
     * Before: 16, then 11 (a SAVEPOINT, routing, the price, the usage sum and the stored response each had a round trip
     * of their own). Everything the policy lock does not need is done before it or in its round trip; after it only
     * statement 5 and the round trip of the COMMIT. Other `to` forms (recipient id, name), amount_usd and deliver_as take the general path
     * (routing and price statements of their own before the lock). PGlite sends the statements of 4 and 6 one by one.
     * Settlement runs later in the settlement loop (settlement.ts), in its own transaction, as before.
     */
    createPayment: (db, who, body, idempotencyKey) => withTransaction(db, (trx) => createPaymentIn(trx, who, body, idempotencyKey)),

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
          return {
            ok: false,
            code: 'slippage_exceeded',
            message: `the conversion would deliver ${formatAmount(out, target.decimals)} ${target.symbol}, below the minimum ${formatAmount(BigInt(details.min_deliver_amount!), target.decimals)}`,
          };
        }
        for (const h of holds) await ledger.capture(trx, h.id, { kind: 'external', name: 'conversion' }, 'payment');
        await ledger.post(trx, {
          operationId: op.id,
          entryType: 'payment_conversion',
          postings: [
            { account: { kind: 'external', name: 'conversion' }, asset: target.symbol, amount: -out },
            { account, asset: target.symbol, amount: out },
          ],
        });
        await recordReceived(trx, wallet, op.id, target, out, null);
        return { ok: true, details: { delivered_asset: target.symbol, delivered_amount: out.toString() } };
      }
      for (const h of holds) await ledger.capture(trx, h.id, account, 'payment');
      await recordReceived(trx, wallet, op.id, asset, amount, null);
      return { ok: true, details: { delivered_asset: asset.symbol, delivered_amount: amount.toString() } };
    },

    batchSettlePayment(op, facts) {
      const address = op.to_address!;
      if (facts.failing) return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${address}` };
      const asset = facts.assets.get(op.asset_symbol!);
      const details = op.details as { deliver_as?: string };
      // A conversion reads the feed and may refuse on slippage: settlePayment settles it alone.
      if (!asset || (details.deliver_as && details.deliver_as !== asset.symbol)) return null;
      const amount = BigInt(op.amount!);
      let usdE8: bigint | null = null;
      try {
        usdE8 = facts.prices.usdValue(asset, amount);
      } catch {
        // No price or a stale one: the receipt is recorded without a USD value, as recordReceived does.
      }
      return {
        ok: true,
        details: { delivered_asset: asset.symbol, delivered_amount: amount.toString() },
        capture: { to: payeeAccount(facts.payee), entryType: 'payment' },
        activity: facts.payee ? [receivedActivity(facts.payee, op.id, asset, amount, usdE8, null)] : [],
      };
    },
  };
}
