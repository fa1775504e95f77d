// Shadow policies (issue 28): a candidate policy beside the live one. Every write evaluates it under the same policy
// lock, after the live decision, with the same rules (policy-rules.ts); it never decides. Each write on which the two
// differ is a shadow_decisions row. Promoting the shadow makes it the live policy in one owner action.
import { savepoint, withTransaction, type Db } from '../../db/knex.js';
import { findPolicy, findPolicyForUpdate, setShadowPolicy, sumUsage, type LockedUsage } from '../../db/repositories/policy.repository.js';
import { insertShadowDecision, listShadowDecisions, type ShadowDecisionRow } from '../../db/repositories/shadow-decision.repository.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { formatAmount } from '../../lib/money.js';
import { USD_DECIMALS } from './ledger.js';
import { parsePolicy, periodStart, policyToJson, type Policy, type PolicyRequest } from './policy-document.js';
import { decidePolicy, usageNeeds, type LockedPolicy, type RuleDecision } from './policy-rules.js';

export interface ShadowDecision {
  id: string;
  operation_id: string;
  operation_type: string;
  asset: string | null;
  amount_usd: string | null;
  live: { allowed: boolean; code: string | null; key: string | null };
  shadow: { allowed: boolean; code: string | null; key: string | null; message: string | null };
  shadow_policy: Record<string, unknown>;
  created_at: string;
}

export interface ShadowPolicyService {
  /**
   * Evaluates the locked row's shadow policy for a write the live policy just decided (`live`), and records the
   * decision when it differs. Never throws and never changes the write: its statements run in a savepoint, and a
   * failure is rolled back to it and logged.
   */
  shadow(trx: Db, write: { agentId: string; operationId: string; request: PolicyRequest; live: RuleDecision; locked: LockedPolicy }): Promise<void>;
  getShadow(db: Db, agentId: string): Promise<Policy | null>;
  /** The agent must have a live policy (`invalid_state_transition` otherwise). */
  setShadow(db: Db, agentId: string, input: unknown): Promise<Policy>;
  /** False when there was none. */
  dropShadow(db: Db, agentId: string): Promise<boolean>;
  /** The shadow becomes the live policy (through `set`: in evm mode the owner's signature goes to the account). */
  promoteShadow(db: Db, agentId: string, signature?: unknown): Promise<Policy>;
  shadowDecisions(db: Db, agentId: string, page: { cursor?: string; limit: number }): Promise<{ decisions: ShadowDecision[]; next_cursor: string | null }>;
}

const usdOf = (v: string | null) => (v === null ? null : formatAmount(BigInt(v), USD_DECIMALS));

function toPublic(r: ShadowDecisionRow): ShadowDecision {
  return {
    id: String(r.id),
    operation_id: r.operation_id,
    operation_type: r.operation_type,
    asset: r.asset_symbol,
    amount_usd: usdOf(r.amount_usd_e8),
    live: { allowed: r.live_allowed, code: r.live_code, key: r.live_key },
    shadow: { allowed: r.shadow_allowed, code: r.shadow_code, key: r.shadow_key, message: r.shadow_message },
    shadow_policy: r.shadow_policy,
    created_at: r.created_at.toISOString(),
  };
}

/** Whether two decisions differ: in outcome, or in the refusal's code. */
const differs = (a: RuleDecision, b: RuleDecision) => a.allowed !== b.allowed || (!a.allowed && !b.allowed && a.code !== b.code);

