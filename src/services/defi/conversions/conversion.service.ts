// Conversions: stored single-use quotes at the price feed (60 s), then execution that re-prices,
// refuses below min_amount_out, consumes the quote through a primary key and holds the input;
// the settlement loop swaps the held input for the output (or fails and releases it).
import { type Db, type Knex, withTransaction } from '../../../db/knex.js';
import { type AssetRow, findHeldByOperation, findProtocol } from '../../../db/repositories/ledger.repository.js';
import type { OperationRow } from '../../../db/repositories/operation.repository.js';
import * as repo from '../../../db/repositories/quote.repository.js';
import { findVault } from '../../../db/repositories/vault.repository.js';
import type { QuoteRow } from '../../../db/repositories/quote.repository.js';
import { type Dex, DEX_PROTOCOL, UNISWAP_V2_FEE_BPS } from '../../../chain/dex.js';
import type { OnchainSwapDetails, OnchainWrapDetails } from '../../../chain/evm/index.js';
import { minAmountOut, slippagePercentToBps } from '../../../lib/defi/amm.js';
import { viem } from '../../../lib/viem.js';
import { convertAtPrice, humanRate, type PricedAsset, toUsd } from '../../../lib/defi/pricing.js';
import type { Clock } from '../../../lib/clock.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { ApiError } from '../../../lib/errors.js';
import { isRefusal, type Refusal } from '../../../lib/refusal.js';
import { newId } from '../../../lib/ids.js';
import { formatAmount } from '../../../lib/money.js';
import type { ListPage } from '../../cursor.js';
import type { EarnService } from '../earn/earn.service.js';
import { type AmountFields, type LedgerService, USD_DECIMALS } from '../../ledger/ledger.js';
import type { OperationService, OwnerRef, PublicOperation, SettleOutcome, WriteResponse } from '../../ledger/operations.js';
import type { PolicyService } from '../../ledger/policy.js';
import { recordWrite } from '../record.js';
import { chainVenue, outWithoutFee, policyProtocol, routeOf, WRAP_PROTOCOL } from './venue.js';
import type { Schema } from '../../../lib/contract.js';

export const QUOTE_TTL_MS = 60_000;
export const DEFAULT_SLIPPAGE_PERCENT = 1;
/** The simulated DEX every route goes through, with Uniswap v3's fee tiers: 5 bps between cash assets, 30 otherwise. */
export const CONVERSION_PROTOCOL = 'uniswap-v3';

