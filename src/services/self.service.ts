// The authenticated context (GET /self) and the capabilities document generated from the contract.
import type { Principal } from '../auth/principal.js';
import { ALL_SCOPES } from '../auth/principal.js';
import type { Db } from '../db/knex.js';
import { findAgent, findWalletByAgent } from '../db/repositories/agent.repository.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import type { OpenApiDocument, OperationMeta } from '../lib/contract.js';
import { RATE_CLASSES, type RateClass, type RateRule } from '../ratelimit/classes.js';

export const EMITTED_EVENT_TYPES = [
  'payment.executed', 'payment.execution_failed', 'one_off_payment.created', 'conversion.executed', 'conversion.execution_failed',
  'earn.deposit.executed', 'earn.withdraw.executed', 'earn.move.executed', 'rewards.claimed', 'debt.borrowed', 'debt.repaid',
  'debt.deleveraged', 'collateral.added', 'collateral.removed', 'withdrawal.settled', 'withdrawal.execution_failed',
  'agent.webhook_disabled', 'operation.policy_rejected', 'webhook.test',
] as const;
export const TRUSTED_DESTINATION_EVENT_TYPES = ['trusted_destination.confirmed', 'trusted_destination.cancelled', 'trusted_destination.removed'] as const;
export const RESERVED_EVENT_TYPES = [
  'payment.submitted', 'payment.received', 'one_off_payment.claimed', 'one_off_payment.expired', 'withdrawal.submitted', 'deposit.received',
  'recurring_payment.updated', 'recipient.changed', 'agent.limit_approaching', 'agent.limit_reached', 'agent.disabled', 'agent.expired',
  'agent.expiring_soon',
] as const;
export const SUBSCRIBABLE_EVENT_TYPES = [...EMITTED_EVENT_TYPES, ...TRUSTED_DESTINATION_EVENT_TYPES] as const;
export const OPERATION_TYPES = [
  'payment', 'one_off_payment.create', 'withdrawal.bank', 'withdrawal.crypto', 'conversion', 'earn.deposit', 'earn.withdraw', 'earn.move',
  'earn.rewards_claim', 'debt.borrow', 'debt.repay', 'debt.deleverage', 'collateral.add', 'collateral.remove',
  'trusted_destination.confirm', 'trusted_destination.cancel', 'trusted_destination.remove', 'x402.sign', 'x402.purchase',
] as const;

export interface SelfService {
  describe(db: Db, principal: Principal): Promise<Record<string, unknown>>;
  /** The capabilities document, with the caller's effective rate-limit rules. */
  capabilities(rules: Record<RateClass, RateRule>): Record<string, unknown>;
  /** The bundled contract served at /v1/agent/openapi.json, with its strong ETag. */
  publicDocument(): { document: OpenApiDocument; etag: string };
}

export function createSelfService(deps: { document: OpenApiDocument; ops: OperationMeta[] }): SelfService {
  const endpoints = deps.ops
    .filter((op) => op.path.startsWith('/v1/agent'))
    // A public route (openapi.json) has no scope: the document spells that `none`.
    .map((op) => ({ method: op.method.toUpperCase(), path: op.path, operation_id: op.operationId, rate_class: op.rateClass, idempotency: op.idempotency, scope: op.scope ?? 'none' }));
  // Scope descriptions come from the document's OAuth scheme: one source for docs, consent and this.
  const flows = deps.document.components?.securitySchemes?.oauth2?.flows ?? {};
  const scopeText: Record<string, string> = (Object.values(flows)[0] as { scopes?: Record<string, string> } | undefined)?.scopes ?? {};
  const fixed = Object.freeze({
    api_version: 'v1',
    endpoints,
    scopes: ALL_SCOPES.map((scope) => ({ scope, description: scopeText[scope] ?? scope })),
    event_types: { emitted: [...EMITTED_EVENT_TYPES, ...TRUSTED_DESTINATION_EVENT_TYPES], subscribable: [...SUBSCRIBABLE_EVENT_TYPES], reserved: [...RESERVED_EVENT_TYPES] },
    operation_types: [...OPERATION_TYPES],
  });
  const capabilities = (rules: Record<RateClass, RateRule>) => ({
    ...fixed,
    rate_classes: Object.fromEntries(RATE_CLASSES.map((cls) => [cls, { limit: rules[cls].limit, burst: rules[cls].burst, window_seconds: rules[cls].windowSeconds }])),
  });
  const publicDocument = { document: deps.document, etag: `"${sha256Hex(JSON.stringify(deps.document)).slice(0, 32)}"` };
  return {
    async describe(db, principal) {
      const iso = (d: Date | string | null) => (d ? new Date(d).toISOString() : null);
      let agent: { enabled: boolean; starts_at: string | null; ends_at: string | null; created_at: string; address: string | null };
      if (principal.snapshot) {
        const s = principal.snapshot;
        agent = { enabled: s.enabled, starts_at: iso(s.startsAt), ends_at: iso(s.endsAt), created_at: iso(s.createdAt)!, address: s.walletAddress };
      } else {
        const [row, wallet] = await Promise.all([findAgent(db, principal.agentId), findWalletByAgent(db, principal.agentId)]);
        if (!row) throw new ApiError('not_found', 'Agent not found.');
        agent = { enabled: row.enabled, starts_at: iso(row.starts_at), ends_at: iso(row.ends_at), created_at: iso(row.created_at)!, address: wallet?.address ?? null };
      }
      return {
        agent: {
          id: principal.agentId,
          name: principal.agentName,
          owner_id: principal.ownerId,
          enabled: agent.enabled,
          starts_at: agent.starts_at,
          ends_at: agent.ends_at,
          created_at: agent.created_at,
        },
        wallet: { id: principal.walletId, address: agent.address },
        auth: { method: principal.method, scopes: [...principal.scopes], client_id: principal.clientId },
      };
    },
    capabilities,
    publicDocument: () => publicDocument,
  };
}
