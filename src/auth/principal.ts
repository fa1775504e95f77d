// Who is calling: one agent and its wallet, by header key or OAuth bearer token; or, on /v1/owner and
// /v1/admin, an owner (owner token) or the operator (admin token).

export type AuthMethod = 'api_key' | 'oauth' | 'owner_token' | 'owner_session' | 'admin_token';

export interface Principal {
  /**
   * The agent; for owner and admin principals the subject that rate limits and idempotency keys
   * belong to (the owner id, or ADMIN_SUBJECT).
   */
  agentId: string;
  walletId: string;
  ownerId: string;
  agentName: string;
  method: AuthMethod;
  /** Granted scopes; header keys hold every scope. */
  scopes: ReadonlySet<string>;
  clientId: string | null;
  grantId: string | null;
  /** The owner token used (owner principals only), for the audit log. */
  ownerTokenId?: string | null;
  /** The agent as authentication read it (one query per request serves auth, limits and /self). */
  snapshot?: AgentSnapshot;
}

export interface AgentSnapshot {
  enabled: boolean;
  startsAt: Date | null;
  endsAt: Date | null;
  createdAt: Date;
  walletAddress: string | null;
  rateOverrides: { class: string; limit: number; burst: number; window_seconds: number }[];
}

export const ALL_SCOPES = [
  'agent:read',
  'agent:simulate',
  'agent:payments:write',
  'agent:conversions:write',
  'agent:withdrawals:write',
  'agent:earn:write',
  'agent:borrow:write',
  'agent:trusted_destinations:write',
  'agent:webhooks:manage',
] as const;

export type Scope = (typeof ALL_SCOPES)[number];

/** The rate-limit and idempotency subject of the admin token (no owner or agent has the nil UUID). */
export const ADMIN_SUBJECT = '00000000-0000-0000-0000-000000000000';