export interface ConversionService {
  quote(db: Db, who: OwnerRef, body: Schema<'ConversionQuoteRequest'>): Promise<Schema<'ConversionQuote'>>;
  execute(db: Db, who: OwnerRef, body: Schema<'ConversionRequest'>, idempotencyKey: string | null): Promise<WriteResponse | Refusal>;
  list(db: Db, who: OwnerRef, query: { cursor?: string; limit?: unknown }): Promise<ListPage<PublicOperation>>;
  get(db: Db, who: OwnerRef, id: string, include?: string[]): Promise<PublicOperation>;
  /** The settler of `conversion` operations (registered with the operation service at construction). */
  settle(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome>;
}

/** Fee tier of the pair (bps). */
export const feeBpsFor = (from: AssetRow, to: AssetRow): bigint => (from.category === 'cash' && to.category === 'cash' ? 5n : 30n);

/** A deterministic simulated pool address per unordered pair (fault injection targets it: `agentctl chain fail-address`). */
export const poolAddressFor = (a: string, b: string): string => `0x${sha256Hex(`${CONVERSION_PROTOCOL}:pool:${[a, b].sort().join('/')}`).slice(0, 40)}`;

export function createConversionService(deps: { clock: Clock; ledger: LedgerService; operations: OperationService; policy: PolicyService; earn: EarnService; dex?: Dex | null }): ConversionService {
  const { clock, ledger, operations, policy, earn } = deps;
  const dex = deps.dex ?? null;

  async function priced(db: Db, asset: AssetRow): Promise<PricedAsset & { source: string }> {
    const p = await ledger.price(db, asset.symbol);
    return { symbol: asset.symbol, decimals: asset.decimals, priceE8: p.usdE8, source: p.source };
  }

  const resolveAmount = async (db: Db, asset: AssetRow, body: AmountFields): Promise<bigint> => (await ledger.resolveAmount(db, asset, body)) as bigint;

  async function publicQuote(db: Db, q: QuoteRow): Promise<Schema<'ConversionQuote'>> {
    const from = await ledger.requireAsset(db, q.from_asset);
    const to = await ledger.requireAsset(db, q.to_asset);
    const fromAmount = BigInt(q.from_amount);
    const expected = BigInt(q.expected_out);
    const vaultAddress = async (id: string | null) => (id ? ((await findVault(db, id))?.address ?? null) : null);
    // Hightop's leg names (issue 26, item 10): the protocol's id and display name beside our `protocol`.
    const protocolName = (await findProtocol(db, q.protocol_id))?.name ?? q.protocol_id;
    const named = { protocol_id: q.protocol_id, protocol_name: protocolName };
    const legs = q.route
      ? await Promise.all(
          q.route.legs.map(async (l) => ({
            protocol: q.protocol_id,
            ...named,
            pool_address: l.pair,
            fee_bps: q.fee_bps,
            from_asset: l.from_asset,
            to_asset: l.to_asset,
            from_amount: formatAmount(BigInt(l.amount_in), (await ledger.requireAsset(db, l.from_asset)).decimals),
            expected_out: formatAmount(BigInt(l.amount_out), (await ledger.requireAsset(db, l.to_asset)).decimals),
          })),
        )
      : [
          {
            protocol: q.protocol_id,
            ...named,
            pool_address: q.pool_address,
            fee_bps: q.fee_bps,
            from_asset: q.from_asset,
            to_asset: q.to_asset,
            from_amount: formatAmount(fromAmount, from.decimals),
            expected_out: formatAmount(expected, to.decimals),
          },
        ];
    return {
      quote_id: q.id,
      from_asset: q.from_asset,
      to_asset: q.to_asset,
      from_amount: formatAmount(fromAmount, from.decimals),
      expected_out: formatAmount(expected, to.decimals),
      min_amount_out: formatAmount(BigInt(q.min_amount_out), to.decimals),
      slippage_percent: q.slippage_bps / 100,
      human_rate: humanRate(fromAmount, expected, from, to),
      // The assets between the first input and the last output (none for a direct swap).
      route: { legs, intermediate_assets: legs.slice(1).map((l) => l.from_asset) },
      from_vault_address: await vaultAddress(q.from_vault_id),
      to_vault_address: await vaultAddress(q.to_vault_id),
      expires_at: q.expires_at.toISOString(),
      expires_in_seconds: Math.max(0, Math.ceil((q.expires_at.getTime() - clock.now().getTime()) / 1000)),
      fee_usd: formatAmount(BigInt(q.fee_usd_e8), USD_DECIMALS),
      price_source: q.price_source,
      created_at: q.created_at.toISOString(),
    };
  }

  /** The policy's verdict without recording an operation (a quote is a dry run). */
  async function checkPolicy(trx: Db, agentId: string, req: Parameters<PolicyService['evaluate']>[2]): Promise<void> {
    const decision = await policy.evaluate(trx, agentId, req);
    if (!decision.allowed) throw new ApiError(decision.code, decision.message, decision.details);
  }

  async function vaultFor(db: Db, address: string | undefined, asset: AssetRow, field: string) {
    if (address === undefined || address === null) return null;
    const v = await earn.findVaultByAddress(db, address);
    if (!v) throw new ApiError('not_found', `no vault at ${address}`, { field });
    if (v.asset_symbol !== asset.symbol) throw new ApiError('validation_failed', `the vault at ${address} holds ${v.asset_symbol}, not ${asset.symbol}`, { field });
    return v;
  }

  const service: ConversionService = {
    async quote(db, who, body) {
      return withTransaction(db, async (trx) => {
        const from = await ledger.requireAsset(trx, body.from_asset, 'from_asset');
        const to = await ledger.requireAsset(trx, body.to_asset, 'to_asset');
        if (from.symbol === to.symbol) throw new ApiError('validation_failed', 'from_asset and to_asset must differ', { fields: ['from_asset', 'to_asset'] });
        const slippageBps = slippagePercentToBps(body.slippage_percent ?? DEFAULT_SLIPPAGE_PERCENT);
        // The document bounds slippage_percent to (0, 50]; whole basis points (two decimals) it cannot say.
        if (slippageBps === null) throw new ApiError('validation_failed', 'slippage_percent must be in (0, 50] with at most two decimals', { field: 'slippage_percent' });
        const fromVault = await vaultFor(trx, body.from_vault_address, from, 'from_vault_address');
        const toVault = await vaultFor(trx, body.to_vault_address, to, 'to_vault_address');
        const amount = await resolveAmount(trx, from, body);
        const [pf, pt] = [await priced(trx, from), await priced(trx, to)];
        // On a chain with pools (evm mode, development bootstrap), a wallet-to-wallet conversion reads the route's
        // reserves (or is an account's wrap, 1:1); one into or out of a vault, or of an asset without a pool, stays at the price feed.
        const venue = dex && !fromVault && !toVault && amount > 0n ? await chainVenue(trx, dex, who, from.symbol, to.symbol, amount) : null;
        const onchain = venue?.kind === 'route' ? venue.quote : null;
        const wrap = venue?.kind === 'wrap' ? venue : null;
        const fee = onchain ? UNISWAP_V2_FEE_BPS : wrap ? 0n : feeBpsFor(from, to);
        const q = onchain ? { netOut: onchain.amountOut, fee: outWithoutFee(onchain) - onchain.amountOut } : wrap ? { netOut: amount, fee: 0n } : convertAtPrice(amount, pf, pt, fee);
        if (q.netOut <= 0n) throw new ApiError('validation_failed', 'the amount is too small to convert', { field: 'amount' });
        const protocol = onchain ? DEX_PROTOCOL : wrap ? WRAP_PROTOCOL : CONVERSION_PROTOCOL;
        const usdE8 = toUsd(amount, pf);
        await checkPolicy(trx, who.agentId, { type: 'conversion', asset: from.symbol, usdE8, protocol: policyProtocol(protocol), slippageBps: Number(slippageBps) });
        await checkPolicy(trx, who.agentId, { type: 'conversion', asset: to.symbol, protocol: policyProtocol(protocol) });
        if (fromVault) await checkPolicy(trx, who.agentId, { type: 'earn.withdraw', asset: from.symbol, protocol: fromVault.protocol_id });
        if (toVault) await checkPolicy(trx, who.agentId, { type: 'earn.deposit', asset: to.symbol, protocol: toVault.protocol_id });
        if (!fromVault) {
          const { available } = await ledger.balance(trx, who.walletId, from.symbol);
          if (available < amount)
            throw new ApiError('insufficient_funds', `insufficient ${from.symbol} balance`, {
              asset: from.symbol,
              available: formatAmount(available, from.decimals),
              required: formatAmount(amount, from.decimals),
            });
        }
        const now = clock.now();
        const row = await repo.insertQuote(trx, {
          id: newId(),
          agent_id: who.agentId,
          wallet_id: who.walletId,
          from_asset: from.symbol,
          to_asset: to.symbol,
          from_amount: amount,
          expected_out: q.netOut,
          min_amount_out: wrap ? q.netOut : minAmountOut(q.netOut, slippageBps),
          slippage_bps: Number(slippageBps),
          fee_bps: Number(fee),
          fee_amount: q.fee,
          fee_usd_e8: toUsd(q.fee, pt, 'up'),
          from_price_e8: pf.priceE8,
          to_price_e8: pt.priceE8,
          price_source: onchain ? `${DEX_PROTOCOL}:reserves@${onchain.block}` : wrap ? `${WRAP_PROTOCOL}:1:1` : `price-feed:${pf.source === pt.source ? pf.source : `${pf.source}+${pt.source}`}`,
          protocol_id: protocol,
          pool_address: onchain ? onchain.pairs[0]! : (wrap?.weth ?? poolAddressFor(from.symbol, to.symbol)),
          route: onchain ? routeOf(onchain) : null,
          from_vault_id: fromVault?.id ?? null,
          to_vault_id: toVault?.id ?? null,
          expires_at: new Date(now.getTime() + QUOTE_TTL_MS),
          created_at: now,
        });
        return publicQuote(trx, row);
      });
    },

    async execute(db, who, body, idempotencyKey) {
      return withTransaction(db, async (trx) => {
        const quote = await repo.findQuote(trx, who.agentId, body.quote_id);
        if (!quote) throw new ApiError('not_found', 'quote not found', { quote_id: body.quote_id });
        if (clock.now().getTime() >= quote.expires_at.getTime())
          throw new ApiError('quote_expired', 'the quote has expired; request a new one', { quote_id: quote.id, expired_at: quote.expires_at.toISOString() });
        // Agent-wide lock order (policy row, then balances, then vaults: vault.repository.ts) shared by every DeFi write.
        await policy.lock(trx, who.agentId);
        const operationId = newId();
        // The primary key on the consumption decides a race: the losers wait for the winner's commit, then conflict.
        if (!(await repo.consumeQuote(trx, quote.id, operationId, clock.now()))) {
          throw new ApiError('quote_already_consumed', 'the quote was already used', { quote_id: quote.id });
        }
        const from = await ledger.requireAsset(trx, quote.from_asset);
        const to = await ledger.requireAsset(trx, quote.to_asset);
        const fromAmount = BigInt(quote.from_amount);
        const [pf, pt] = [await priced(trx, from), await priced(trx, to)];
        const wraps = quote.protocol_id === WRAP_PROTOCOL;
        let repriced: { netOut: bigint; fee: bigint } | null = quote.route || wraps ? null : convertAtPrice(fromAmount, pf, pt, BigInt(quote.fee_bps));
        let onchain: Partial<OnchainSwapDetails & OnchainWrapDetails> = {};
        if (quote.route || wraps) {
          // Re-read the reserves now: a swap that would fall below the minimum is refused before submission.
          const now = dex ? await chainVenue(trx, dex, who, from.symbol, to.symbol, fromAmount) : null;
          const route = now?.kind === 'route' ? now.quote : null;
          const same = wraps
            ? now?.kind === 'wrap' && now.weth.toLowerCase() === quote.pool_address.toLowerCase()
            : route !== null && route.pairs.length === quote.route!.legs.length && route.pairs.every((p, i) => p.toLowerCase() === quote.route!.legs[i]!.pair.toLowerCase());
          if (!now || !same) throw new ApiError('quote_expired', 'the route of this quote is no longer available; request a new one', { quote_id: quote.id });
          if (now.kind === 'wrap') {
            repriced = { netOut: fromAmount, fee: 0n };
            onchain = { onchain_wrap: { weth: viem().getAddress(now.weth), unwrap: now.unwrap } };
          } else {
            repriced = { netOut: now.quote.amountOut, fee: outWithoutFee(now.quote) - now.quote.amountOut };
            onchain = {
              onchain_route: { router: now.quote.router, pairs: now.quote.pairs, path: now.quote.path },
              ...(now.wrapInput ? { wrap_input: true } : {}),
              ...(now.unwrapOutput ? { unwrap_output: true } : {}),
            };
          }
        }
        if (!repriced) throw new Error('unreachable: a quote without a price');
        const minOut = BigInt(quote.min_amount_out);
        if (repriced.netOut < minOut) {
          throw new ApiError('slippage_exceeded', `the price moved: ${formatAmount(repriced.netOut, to.decimals)} ${to.symbol} is below the minimum ${formatAmount(minOut, to.decimals)}`, {
            quote_id: quote.id,
            min_amount_out: formatAmount(minOut, to.decimals),
            amount_out: formatAmount(repriced.netOut, to.decimals),
          });
        }
        const policyFacts = { protocol: policyProtocol(quote.protocol_id), slippageBps: quote.slippage_bps };
        // Redeem out of the vault only when the policy will allow the conversion: a refusal commits its record, and
        // must not commit a redemption with it (operations.create below re-evaluates under the same lock and records it).
        if (quote.from_vault_id && (await policy.evaluate(trx, who.agentId, { ...policyFacts, type: 'conversion', asset: from.symbol, usdE8: toUsd(fromAmount, pf) })).allowed) {
          await earn.redeemAssetsToWallet(trx, who, quote.from_vault_id, fromAmount, operationId);
        }
        const result = await recordWrite(operations, trx, {
          id: operationId,
          principal: who,
          type: 'conversion',
          resource: { type: 'conversion', id: operationId },
          asset: from.symbol,
          amount: fromAmount,
          amountUsdE8: toUsd(fromAmount, pf),
          policy: policyFacts,
          toAddress: quote.pool_address,
          details: {
            quote_id: quote.id,
            to_asset: to.symbol,
            amount_out: repriced.netOut.toString(),
            expected_out: quote.expected_out,
            min_amount_out: quote.min_amount_out,
            fee_amount: repriced.fee.toString(),
            to_vault_id: quote.to_vault_id,
            ...onchain,
          },
          eventData: { quote_id: quote.id },
          humanMessage: `Converting ${formatAmount(fromAmount, from.decimals)} ${from.symbol} to ${formatAmount(repriced.netOut, to.decimals)} ${to.symbol}`,
          idempotencyKey,
        });
        // A policy refusal commits its record; the quote stays usable (it was not what failed).
        if (isRefusal(result)) await repo.releaseQuote(trx, quote.id, operationId);
        return result;
      });
    },

    list: (db, who, query) => operations.list(db, who.agentId, { ...query, types: ['conversion'] }),

    get: (db, who, id, include) => operations.get(db, who.agentId, id, { types: ['conversion'], include }),

    async settle(trx, op) {
      // Balances before the vault (vault.repository's lock order): the holds and postings below take the wallet's rows,
      // and depositFromWallet locks the vault row last.
      if (op.to_address && (await ledger.isFailingAddress(trx, op.to_address))) {
        return { ok: false, code: 'settlement_failed', message: 'the swap reverted on chain' };
      }
      const details = op.details as { to_asset: string; amount_out: string; to_vault_id?: string | null };
      const out = BigInt(details.amount_out);
      for (const hold of await findHeldByOperation(trx, op.id)) await ledger.capture(trx, hold.id, { kind: 'external', name: 'conversion' }, 'conversion');
      await ledger.post(trx, {
        operationId: op.id,
        entryType: 'conversion',
        postings: [
          { account: { kind: 'external', name: 'conversion' }, asset: details.to_asset, amount: -out },
          { account: { kind: 'available', walletId: op.wallet_id }, asset: details.to_asset, amount: out },
        ],
      });
      if (details.to_vault_id) {
        const { positionId, shares } = await earn.depositFromWallet(trx, { agentId: op.agent_id, walletId: op.wallet_id }, details.to_vault_id, out, op.id);
        return { ok: true, details: { settled_amount_out: out.toString(), position_id: positionId, shares: shares.toString() } };
      }
      return { ok: true, details: { settled_amount_out: out.toString() } };
    },
  };

  operations.registerSettler('conversion', service.settle);
  // Swapped on chain: the input's hold goes to the pool, the wallet is credited what the router paid it (its Swapped event).
  operations.registerChainSettler('conversion', async (trx, op, tracked) => {
    const toAsset = (op.details as { to_asset: string }).to_asset;
    const out = BigInt(String(tracked.settled_amount_out));
    // The input's hold goes to the pool; an ETH input's gas reserve (issue 30: the relayer paid the gas) is released.
    let captured = false;
    for (const hold of await findHeldByOperation(trx, op.id)) {
      if (!captured && hold.amount === op.amount) captured = await ledger.capture(trx, hold.id, { kind: 'external', name: 'conversion' }, 'conversion');
      else await ledger.release(trx, hold.id);
    }
    await ledger.post(trx, {
      operationId: op.id,
      entryType: 'conversion',
      postings: [
        { account: { kind: 'external', name: 'conversion' }, asset: toAsset, amount: -out },
        { account: { kind: 'available', walletId: op.wallet_id }, asset: toAsset, amount: out },
      ],
    });
    return { ok: true, details: tracked };
  });
  return service;
}
