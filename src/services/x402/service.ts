// x402 (spec 4.1, contract §13): sign an EIP-3009 USDC authorization, quote a URL's x402 price, and purchase a
// resource by answering its 402 challenge. Signing and paying create `x402.sign` / `x402.purchase` operations through
// the ledger area (policy, hold, settlement) in the caller's transaction; settlement.ts ends them (holds captured).
import type { Db, Knex } from '../../db/knex.js';
import { findWalletByAgent } from '../../db/repositories/agent.repository.js';
import { findAsset } from '../../db/repositories/ledger.repository.js';
import { transitionOperation } from '../../db/repositories/operation.repository.js';
import type { Address, Hex } from '../../chain/port.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { openWalletAccount } from '../../lib/wallet-keys.js';
import { isRefusal, refuse } from '../../lib/refusal.js';
import { apiCodeOf } from '../custody/accounts.js';
import { registerWithAccount } from './account.js';
import { createX402Settlement } from './settlement.js';
import { parsePublicHttpsUrl, UrlRejectedError } from '../../webhooks/url-safety.js';
import {
  BASE_PAYABLE,
  chooseRequirement,
  parseChallenge,
  payableOnChain,
  readRequirement,
  readSettlement,
  unsupportedReason,
  type PayableNetwork,
  type RawRequirement,
  type X402Version,
} from '../../x402/challenge.js';
import { encodePaymentHeader, PAYMENT_HEADER_NAMES, randomNonce, signTransferAuthorization } from '../../x402/signing.js';
import { createUpstreamFetcher, decodeBody, DEFAULT_UPSTREAM_TIMEOUT_MS, type UpstreamResponse } from '../../x402/upstream.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, invalid, MAX_TIMEOUT_SECONDS, parseUsdcBaseUnits, priceOf, short, timeoutSeconds, usdc } from './price.js';
import { withTransaction } from '../../db/knex.js';
import type { OwnerRef } from '../ledger/operations.js';

export type { X402PurchaseBody, X402PurchaseResult, X402QuoteBody, X402QuoteResult, X402Service, X402ServiceDeps, X402SignBody, X402SignResult } from './types.js';
import type { X402PurchaseResult, X402Service, X402ServiceDeps } from './types.js';

interface AuthorizeInput {
  type: 'x402.sign' | 'x402.purchase';
  version: X402Version;
  payTo: string;
  amount: bigint;
  timeoutSeconds: number;
  requirement: RawRequirement | null;
  resource: unknown;
  targetUrl: string | null;
  settlement: 'worker' | 'manual';
  humanMessage: string;
  idempotencyKey: string | null;
  /** Simulation: no signature is made (a simulated write must not hand out a usable authorization). */
  dryRun?: boolean;
}

