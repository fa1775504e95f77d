// The contract between the HTTP glue and the handlers.
import type { Context } from 'openapi-backend';
import type { Config } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Principal } from '../auth/principal.js';
import type { Services } from '../services/registry.js';
import type { Router } from './router.js';

export interface HandlerResult {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface RequestContext {
  requestId: string;
  principal: Principal;
  /** The idempotency transaction for idempotent writes, otherwise the pool. */
  db: Db;
  /** Present when the caller sent an Idempotency-Key. */
  idempotencyKey: string | null;
  services: Services;
  clock: Clock;
  config: Readonly<Config>;
  log: Logger;
  /** The app's router, for handlers that dispatch a request of their own (simulate). */
  router: Router;
  /** The caller's address (X-Forwarded-For only with TRUST_PROXY), for the owner audit log. */
  clientAddress?: string;
  /** A dry run (simulate): the idempotency layer is skipped, the caller rolls everything back. */
  dryRun?: boolean;
}

export type Handler = (c: Context, ctx: RequestContext) => Promise<HandlerResult>;
