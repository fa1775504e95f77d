// agentctl for policy replay and shadow policies (issue 28): replay a candidate over the agent's history, set, drop
// and promote a shadow policy, list its differing decisions.
import type { policyToJson } from '../services/ledger/policy.js';
import { agentPath, readPolicyFile, requireAgent } from './ledger.js';
import { CliUsageError, onDatabase, optionalFlag, parseIntFlag, requireFlag, requirePositional, type CliArgs, type CliCommand } from './types.js';

/** `--since`: `30d`, `12h` (back from `now`) or an ISO 8601 timestamp. */
export function parseSince(raw: string, now: Date): Date {
  const rel = /^(\d{1,4})([dh])$/.exec(raw);
  if (rel) return new Date(now.getTime() - Number(rel[1]) * (rel[2] === 'd' ? 86_400_000 : 3_600_000));
  const date = new Date(raw);
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(date.getTime())) throw new CliUsageError('--since must be like 30d, 12h or an ISO 8601 timestamp');
  return date;
}

const agentOf = (args: CliArgs) => requirePositional(args, 0, 'AGENT_ID');
const shadowOut = async (agentId: string, p: Parameters<typeof policyToJson>[0] | null) => ({ agent_id: agentId, shadow_policy: p ? (await onDatabase()).policyToJson(p) : null });

export const policyCommands: CliCommand[] = [
  {
    name: 'agent replay-policy',
    usage: 'agent replay-policy AGENT_ID --file policy.json --since 30d (what the candidate policy would have decided, as JSON; writes nothing)',
    run: async (ctx, args) => {
      const agentId = agentOf(args);
      await requireAgent(ctx, agentId);
      const since = parseSince(requireFlag(args, 'since'), ctx.clock.now());
      return { ...(await ctx.services.ledger.policy.replay(ctx.db, agentId, { policy: await readPolicyFile(args), since })) };
    },
    http: async (args) => ({
      method: 'POST',
      path: agentPath(args, '/policy/replay'),
      body: { policy: await readPolicyFile(args), since: parseSince(requireFlag(args, 'since'), new Date()).toISOString() },
    }),
  },
  {
    name: 'agent set-shadow-policy',
    usage: 'agent set-shadow-policy AGENT_ID --file policy.json (evaluated beside the live policy on every write, never deciding)',
    run: async (ctx, args) => {
      const agentId = agentOf(args);
      await requireAgent(ctx, agentId);
      return shadowOut(agentId, await ctx.services.ledger.policy.setShadow(ctx.db, agentId, await readPolicyFile(args)));
    },
    http: async (args) => ({ method: 'PUT', path: agentPath(args, '/shadow-policy'), body: await readPolicyFile(args) }),
  },
  {
    name: 'agent drop-shadow-policy',
    usage: 'agent drop-shadow-policy AGENT_ID',
    run: async (ctx, args) => {
      const agentId = agentOf(args);
      await requireAgent(ctx, agentId);
      await ctx.services.ledger.policy.dropShadow(ctx.db, agentId);
      return shadowOut(agentId, null);
    },
    http: (args) => ({ method: 'DELETE', path: agentPath(args, '/shadow-policy') }),
  },
  {
    name: 'agent promote-shadow-policy',
    usage: 'agent promote-shadow-policy AGENT_ID (the shadow policy becomes the live one)',
    run: async (ctx, args) => {
      const agentId = agentOf(args);
      await requireAgent(ctx, agentId);
      return { agent_id: agentId, policy: (await onDatabase()).policyToJson(await ctx.services.ledger.policy.promoteShadow(ctx.db, agentId)) };
    },
    http: (args) => ({ method: 'POST', path: agentPath(args, '/shadow-policy/promote'), body: {} }),
  },
  {
    name: 'agent shadow-decisions',
    usage: 'agent shadow-decisions AGENT_ID [--limit N] [--cursor C]',
    run: async (ctx, args) => {
      const agentId = agentOf(args);
      await requireAgent(ctx, agentId);
      return { agent_id: agentId, ...(await ctx.services.ledger.policy.shadowDecisions(ctx.db, agentId, { cursor: optionalFlag(args, 'cursor'), limit: parseIntFlag(args, 'limit') ?? 50 })) };
    },
    http: (args) => {
      const q = new URLSearchParams();
      const limit = parseIntFlag(args, 'limit');
      if (limit !== undefined) q.set('limit', String(limit));
      const cursor = optionalFlag(args, 'cursor');
      if (cursor) q.set('cursor', cursor);
      return { method: 'GET', path: agentPath(args, `/shadow-decisions${q.size > 0 ? `?${q}` : ''}`) };
    },
  },
];
