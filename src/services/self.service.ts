// The authenticated context (GET /self) and the capabilities document generated from the contract.
import type { Principal } from '../auth/principal.js';
import type { Db } from '../db/knex.js';
import { findAgent, findWalletByAgent } from '../db/repositories/agent.repository.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import type { OpenApiDocument, OperationMeta, Schema } from '../lib/contract.js';
import { surfaceDocument } from '../lib/document-surface.js';
import { EVENT_TYPES, OPERATION_TYPES, SCOPES, SUBSCRIBABLE_EVENT_TYPES } from '../../generated/vocabulary.js';
import type { RateClass, RateRule } from '../ratelimit/classes.js';

/** The reserved event types: documented (`EventType`) but not subscribable in v1 (contract §11). */
const RESERVED_EVENT_TYPES = EVENT_TYPES.filter((type) => !(SUBSCRIBABLE_EVENT_TYPES as readonly string[]).includes(type));

/** GET /self without its `ok`. */
export type SelfDescription = Omit<Schema<'AgentSelf'>, 'ok'>;
/** GET /capabilities without its `ok`. */
export type CapabilitiesDocument = Omit<Schema<'Capabilities'>, 'ok'>;

type Endpoint = Schema<'CapabilityEndpoint'>;

/**
 * An operation as the capabilities list it. The document's method keys and `x-required-scope`
 * values are what Redocly lints (redocly.yaml), so they are the schema's enums.
 */
const endpointOf = (op: OperationMeta, doc: OpenApiDocument): Endpoint => {
  const raw = (doc.paths?.[op.path] as OpenApiDocument | undefined)?.[op.method] as OpenApiDocument | undefined;
  return {
    method: op.method.toUpperCase() as Endpoint['method'],
    path: op.path,
    operation_id: op.operationId,
    rate_class: op.rateClass,
    idempotency: op.idempotency,
    // A public route (openapi.json) has no scope: the document spells that `none`.
    scope: (op.scope ?? 'none') as Endpoint['scope'],
    // Hightop's names for the same facts, and the schemas a client generator would use (issue 26, item 9).
    description: typeof raw?.summary === 'string' ? raw.summary : op.operationId,
    rate_limit_class: op.rateClass,
    idempotency_required: op.idempotency === 'required',
    request_schema: schemaName(raw?.requestBody?.content?.['application/json']?.schema),
    response_schema: schemaName(successResponse(raw)?.content?.['application/json']?.schema),
  };
};

/** The first 2xx response of an operation. */
function successResponse(raw: OpenApiDocument | undefined): OpenApiDocument | undefined {
  const responses = (raw?.responses ?? {}) as Record<string, OpenApiDocument>;
  const status = Object.keys(responses).find((code) => /^2\d\d$/.test(code));
  return status ? responses[status] : undefined;
}

/** `#/components/schemas/Name` -> `Name`; a schema written in place has no name. */
function schemaName(schema: unknown): string | null {
  const ref = (schema as { $ref?: unknown } | undefined)?.$ref;
  return typeof ref === 'string' && ref.startsWith('#/components/schemas/') ? ref.slice('#/components/schemas/'.length) : null;
}

const isScope = (scope: string): scope is Schema<'Scope'> => (SCOPES as readonly string[]).includes(scope);

export interface SelfService {
  /** `rules`: the agent's effective rate-limit rules (Hightop's `limits`). */
  describe(db: Db, principal: Principal, rules: Record<RateClass, RateRule>): Promise<SelfDescription>;
  /** The capabilities document, with the caller's effective rate-limit rules. */
  capabilities(rules: Record<RateClass, RateRule>): CapabilitiesDocument;
  /**
   * A public document with its strong ETag: the agent's surface (GET /v1/agent/openapi.json), the owner's
   * (/v1/owner/openapi.json) or the whole bundled contract (`full`, /v1/admin/openapi.json).
   */
  publicDocument(which?: 'agent' | 'owner' | 'full'): ServedDocument;
}

export interface ServedDocument {
  document: OpenApiDocument;
  etag: string;
}