export function createShadowPolicies(deps: {
  clock: Clock;
  log?: Logger;
  setLive: (db: Db, agentId: string, input: unknown, signature?: unknown) => Promise<Policy>;
  /** The policy service's parse cache (policy-document.ts createParsedPolicyCache). */
  parsedPolicy: (stored: Record<string, unknown>) => Policy;
}): ShadowPolicyService {
  const { clock, parsedPolicy } = deps;

  /** The usage the shadow's caps need: the lock's sums when they cover the same window, else read now (under the lock). */
  async function usageFor(trx: Db, agentId: string, shadow: Policy, locked: LockedPolicy): Promise<LockedUsage> {
    const needs = usageNeeds(shadow);
    const live = locked.row ? parsedPolicy(locked.row.policy) : null;
    const period = needs.period ? (live?.period === shadow.period ? locked.usage.period : null) : null;
    const lifetime = needs.lifetime ? locked.usage.lifetime : null;
    // The last counted operation's time is read by the lock only when the live policy has a cooldown.
    const lastKnown = !needs.last || live?.tx_cooldown_blocks !== undefined;
    if ((needs.period && !period) || (needs.lifetime && !lifetime) || !lastKnown) return sumUsage(trx, agentId, needs.period ? periodStart(shadow.period, locked.at) : null, needs.lifetime);
    return { period, lifetime, lastCountedAt: locked.usage.lastCountedAt };
  }

  return {
    async shadow(trx, { agentId, operationId, request, live, locked }) {
      const stored = locked.row?.shadow_policy;
      if (!stored) return;
      try {
        await savepoint(trx, async (sp) => {
          const shadow = parsedPolicy(stored);
          const decision = decidePolicy(shadow, request, await usageFor(sp, agentId, shadow, locked), locked.at);
          if (!differs(live, decision)) return;
          await insertShadowDecision(sp, {
            agent_id: agentId,
            operation_id: operationId,
            operation_type: request.type,
            asset_symbol: request.asset ?? null,
            amount_usd_e8: request.usdE8 ?? null,
            live_allowed: live.allowed,
            live_code: live.allowed ? null : live.code,
            live_key: live.key,
            shadow_allowed: decision.allowed,
            shadow_code: decision.allowed ? null : decision.code,
            shadow_key: decision.key,
            shadow_message: decision.allowed ? null : decision.message,
            shadow_policy: stored,
            created_at: locked.at,
          });
        });
      } catch (err) {
        deps.log?.warn({ err, agent_id: agentId, operation_id: operationId }, 'shadow policy evaluation failed; the write is unaffected');
      }
    },

    async getShadow(db, agentId) {
      const row = await findPolicy(db, agentId);
      return row?.shadow_policy ? parsePolicy(row.shadow_policy) : null;
    },

    async setShadow(db, agentId, input) {
      const policy = parsePolicy(input);
      if (!(await setShadowPolicy(db, agentId, policyToJson(policy), clock.now())))
        throw new ApiError('invalid_state_transition', 'the agent has no policy yet: set its policy before a shadow policy');
      return policy;
    },

    dropShadow: (db, agentId) => withTransaction(db, async (trx) => Boolean((await findPolicyForUpdate(trx, agentId))?.shadow_policy) && setShadowPolicy(trx, agentId, null, clock.now())),

    promoteShadow: (db, agentId, signature) =>
      withTransaction(db, async (trx) => {
        // The writes' lock: no write decides between the live policy changing and the shadow being dropped.
        const row = await findPolicyForUpdate(trx, agentId);
        if (!row?.shadow_policy) throw new ApiError('not_found', 'the agent has no shadow policy to promote');
        const policy = await deps.setLive(trx, agentId, row.shadow_policy, signature);
        await setShadowPolicy(trx, agentId, null, clock.now());
        return policy;
      }),

    async shadowDecisions(db, agentId, page) {
      const before = page.cursor === undefined ? undefined : Number(page.cursor);
      if (before !== undefined && !(Number.isSafeInteger(before) && before > 0)) throw new ApiError('validation_failed', 'cursor must be the next_cursor of a previous page', { field: 'cursor' });
      const rows = await listShadowDecisions(db, agentId, { before, limit: page.limit + 1 });
      const more = rows.length > page.limit;
      const shown = rows.slice(0, page.limit);
      return { decisions: shown.map(toPublic), next_cursor: more ? String(shown.at(-1)!.id) : null };
    },
  };
}