export function createX402Service(deps: X402ServiceDeps): X402Service {
  const { clock } = deps;
  const { operations } = deps.ledger;
  const { sealer } = deps;
  const allowLoopback = deps.config.unsafeAllowLoopbackTargets;
  const fetchUpstream = deps.fetcher ?? createUpstreamFetcher({ allowLoopback, resolver: deps.resolver, ca: deps.ca, log: deps.log });
  const chain = deps.chain ?? null;
  const { captureHolds, trackOnChain } = createX402Settlement(deps);

  /** Where payments are made: USDC on Base (simulated), or the USDC token recorded for the evm chain. */
  async function payableNetwork(db: Db): Promise<PayableNetwork> {
    if (!chain) return BASE_PAYABLE;
    const usdc = await findAsset(db, 'USDC');
    if (!usdc?.contract_address) throw new ApiError('service_unavailable', 'no USDC token is recorded for this chain yet');
    return payableOnChain(chain.chainId, usdc.contract_address, { name: usdc.eip712_name ?? 'USD Coin', version: usdc.eip712_version ?? '2' });
  }

  /** Policy, hold and the operation row first (a refusal signs nothing), then the signature. */
  async function authorize(trx: Knex.Transaction, who: OwnerRef, input: AuthorizeInput & { payable: PayableNetwork }) {
    const wallet = await findWalletByAgent(trx, who.agentId);
    if (!wallet?.sealed_private_key) throw new Error(`wallet of agent ${who.agentId} has no key`);
    const nonce = randomNonce();
    const nowSeconds = BigInt(Math.floor(clock.now().getTime() / 1000));
    const validBefore = nowSeconds + BigInt(input.timeoutSeconds);
    const validBeforeIso = new Date(Number(validBefore) * 1000).toISOString();
    const network = input.payable.networks[input.version] ?? input.payable.networks[2];
    const operationId = newId();
    // evm mode: what the tracking loop needs to find the block that used this authorization (none before this head).
    const head = chain ? await chain.head() : null;
    const onChain = chain ? { chain_id: chain.chainId, token: input.payable.usdc, authorizer: wallet.address, from_block: head ? Number(head.number) : 0 } : {};
    const created = await operations.create(trx, {
      id: operationId,
      principal: who,
      type: input.type,
      asset: 'USDC',
      amount: input.amount,
      toAddress: input.payTo,
      policy: { recipient: { ids: [], address: input.payTo } },
      details: { x402_version: input.version, network, pay_to: input.payTo, nonce, valid_before: validBeforeIso, target_url: input.targetUrl, ...onChain },
      humanMessage: input.humanMessage,
      idempotencyKey: input.idempotencyKey,
      settlement: chain ? 'manual' : input.settlement,
    });
    // A policy refusal is recorded (operation, activity, event) and answered; nothing is signed.
    if (isRefusal(created)) return created;
    const { operation } = created;
    if (input.dryRun) return { operation, nonce, validBeforeIso, network, header: { name: PAYMENT_HEADER_NAMES[input.version], value: '', payload: {} }, registration: null };
    const account = openWalletAccount(sealer, wallet.sealed_private_key);
    let registration: Hex | null = null;
    if (wallet.custody === 'account' && chain?.custody) {
      // An agent account: its lane registers the authorization on chain (counted toward the owner's caps) and the
      // account vouches for it by ERC-1271; the lane key's signature below only gives the payload its usual shape.
      const at = { agentId: who.agentId, address: wallet.address as Address, sealedLaneKey: wallet.sealed_private_key };
      const registered = await registerWithAccount(trx, chain.custody, at, {
        token: input.payable.usdc as Address,
        to: input.payTo as Address,
        value: input.amount,
        validAfter: 0n,
        validBefore,
        nonce,
      });
      if (!registered.ok) {
        // Mined but reverted: the relayer's nonce is spent, so this commits, the operation failed and its hold released.
        await operations.finish(trx, operation.id, 'accepted', { ok: false, code: 'settlement_failed', message: `${registered.message} (${registered.txHash})` });
        return refuse(apiCodeOf(registered.code), registered.message, { chain_code: registered.code, tx_hash: registered.txHash, operation_id: operation.id });
      }
      registration = registered.txHash;
    }
    const from = registration ? (wallet.address as Address) : undefined;
    const { authorization, signature } = await signTransferAuthorization({ account, from, payTo: input.payTo, amount: input.amount, nonce, validAfter: 0n, validBefore, payable: input.payable });
    const header = encodePaymentHeader({ version: input.version, authorization, signature, requirement: input.requirement, resource: input.resource, payable: input.payable });
    return { operation, nonce, validBeforeIso, network, header, registration };
  }

  /** A seller's 5xx is an upstream failure (502), not a response to hand back. */
  function upstreamFailure(res: UpstreamResponse): ApiError {
    return new ApiError('upstream_error', `the target answered ${res.status}`, { reason: 'http_5xx', upstream_status: res.status });
  }
  function refuse5xx(res: UpstreamResponse): UpstreamResponse {
    if (res.status >= 500) throw upstreamFailure(res);
    return res;
  }

  /**
   * `paid`: the money left (a settlement receipt, a 2xx, or on chain the authorization used); `seller_accepted`: it left
   * and the seller answered 2xx. A seller failing after it was paid is `paid: true, seller_accepted: false`.
   */
  function upstreamResult(res: UpstreamResponse, extra: { operation_id: string | null; paid: boolean; settled: boolean }): X402PurchaseResult {
    return {
      ok: true,
      operation_id: extra.operation_id,
      paid: extra.paid,
      seller_accepted: extra.paid && res.status >= 200 && res.status < 300,
      settled: extra.settled,
      status: res.status,
      headers: res.headers,
      body: decodeBody(res),
      body_truncated: res.truncated,
    };
  }

  /**
   * evm mode, the seller's answer unusable (unreachable, timed out, 5xx) and the authorization not used yet: the seller
   * may still use it until valid_before, so nothing rolls back. The operation waits, submitted, for trackOnChain; the
   * error is answered with its id.
   */
  async function awaitChain(trx: Knex.Transaction, operationId: string, registration: Hex | null, err: ApiError) {
    const now = clock.now();
    const details = { upstream_error: err.code, ...err.details, ...(registration ? { authorization_tx_hash: registration } : {}) };
    await transitionOperation(trx, operationId, 'accepted', { status: 'submitted', submitted_at: now, updated_at: now, details });
    return refuse(err.code, err.message, { ...err.details, operation_id: operationId });
  }

  const service: X402Service = {
    trackOnChain,
    async sign(db, who, body, idempotencyKey, opts = {}) {
      let targetUrl: string | null = null;
      if (body.target_url !== undefined) {
        try {
          targetUrl = parsePublicHttpsUrl(body.target_url, { allowLoopback }).url.toString();
        } catch (err) {
          if (err instanceof UrlRejectedError) throw invalid(`target_url is not a public HTTPS URL: ${err.reason}`, 'target_url');
          throw err;
        }
      }

      const payable = await payableNetwork(db);
      // A chain without a v1 network name (anything but Base) is paid with v2 payloads.
      let version: X402Version = payable.networks[1] ? 1 : 2;
      let payTo: string;
      let amount: bigint;
      let requirement: RawRequirement | null = null;
      let fallbackTimeout: number | null = null;
      // The document admits either payment_requirements or pay_to with amount.
      if (body.payment_requirements) {
        const raw = body.payment_requirements;
        const read = readRequirement(raw);
        if ('problems' in read) throw invalid(`payment_requirements is not an x402 requirement: ${read.problems.join('; ')}`, 'payment_requirements', { problems: read.problems });
        const reason = unsupportedReason(read, payable);
        if (reason) throw invalid(`cannot sign this requirement: ${reason}`, 'payment_requirements', { reason });
        ({ version, payTo, amount } = read);
        requirement = version === 2 ? raw : null;
        fallbackTimeout = read.maxTimeoutSeconds;
      } else {
        payTo = body.pay_to!;
        amount = parseUsdcBaseUnits(body.amount!, 'amount');
      }
      const seconds = timeoutSeconds(body.max_timeout_seconds, fallbackTimeout);

      return withTransaction(db, async (trx) => {
        const signed = await authorize(trx, who, {
          payable,
          type: 'x402.sign',
          version,
          payTo,
          amount,
          timeoutSeconds: seconds,
          requirement,
          resource: version === 2 && targetUrl ? { url: targetUrl } : undefined,
          targetUrl,
          settlement: 'worker',
          humanMessage: `Signed an x402 payment of ${usdc(amount)} USDC to ${short(payTo)}${targetUrl ? ` for ${targetUrl}` : ''}`,
          idempotencyKey,
          dryRun: opts.dryRun,
        });
        if (isRefusal(signed)) return signed;
        return {
          ok: true as const,
          operation_id: signed.operation.id,
          payment_header: signed.header.value,
          payment_header_name: signed.header.name,
          payment_headers: { [signed.header.name]: signed.header.value },
          x402_version: version,
          nonce: signed.nonce,
          valid_before: signed.validBeforeIso,
          pay_to: payTo,
          amount: amount.toString(),
          asset_symbol: 'USDC' as const,
          network: signed.network,
        };
      });
    },

    async quote(body, db) {
      const res = refuse5xx(await fetchUpstream({ url: body.url, method: body.method ?? 'GET', body: body.body, timeoutMs: body.timeout_ms ?? DEFAULT_UPSTREAM_TIMEOUT_MS }));
      const none = { ok: true as const, supported: false, x402_required: false, upstream_status: res.status, price: null };
      if (res.status !== 402) return none;
      const challenge = parseChallenge({ paymentRequiredHeader: res.headers['payment-required'], body: decodeBody(res) });
      if (!challenge) return none;
      const payable = db ? await payableNetwork(db) : BASE_PAYABLE;
      const choice = chooseRequirement(challenge, payable);
      const shown = choice.supported ?? choice.readable[0] ?? null;
      return { ok: true, supported: choice.supported !== null, x402_required: true, upstream_status: res.status, price: shown ? priceOf(shown, challenge.resource, payable) : null };
    },

    async purchase(db, who, body, idempotencyKey, opts = {}) {
      const maxAmount = parseUsdcBaseUnits(body.max_amount, 'max_amount');
      const method = body.method ?? 'GET';
      const request = { url: body.url, method, body: body.body, timeoutMs: DEFAULT_UPSTREAM_TIMEOUT_MS } as const;
      const first = refuse5xx(await fetchUpstream(request));
      if (first.status !== 402) return upstreamResult(first, { operation_id: null, paid: false, settled: false });
      const challenge = parseChallenge({ paymentRequiredHeader: first.headers['payment-required'], body: decodeBody(first) });
      // A 402 without an x402 challenge is the seller's own answer: hand it back unpaid.
      if (!challenge) return upstreamResult(first, { operation_id: null, paid: false, settled: false });
      const payable = await payableNetwork(db);
      const choice = chooseRequirement(challenge, payable);
      const req = choice.supported;
      if (!req) {
        const reasons = choice.readable.map((r) => unsupportedReason(r, payable));
        throw invalid(`the target asks for no payment this service can make (only exact USDC on ${payable === BASE_PAYABLE ? 'Base' : `chain ${payable.chainId}`})`, 'url', { reasons });
      }
      if (req.amount > maxAmount) {
        // Base units on both sides, as the request gave max_amount; the USDC figures are for people.
        throw new ApiError('limit_exceeded', `the price of ${usdc(req.amount)} USDC exceeds max_amount ${usdc(maxAmount)} USDC`, {
          limit: 'max_amount',
          price: req.amount.toString(),
          max_amount: maxAmount.toString(),
          price_usdc: usdc(req.amount),
          max_amount_usdc: usdc(maxAmount),
        });
      }

      return withTransaction(db, async (trx) => {
        const signed = await authorize(trx, who, {
          payable,
          type: 'x402.purchase',
          version: req.version,
          payTo: req.payTo,
          amount: req.amount,
          timeoutSeconds: Math.min(req.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS),
          requirement: req.raw,
          resource: challenge.resource ?? undefined,
          targetUrl: body.url,
          settlement: 'manual',
          humanMessage: `x402 purchase of ${body.url} for ${usdc(req.amount)} USDC paid to ${short(req.payTo)}`,
          idempotencyKey,
          dryRun: opts.dryRun,
        });
        if (isRefusal(signed)) return signed;
        // Simulation stops before the paid retry: the seller never sees an authorization.
        if (opts.dryRun) return upstreamResult(first, { operation_id: signed.operation.id, paid: false, settled: false });
        // The paid retry. Without a chain, a network failure, or a 5xx without a settlement receipt, throws
        // upstream_error, which rolls the operation and its hold back (the authorization then lapses unused).
        const opId = signed.operation.id;
        let paidRes: UpstreamResponse;
        try {
          paidRes = await fetchUpstream({ ...request, headers: { [signed.header.name]: signed.header.value } });
        } catch (err) {
          if (!chain || !(err instanceof ApiError)) throw err;
          return awaitChain(trx, opId, signed.registration, err);
        }
        const { settled, transaction } = readSettlement(paidRes.headers);
        const delivered = paidRes.status >= 200 && paidRes.status < 300;
        // evm mode: a seller that neither delivered nor sent a receipt may still have settled; the chain knows.
        const d = signed.operation.details as { token: Address; authorizer: Address };
        const usedOnChain = chain !== null && !settled && !delivered && (await chain.authorizationUsed(d.token, d.authorizer, signed.nonce as Hex));
        const paid = settled || delivered || usedOnChain;
        if (!paid && paidRes.status >= 500) {
          if (!chain) throw upstreamFailure(paidRes);
          return awaitChain(trx, opId, signed.registration, upstreamFailure(paidRes));
        }
        const outcome = { upstream_status: paidRes.status, seller_settled: settled, seller_transaction: transaction, seller_accepted: paid && delivered };
        if (chain) {
          // evm mode: whatever the seller says, the chain decides (the seller holds a usable authorization until
          // valid_before). The operation waits, submitted, for trackOnChain and CHAIN_CONFIRMATIONS.
          const now = clock.now();
          await transitionOperation(trx, opId, 'accepted', {
            status: 'submitted',
            submitted_at: now,
            updated_at: now,
            tx_hash: transaction && /^0x[0-9a-fA-F]{64}$/.test(transaction) ? transaction.toLowerCase() : null,
            details: { ...outcome, used_on_chain: usedOnChain, ...(signed.registration ? { authorization_tx_hash: signed.registration } : {}) },
          });
        } else if (paid) {
          // The money left (a receipt or a 2xx): executed and captured, even when the seller then failed.
          await captureHolds(trx, opId);
          await operations.finish(trx, opId, 'accepted', { ok: true, details: { ...(signed.operation.details as Record<string, unknown>), ...outcome } });
        } else {
          await operations.finish(trx, opId, 'accepted', { ok: false, code: 'payment_refused', message: `the seller answered ${paidRes.status} to the payment` });
        }
        return upstreamResult(paidRes, { operation_id: opId, paid, settled });
      });
    },
  };
  return service;
}
