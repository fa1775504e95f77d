// The one agent factory behind every harness (test server, ledger, DeFi, webhooks): an owner, an agent and its
// wallet, then by option a policy, ledger funds and generous rate limits, always in that order.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { parseAmount } from '../../src/lib/money.js';
import type { AgentService } from '../../src/services/agent.service.js';
import type { LedgerArea } from '../../src/services/ledger/area.js';

export interface AgentFactoryDeps {
  db: Knex;
  agents: AgentService;
  /** Needed for `policy`, `fund` and `demo`. */
  ledger?: LedgerArea;
}

export interface AgentOptions {
  name?: string;
  /** The owner; a new one (e-mail `<emailPrefix>-<random>@example.com`) when absent. */
  ownerId?: string;
  emailPrefix?: string;
  startsAt?: Date | null;
  endsAt?: Date | null;
  /** 'all' for an allow-all policy, a policy document, or null/absent for none. */
  policy?: 'all' | Record<string, unknown> | null;
  /** The embedded demo's policy and funds (ledger.setupDemoAgent), instead of `policy` and `fund`. */
  demo?: boolean;
  /** Ledger funds per asset symbol, as decimal strings. */
  fund?: Record<string, string>;
  /** 'account' records a funding (ledger.account.fund); 'deposit' credits the wallet directly (ledger.ledger.deposit). */
  fundVia?: 'account' | 'deposit';
  /** Limit and burst (per 60 s) for each rate-limit class named. */
  rateLimit?: { limit: number; classes: readonly string[] };
}

export interface CreatedTestAgent {
  agentId: string;
  walletId: string;
  ownerId: string;
  apiKey: string;
}

export async function createTestAgent({ db, agents, ledger }: AgentFactoryDeps, opts: AgentOptions = {}): Promise<CreatedTestAgent> {
  const ownerId = opts.ownerId ?? (await agents.createOwner(db, { email: `${opts.emailPrefix ?? 'owner'}-${randomBytes(6).toString('hex')}@example.com` })).owner_id;
  const created = await agents.createAgent(db, { ownerId, name: opts.name ?? 'test agent', startsAt: opts.startsAt ?? null, endsAt: opts.endsAt ?? null });
  const agent = { agentId: created.agent_id, walletId: created.wallet_id, ownerId, apiKey: created.api_key };
  const needsLedger = () => {
    if (!ledger) throw new Error('createTestAgent: policy, funds and the demo set-up need the ledger area');
    return ledger;
  };
  if (opts.demo) await needsLedger().setupDemoAgent(db, { agentId: agent.agentId, walletId: agent.walletId });
  if (opts.policy === 'all') await needsLedger().policy.allowAll(db, agent.agentId);
  else if (opts.policy) await needsLedger().policy.set(db, agent.agentId, opts.policy);
  for (const [asset, amount] of Object.entries(opts.fund ?? {})) {
    const area = needsLedger();
    if (opts.fundVia === 'deposit') {
      const row = await area.ledger.requireAsset(db, asset);
      await area.ledger.deposit(db, { walletId: agent.walletId, asset, amount: parseAmount(amount, row.decimals) });
    } else {
      await area.account.fund(db, agent.agentId, { asset, amount });
    }
  }
  for (const cls of opts.rateLimit?.classes ?? []) await agents.setRateLimit(db, agent.agentId, { class: cls, limit: opts.rateLimit!.limit, burst: opts.rateLimit!.limit, windowSeconds: 60 });
  return agent;
}
