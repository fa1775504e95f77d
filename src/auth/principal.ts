// Who is calling: one agent and its wallet, by header key or OAuth bearer token.

export type AuthMethod = 'api_key' | 'oauth';

export interface Principal {
  agentId: string;
  walletId: string;
  ownerId: string;
  agentName: string;
  method: AuthMethod;
  /** Granted scopes; header keys hold every scope. */
  scopes: ReadonlySet<string>;
  clientId: string | null;
  grantId: string | null;
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

export function hasScope(principal: Principal, scope: string): boolean {
  return principal.scopes.has(scope);
}
