// The owner's overview (issue 27, the console): per agent its balances in USD, what its caps still allow, its pending
// approvals and its exposure in evm mode; and one agent's USD spent per UTC day, the spending chart's series.
import type { Db } from '../db/knex.js';
import { countPendingApprovals } from '../db/repositories/approval.repository.js';
import { sumUsageByDay } from '../db/repositories/policy.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Schema } from '../lib/contract.js';
import { formatAmount, parseAmount } from '../lib/money.js';
import type { AccountService } from './defi/account.service.js';
import { USD_DECIMALS } from './ledger/ledger.js';
import type { PolicyService } from './ledger/policy.js';
import type { OwnerActor, OwnerPageQuery, OwnerService } from './owner.service.js';

export type OwnerOverviewView = Omit<Schema<'OwnerOverview'>, 'ok'>;
export type OwnerSpendingView = Omit<Schema<'OwnerSpending'>, 'ok'>;

export interface OwnerOverviewService {
  overview(db: Db, actor: OwnerActor, query: OwnerPageQuery): Promise<OwnerOverviewView>;
  /** `days` UTC days ending today (the clock's), each listed, oldest first. */
  spending(db: Db, actor: OwnerActor, agentId: string, days: number): Promise<OwnerSpendingView>;
}

const DAY_MS = 86_400_000;
const toUnits = (usd: string) => parseAmount(usd, USD_DECIMALS);
const usd = (units: bigint) => formatAmount(units, USD_DECIMALS);
/** What a cap still allows: null without a cap, never below zero. */
const remaining = (cap: string | null, used: string) => (cap === null ? null : usd(((left) => (left > 0n ? left : 0n))(toUnits(cap) - toUnits(used))));

export function createOwnerOverviewService(deps: { clock: Clock; owner: OwnerService; account: AccountService; policy: PolicyService }): OwnerOverviewService {
  return {
    async overview(db, actor, query) {
      const page = await deps.owner.listAgents(db, actor, query);
      const pending = await countPendingApprovals(
        db,
        page.items.map((a) => a.agent_id),
      );
      let total = 0n;
      const items: OwnerOverviewView['items'] = [];
      for (const agent of page.items) {
        const balances = await deps.account.listBalances(db, { agentId: agent.agent_id, walletId: agent.wallet_id }, { limit: 100 });
        const held = balances.items.filter((b) => b.total !== '0').map((b) => ({ asset: b.asset_symbol as string, amount: b.total as string, value_usd: (b.value_usd as string | null) ?? null }));
        const agentTotal = held.reduce((t, b) => t + (b.value_usd === null ? 0n : toUnits(b.value_usd)), 0n);
        total += agentTotal;
        const { limits, usage, exposure_usd } = await deps.policy.allowance(db, agent.agent_id);
        items.push({
          agent_id: agent.agent_id,
          name: agent.name,
          status: agent.status,
          balances: held,
          total_usd: usd(agentTotal),
          period: limits.period,
          period_start: usage.period_start,
          per_period_usd: limits.per_period_usd,
          period_spent_usd: usage.period_usd,
          period_remaining_usd: remaining(limits.per_period_usd, usage.period_usd),
          lifetime_usd: limits.lifetime_usd,
          lifetime_spent_usd: usage.lifetime_usd,
          lifetime_remaining_usd: remaining(limits.lifetime_usd, usage.lifetime_usd),
          pending_approvals: pending.get(agent.agent_id) ?? 0,
          exposure_usd,
        });
      }
      return { total_usd: usd(total), items, next_cursor: page.next_cursor, has_more: page.has_more };
    },

    async spending(db, actor, agentId, days) {
      await deps.owner.requireAgent(db, actor, agentId);
      const today = Date.parse(`${deps.clock.now().toISOString().slice(0, 10)}T00:00:00Z`);
      const first = today - (days - 1) * DAY_MS;
      const found = new Map((await sumUsageByDay(db, agentId, new Date(first))).map((d) => [d.date, d]));
      const series: OwnerSpendingView['days'] = [];
      for (let t = first; t <= today; t += DAY_MS) {
        const date = new Date(t).toISOString().slice(0, 10);
        const d = found.get(date);
        series.push({ date, spent_usd: usd(d?.usd_e8 ?? 0n), txs: d?.count ?? 0 });
      }
      const { limits } = await deps.policy.allowance(db, agentId);
      return { agent_id: agentId, period: limits.period, per_period_usd: limits.per_period_usd, days: series };
    },
  };
}