const served = (document: OpenApiDocument): ServedDocument => ({ document, etag: `"${sha256Hex(JSON.stringify(document)).slice(0, 32)}"` });

export function createSelfService(deps: { document: OpenApiDocument; ops: OperationMeta[] }): SelfService {
  const endpoints = deps.ops.filter((op) => op.path.startsWith('/v1/agent')).map((op) => endpointOf(op, deps.document));
  // Scope descriptions come from the document's OAuth scheme: one source for docs, consent and this.
  const flows = deps.document.components?.securitySchemes?.oauth2?.flows ?? {};
  const scopeText: Record<string, string> = (Object.values(flows)[0] as { scopes?: Record<string, string> } | undefined)?.scopes ?? {};
  const fixed = Object.freeze({
    api_version: 'v1' as const,
    agent_api_contract_version: String((deps.document.info as { version?: unknown } | undefined)?.version ?? ''),
    base_path: '/v1/agent' as const,
    endpoints,
    scopes: SCOPES.map((scope) => ({ scope, description: scopeText[scope] ?? scope })),
    // Every subscribable type is emitted in v1 (payments, DeFi, withdrawals, trusted destinations, webhooks).
    event_types: { emitted: [...SUBSCRIBABLE_EVENT_TYPES], subscribable: [...SUBSCRIBABLE_EVENT_TYPES], reserved: RESERVED_EVENT_TYPES },
    webhook_event_types: [...EVENT_TYPES],
    subscribable_webhook_event_types: [...SUBSCRIBABLE_EVENT_TYPES],
    operation_types: [...OPERATION_TYPES],
  });
  const selfRule = (rule: RateRule) => ({ limit: rule.limit, burst: rule.burst, windowSeconds: rule.windowSeconds });
  const definition = (rule: RateRule) => ({ limit: rule.limit, burst: rule.burst, window_seconds: rule.windowSeconds });
  const capabilities = (rules: Record<RateClass, RateRule>): CapabilitiesDocument => ({
    ...fixed,
    // In the order of RATE_CLASSES (the document's), one key per class: the schema requires each.
    rate_classes: {
      read: definition(rules.read),
      write: definition(rules.write),
      simulate: definition(rules.simulate),
      webhook_management: definition(rules.webhook_management),
      bulk_write: definition(rules.bulk_write),
    },
  });
  // Built on first request: the agent's surface is ~0.3 MB of JSON to walk, the others are rarer still.
  const documents: Partial<Record<'agent' | 'owner' | 'full', ServedDocument>> = {};
  const publicDocument = (which: 'agent' | 'owner' | 'full' = 'agent'): ServedDocument =>
    (documents[which] ??= served(which === 'full' ? deps.document : surfaceDocument(deps.document, which === 'agent' ? '/v1/agent' : '/v1/owner')));
  return {
    async describe(db, principal, rules) {
      // GET /self is an agent route: owner and admin credentials never reach it.
      const { method } = principal;
      if (method !== 'api_key' && method !== 'oauth') throw new ApiError('not_found', 'Agent not found.');
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
          wallet_address: agent.address,
          active_window: { starts_at: agent.starts_at, expires_at: agent.ends_at },
        },
        wallet: { id: principal.walletId, address: agent.address },
        // Tokens carry only the provider's configured scopes (SCOPES); header keys hold all of them.
        auth: { method, scopes: [...principal.scopes].filter(isScope), client_id: principal.clientId },
        // Hightop's members (issue 26, item 4): the global catalogue, the rate-limit classes, two reserved members.
        permissions: { operation_types: [...OPERATION_TYPES], webhook_event_types: [...EVENT_TYPES] },
        limits: {
          read: selfRule(rules.read),
          write: selfRule(rules.write),
          simulate: selfRule(rules.simulate),
          webhook_management: selfRule(rules.webhook_management),
          bulk_write: selfRule(rules.bulk_write),
        },
        cannot: [],
        current_usage: {},
      };
    },
    capabilities,
    publicDocument,
  };
}
