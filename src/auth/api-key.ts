// Header-key authentication (spec 5.1) in the order of contract §3, and layer-two agent checks shared with OAuth.
import type { Db } from '../db/knex.js';
import { findAuthRow, type AuthRow } from '../db/repositories/agent.repository.js';
import type { Clock } from '../lib/clock.js';
import { constantTimeEqual, sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { isUuid } from '../lib/ids.js';
import { ALL_SCOPES, type AgentSnapshot, type Principal } from './principal.js';

const HEADER_KEY_SCOPES: ReadonlySet<string> = new Set(ALL_SCOPES);

export function snapshotOf(row: AuthRow): AgentSnapshot {
  return {
    enabled: row.agent.enabled,
    startsAt: row.agent.starts_at ? new Date(row.agent.starts_at) : null,
    endsAt: row.agent.ends_at ? new Date(row.agent.ends_at) : null,
    createdAt: new Date(row.agent.created_at),
    walletAddress: row.wallet_address,
    rateOverrides: row.rate_overrides,
  };
}

export interface Authenticated {
  principal: Principal;
  row: AuthRow;
}

const fail = () => new ApiError('authentication_failed', 'Missing or invalid agent credentials.');

// A well-formed hash to compare against when the agent does not exist, so timing does not tell.
const DUMMY_HASH = sha256Hex('agent-api:no-such-agent');

/** Agent state checks that apply to every credential (spec 5.1 codes; only after the credential matched). */
export function assertAgentActive(row: AuthRow, now: Date): void {
  const { agent } = row;
  if (!agent.enabled) throw new ApiError('agent_disabled', 'This agent is disabled by its owner.');
  if (agent.starts_at && now < new Date(agent.starts_at)) {
    throw new ApiError('agent_not_yet_active', `This agent's activation window starts at ${new Date(agent.starts_at).toISOString()}.`);
  }
  if (agent.ends_at && now >= new Date(agent.ends_at)) {
    throw new ApiError('agent_expired', `This agent's activation window ended at ${new Date(agent.ends_at).toISOString()}.`);
  }
}

export function createApiKeyAuthenticator(deps: { db: Db; clock: Clock }) {
  return async function authenticate(agentIdHeader: string | undefined, apiKeyHeader: string | undefined): Promise<Authenticated> {
    if (!agentIdHeader || !apiKeyHeader) throw fail();
    if (!isUuid(agentIdHeader) || apiKeyHeader.length > 256) throw fail();
    const row = await findAuthRow(deps.db, agentIdHeader.toLowerCase());
    const presented = sha256Hex(apiKeyHeader);
    if (!row) {
      constantTimeEqual(presented, DUMMY_HASH);
      throw fail();
    }
    if (!constantTimeEqual(presented, row.agent.api_key_hash)) throw fail();
    if (!row.owner_exists || row.owner_deleted_at) throw fail();
    assertAgentActive(row, deps.clock.now());
    return {
      row,
      principal: {
        agentId: row.agent.id,
        walletId: row.wallet_id,
        ownerId: row.agent.owner_id,
        agentName: row.agent.name,
        method: 'api_key',
        scopes: HEADER_KEY_SCOPES,
        clientId: null,
        grantId: null,
        snapshot: snapshotOf(row),
      },
    };
  };
}
