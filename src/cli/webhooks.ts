// agentctl: the owner's webhook actions (re-enable an endpoint disabled for sustained failures).
import { requirePositional, seg, type CliCommand } from './types.js';

export const webhookCommands: CliCommand[] = [
  {
    name: 'webhook enable',
    usage: 'webhook enable WEBHOOK_ID',
    run: async (ctx, args) => {
      const webhook = await ctx.services.webhooks.enableByOwner(ctx.db, requirePositional(args, 0, 'WEBHOOK_ID'));
      return { webhook: { ...webhook } };
    },
    http: (args) => ({ method: 'POST', path: `/v1/owner/webhooks/${seg(requirePositional(args, 0, 'WEBHOOK_ID'))}/enable` }),
  },
];
