// Embedded first start: a demo owner and agent whose credentials are printed once.
import type { Knex } from 'knex';
import type { Services } from './services/registry.js';

export type DemoSetupHook = (db: Knex, services: Services, agent: { agentId: string; walletId: string; ownerId: string }) => Promise<void>;

/** Creates the demo agent when the database has no agent yet; returns the line to print, or null. */
export async function ensureDemoAgent(db: Knex, services: Services, hooks: DemoSetupHook[] = []): Promise<string | null> {
  const existing = await db('agents').count<{ count: string | number }[]>('* as count').first();
  if (Number(existing?.count ?? 0) > 0) return null;
  const { owner_id } = await services.agents.createOwner(db, { email: 'demo@example.com', name: 'Demo owner' });
  const created = await services.agents.createAgent(db, { ownerId: owner_id, name: 'Demo agent' });
  for (const hook of hooks) await hook(db, services, { agentId: created.agent_id, walletId: created.wallet_id, ownerId: owner_id });
  return `demo agent: x-agent-id=${created.agent_id} x-api-key=${created.api_key}`;
}
