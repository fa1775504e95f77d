// agentctl: owners, agents, keys, activation windows and rate-limit overrides.
import { RATE_CLASSES } from '../ratelimit/classes.js';
import { CliUsageError, parseDateFlag, parseIntFlag, requireFlag, requirePositional, optionalFlag, type CliCommand } from './types.js';

export const foundationCommands: CliCommand[] = [
  {
    name: 'owner create',
    usage: 'owner create --email E [--name N]',
    run: (ctx, args) => ctx.services.agents.createOwner(ctx.db, { email: requireFlag(args, 'email'), name: optionalFlag(args, 'name') }),
  },
  {
    name: 'owner delete',
    usage: 'owner delete OWNER_ID',
    run: async (ctx, args) => {
      const ownerId = requirePositional(args, 0, 'OWNER_ID');
      await ctx.services.agents.deleteOwner(ctx.db, ownerId);
      return { owner_id: ownerId, deleted: true };
    },
  },
  {
    name: 'agent create',
    usage: 'agent create --owner OWNER_ID --name N [--starts-at ISO] [--ends-at ISO]',
    run: async (ctx, args) => {
      const created = await ctx.services.agents.createAgent(ctx.db, {
        ownerId: requireFlag(args, 'owner'),
        name: requireFlag(args, 'name'),
        startsAt: parseDateFlag(args, 'starts-at') ?? null,
        endsAt: parseDateFlag(args, 'ends-at') ?? null,
      });
      return { ...created };
    },
  },
  {
    name: 'agent disable',
    usage: 'agent disable AGENT_ID',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await ctx.services.agents.setEnabled(ctx.db, agentId, false);
      return { agent_id: agentId, enabled: false };
    },
  },
  {
    name: 'agent enable',
    usage: 'agent enable AGENT_ID',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await ctx.services.agents.setEnabled(ctx.db, agentId, true);
      return { agent_id: agentId, enabled: true };
    },
  },
  {
    name: 'agent rotate-key',
    usage: 'agent rotate-key AGENT_ID',
    run: async (ctx, args) => ({ ...(await ctx.services.agents.rotateKey(ctx.db, requirePositional(args, 0, 'AGENT_ID'))) }),
  },
  {
    name: 'agent set-window',
    usage: 'agent set-window AGENT_ID --starts-at ISO --ends-at ISO',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      const startsAt = parseDateFlag(args, 'starts-at') ?? null;
      const endsAt = parseDateFlag(args, 'ends-at') ?? null;
      if (startsAt && endsAt && startsAt >= endsAt) throw new CliUsageError('--starts-at must be before --ends-at');
      await ctx.services.agents.setWindow(ctx.db, agentId, startsAt, endsAt);
      return { agent_id: agentId, starts_at: startsAt?.toISOString() ?? null, ends_at: endsAt?.toISOString() ?? null };
    },
  },
  {
    name: 'agent set-rate-limit',
    usage: 'agent set-rate-limit AGENT_ID --class C --limit N --burst B [--window SECONDS]',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      const cls = requireFlag(args, 'class');
      if (!(RATE_CLASSES as readonly string[]).includes(cls)) throw new CliUsageError(`--class must be one of ${RATE_CLASSES.join(', ')}`);
      const limit = parseIntFlag(args, 'limit', true);
      const burst = parseIntFlag(args, 'burst', true);
      const windowSeconds = parseIntFlag(args, 'window') ?? 60;
      if (limit < 1 || burst < 1 || windowSeconds < 1) throw new CliUsageError('--limit, --burst and --window must be at least 1');
      if (burst > limit) throw new CliUsageError('--burst cannot exceed --limit');
      await ctx.services.agents.setRateLimit(ctx.db, agentId, { class: cls, limit, burst, windowSeconds });
      return { agent_id: agentId, class: cls, limit, burst, window_seconds: windowSeconds };
    },
  },
];
