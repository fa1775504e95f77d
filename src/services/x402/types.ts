// The x402 service's public shapes (its requests and answers as the document names them) and what it is built from.
import type { Config } from '../../config.js';
import type { Db, Knex } from '../../db/knex.js';
import type { CustodyPort } from '../../chain/port.js';
import type { ChainReads } from '../../chain/reads.js';
import type { Clock } from '../../lib/clock.js';
import type { Sealer } from '../../lib/crypto.js';
import type { Logger } from '../../lib/logger.js';
import type { Schema } from '../../lib/contract.js';
import type { Refusal } from '../../lib/refusal.js';
import type { Resolver } from '../../webhooks/url-safety.js';
import type { UpstreamFetcher } from '../../x402/upstream.js';
import type { LedgerArea } from '../ledger/area.js';
import type { OwnerRef } from '../ledger/operations.js';

export type X402SignBody = Schema<'X402SignRequest'>;
export type X402QuoteBody = Schema<'X402QuoteRequest'>;
export type X402PurchaseBody = Schema<'X402PurchaseRequest'>;
export type X402SignResult = Schema<'X402SignResponse'>;
export type X402QuoteResult = Schema<'X402QuoteResponse'>;
export type X402PurchaseResult = Schema<'X402PurchaseResponse'>;

export interface X402Service {
  /** `dryRun` (POST /simulate): policy, hold and operation are evaluated but nothing is signed or sent to a seller. */
  sign(db: Db, who: OwnerRef, body: X402SignBody, idempotencyKey: string | null, opts?: { dryRun?: boolean }): Promise<X402SignResult | Refusal>;
  /** `db` reads the evm chain's USDC token (evm mode); without it the price is read against USDC on Base. */
  quote(body: X402QuoteBody, db?: Db): Promise<X402QuoteResult>;
  purchase(db: Db, who: OwnerRef, body: X402PurchaseBody, idempotencyKey: string | null, opts?: { dryRun?: boolean }): Promise<X402PurchaseResult | Refusal>;
  /**
   * evm mode, one pass of the worker loop: each open x402 operation becomes `executed` (hold captured) once the block
   * that used its authorization has CHAIN_CONFIRMATIONS confirmations (whatever the seller answered), or `execution_failed` (hold released; no public event, spec 6.3) once a block at
   * or past `valid_before` shows it unused. Returns how many operations it finished.
   */
  trackOnChain(db: Knex): Promise<number>;
}

export interface X402ServiceDeps {
  /** `chain.confirmations` (CHAIN_CONFIRMATIONS): how deep the block that used an authorization must be (evm mode). */
  config: Readonly<Pick<Config, 'unsafeAllowLoopbackTargets'> & { chain?: Readonly<Pick<Config['chain'], 'confirmations'>> }>;
  /** The app's one Sealer (src/app.ts): opens the wallet keys that sign authorizations. */
  sealer: Sealer;
  clock: Clock;
  ledger: Pick<LedgerArea, 'operations' | 'ledger'>;
  log?: Logger;
  /** Tests: a resolver table instead of DNS, and the seller's CA. */
  resolver?: Resolver;
  ca?: string | Buffer | Array<string | Buffer>;
  /** Replaces the HTTPS fetcher entirely (tests of the service without a seller). */
  fetcher?: UpstreamFetcher;
  /** evm mode: authorizations are signed for the USDC token of this chain and tracked on it. */
  chain?: (ChainReads & { custody?: CustodyPort | null }) | null;
}
