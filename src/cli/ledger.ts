// agentctl for the ledger area: funding, policy, recipients, recurring payments, trusted destinations,
// withdrawal methods, one-off payments (recipient claim, owner cancel) and the simulated chain and price feed.
import { readFile } from 'node:fs/promises';
import { findAgent } from '../db/repositories/agent.repository.js';
import { policyToJson } from '../services/policy.service.js';
import type { DestinationAction } from '../services/destination.service.js';
import { CliUsageError, optionalFlag, parseDateFlag, parseIntFlag, requireFlag, requirePositional, type CliCommand, type CliContext } from './types.js';

async function requireAgent(ctx: CliContext, agentId: string) {
  const agent = /^[0-9a-f-]{36}$/i.test(agentId) ? await findAgent(ctx.db, agentId) : undefined;
  if (!agent) throw new CliUsageError(`agent ${agentId} not found`);
  return agent;
}

const destinationCommand = (action: DestinationAction): CliCommand => ({
  name: `destination ${action}`,
  usage: `destination ${action} DESTINATION_ID`,
  run: async (ctx, args) => ({ ...(await ctx.services.ledger.destinations.actAsOwner(ctx.db, requirePositional(args, 0, 'DESTINATION_ID'), action)) }),
});

export const ledgerCommands: CliCommand[] = [
  {
    name: 'wallet fund',
    usage: 'wallet fund AGENT_ID --asset A --amount X',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.account.fund(ctx.db, agentId, { asset: requireFlag(args, 'asset'), amount: requireFlag(args, 'amount') });
    },
  },
  {
    name: 'agent set-policy',
    usage: 'agent set-policy AGENT_ID --file policy.json',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      const path = requireFlag(args, 'file');
      let parsed: unknown;
      try {
        parsed = JSON.parse(await readFile(path, 'utf8'));
      } catch (err) {
        throw new CliUsageError(`cannot read policy file ${path}: ${(err as Error).message}`);
      }
      const policy = await ctx.services.ledger.policy.set(ctx.db, agentId, parsed);
      return { agent_id: agentId, policy: policyToJson(policy) };
    },
  },
  {
    name: 'agent allow',
    usage: 'agent allow AGENT_ID --all',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      if (args.flags.all !== true) throw new CliUsageError('agent allow needs --all (a permissive development policy)');
      await requireAgent(ctx, agentId);
      const policy = await ctx.services.ledger.policy.allowAll(ctx.db, agentId);
      return { agent_id: agentId, policy: policyToJson(policy) };
    },
  },
  {
    name: 'agent limits',
    usage: 'agent limits AGENT_ID',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return { agent_id: agentId, ...(await ctx.services.ledger.policy.limits(ctx.db, agentId)) };
    },
  },
  {
    name: 'recipient add',
    usage: 'recipient add AGENT_ID --kind recurring|one_off --name N --address 0x... [--asset A]',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      const kind = requireFlag(args, 'kind');
      if (kind !== 'recurring' && kind !== 'one_off') throw new CliUsageError('--kind must be recurring or one_off');
      return ctx.services.ledger.payments.addRecipient(ctx.db, agentId, { kind, name: requireFlag(args, 'name'), address: requireFlag(args, 'address'), asset: optionalFlag(args, 'asset') ?? null });
    },
  },
  {
    name: 'recurring add',
    usage: 'recurring add AGENT_ID --recipient RECIPIENT_ID --asset A --amount X --interval day|week|month',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.payments.addRecurring(ctx.db, agentId, { recipientId: requireFlag(args, 'recipient'), asset: requireFlag(args, 'asset'), amount: requireFlag(args, 'amount'), interval: requireFlag(args, 'interval') });
    },
  },
  {
    name: 'destination add',
    usage: 'destination add AGENT_ID --kind crypto --chain base --address 0x... --label L [--timelock-seconds N]',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.destinations.add(ctx.db, agentId, { kind: requireFlag(args, 'kind'), chain: optionalFlag(args, 'chain') ?? 'base', address: requireFlag(args, 'address'), label: requireFlag(args, 'label'), timelockSeconds: parseIntFlag(args, 'timelock-seconds') });
    },
  },
  destinationCommand('confirm'),
  destinationCommand('cancel'),
  destinationCommand('remove'),
  {
    name: 'withdrawal-method add',
    usage: 'withdrawal-method add AGENT_ID --kind bank --label L [--bank-name B] [--last4 NNNN] [--currency USD]',
    run: async (ctx, args) => {
      const agent = await requireAgent(ctx, requirePositional(args, 0, 'AGENT_ID'));
      return ctx.services.ledger.withdrawals.addMethod(ctx.db, agent.owner_id, { kind: requireFlag(args, 'kind'), label: requireFlag(args, 'label'), bankName: optionalFlag(args, 'bank-name') ?? null, last4: optionalFlag(args, 'last4') ?? null, currency: optionalFlag(args, 'currency') ?? null });
    },
  },
  {
    name: 'one-off claim',
    usage: 'one-off claim ONE_OFF_PAYMENT_ID (or its operation id)',
    run: async (ctx, args) => {
      const row = await ctx.services.ledger.payments.claimOneOff(ctx.db, requirePositional(args, 0, 'ID'));
      return { one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status };
    },
  },
  {
    name: 'one-off cancel',
    usage: 'one-off cancel ONE_OFF_PAYMENT_ID (or its operation id)',
    run: async (ctx, args) => {
      const row = await ctx.services.ledger.payments.cancelOneOff(ctx.db, requirePositional(args, 0, 'ID'));
      return { one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status };
    },
  },
  {
    name: 'chain fail-address',
    usage: 'chain fail-address ADDRESS [--off]',
    run: async (ctx, args) => {
      const address = requirePositional(args, 0, 'ADDRESS');
      if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new CliUsageError('ADDRESS must be a 0x EVM address');
      const failing = args.flags.off !== true;
      await ctx.services.ledger.ledger.setFailingAddress(ctx.db, address, failing);
      return { address: address.toLowerCase(), failing };
    },
  },
  {
    name: 'price set',
    usage: 'price set ASSET USD [--at ISO]',
    run: async (ctx, args) => {
      const asset = requirePositional(args, 0, 'ASSET');
      const usd = requirePositional(args, 1, 'USD');
      const price = await ctx.services.ledger.ledger.setPrice(ctx.db, asset, usd, parseDateFlag(args, 'at') ?? ctx.clock.now());
      return { asset: price.asset, price_usd: usd, observed_at: price.observedAt?.toISOString() ?? null };
    },
  },
];
