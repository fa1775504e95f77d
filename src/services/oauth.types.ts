// The OAuth service's interface, beside the registry that lists it: its implementation lives with the
// authorization server (src/oauth/oauth.service.ts), which services must not import.
import type { Db } from '../db/knex.js';

export interface ThrottleDecision {
  allowed: boolean;
  retryAfterSeconds: number;
}

export type CodeCheck = { ok: true; ownerId: string } | { ok: false; reason: 'no_code' | 'invalid' | 'locked' | 'expired'; attemptsLeft: number };

export interface GrantSummary {
  grant_id: string;
  client_id: string;
  client_name: string | null;
  agent_id: string;
  agent_name: string;
  resource: string;
  scope: string[];
  status: 'active' | 'revoked';
  created_at: string;
  revoked_at: string | null;
  revoked_reason: string | null;
  /** Last time an access token of this grant was accepted (to the minute); null when never. */
  last_used_at: string | null;
}

export interface OAuthService {
  addClient(db: Db, input: { name: string; redirectUris: string[] }): Promise<{ client_id: string }>;
  rotateKeys(db: Db): Promise<{ kid: string; retired: string[] }>;
  listGrants(db: Db, ownerId: string): Promise<GrantSummary[]>;
  revokeGrant(db: Db, grantId: string): Promise<{ grant_id: string; revoked: boolean }>;
  throttle(db: Db, key: string, rule: { limit: number; windowMs: number }): Promise<ThrottleDecision>;
  requestLoginCode(db: Db, input: { interactionUid: string; email: string; clientName: string }): Promise<{ throttled: boolean }>;
  verifyLoginCode(db: Db, input: { interactionUid: string; code: string }): Promise<CodeCheck>;
  /** The owner signed in for this interaction, if the latest code was verified. */
  signedInOwner(db: Db, interactionUid: string): Promise<string | undefined>;
  bindGrant(db: Db, input: { grantId: string; clientId: string; ownerId: string; agentId: string; resource: string; scopes: string[] }): Promise<void>;
  ownerAgents(db: Db, ownerId: string): Promise<{ id: string; name: string; enabled: boolean }[]>;
}
