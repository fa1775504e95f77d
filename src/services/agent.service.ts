// Owners and agents: creation, API keys (shown once, stored as SHA-256), windows, rate-limit overrides.
import { randomBytes } from 'node:crypto';
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/agent.repository.js';
import type { Clock } from '../lib/clock.js';
import { sha256Hex } from '../lib/crypto.js';
import { ApiError } from '../lib/errors.js';
import { newId, newWalletId } from '../lib/ids.js';

export const API_KEY_PREFIX = 'agk_';

export interface CreatedAgent {
  agent_id: string;
  wallet_id: string;
  api_key: string;
}

export interface AgentService {
  createOwner(db: Db, input: { email: string; name?: string; signerAddress?: string | null }): Promise<{ owner_id: string; signer_address?: string }>;
  deleteOwner(db: Db, ownerId: string): Promise<void>;
  createAgent(db: Db, input: { ownerId: string; name: string; startsAt?: Date | null; endsAt?: Date | null }): Promise<CreatedAgent>;
  setEnabled(db: Db, agentId: string, enabled: boolean): Promise<void>;
  rotateKey(db: Db, agentId: string): Promise<{ api_key: string }>;
  setWindow(db: Db, agentId: string, startsAt: Date | null, endsAt: Date | null): Promise<void>;
  setRateLimit(db: Db, agentId: string, input: { class: string; limit: number; burst: number; windowSeconds: number }): Promise<void>;
}

/** Hooks other areas run when an agent is created (the ledger gives the wallet a key, for example). */
export type AgentCreatedHook = (db: Db, created: { agentId: string; walletId: string; ownerId: string }) => Promise<void>;

export function generateApiKey(): { key: string; hash: string; prefix: string } {
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: sha256Hex(key), prefix: key.slice(0, 12) };
}

export function createAgentService(deps: { clock: Clock; onAgentCreated?: AgentCreatedHook[] }): AgentService {
  const { clock } = deps;
  const notFound = (what: string, id: string) => new Error(`${what} ${id} not found`);

  return {
    async createOwner(db, input) {
      const id = newId();
      const signer = input.signerAddress ?? null;
      if (signer !== null && !/^0x[0-9a-fA-F]{40}$/.test(signer))
        throw new ApiError('validation_failed', 'signer_address must be a 0x EVM address', { errors: [{ location: 'body', path: '/signer_address', message: 'must be a 0x EVM address' }] });
      await repo.insertOwner(db, { id, email: input.email, name: input.name ?? null, signer_address: signer });
      return signer === null ? { owner_id: id } : { owner_id: id, signer_address: signer };
    },

    async deleteOwner(db, ownerId) {
      if ((await repo.softDeleteOwner(db, ownerId, clock.now())) === 0) throw notFound('owner', ownerId);
    },

    async createAgent(db, input) {
      return withTransaction(db, async (trx) => {
        const owner = await repo.findOwner(trx, input.ownerId);
        if (!owner || owner.deleted_at) throw notFound('owner', input.ownerId);
        const now = clock.now();
        const agentId = newId();
        const walletId = newWalletId();
        const { key, hash, prefix } = generateApiKey();
        await repo.insertAgent(trx, {
          id: agentId,
          owner_id: input.ownerId,
          name: input.name,
          enabled: true,
          starts_at: input.startsAt ?? null,
          ends_at: input.endsAt ?? null,
          api_key_hash: hash,
          api_key_prefix: prefix,
          created_at: now,
          updated_at: now,
        });
        await repo.insertWallet(trx, { id: walletId, agent_id: agentId, address: null, sealed_private_key: null, created_at: now });
        for (const hook of deps.onAgentCreated ?? []) await hook(trx, { agentId, walletId, ownerId: input.ownerId });
        return { agent_id: agentId, wallet_id: walletId, api_key: key };
      });
    },

    async setEnabled(db, agentId, enabled) {
      if ((await repo.updateAgent(db, agentId, { enabled, updated_at: clock.now() })) === 0) throw notFound('agent', agentId);
    },

    async rotateKey(db, agentId) {
      const { key, hash, prefix } = generateApiKey();
      if ((await repo.updateAgent(db, agentId, { api_key_hash: hash, api_key_prefix: prefix, updated_at: clock.now() })) === 0) throw notFound('agent', agentId);
      return { api_key: key };
    },

    async setWindow(db, agentId, startsAt, endsAt) {
      if ((await repo.updateAgent(db, agentId, { starts_at: startsAt, ends_at: endsAt, updated_at: clock.now() })) === 0) throw notFound('agent', agentId);
    },

    async setRateLimit(db, agentId, input) {
      if (!(await repo.findAgent(db, agentId))) throw notFound('agent', agentId);
      await repo.upsertRateLimitOverride(db, { agent_id: agentId, class: input.class, limit: input.limit, burst: input.burst, window_seconds: input.windowSeconds });
    },
  };
}
