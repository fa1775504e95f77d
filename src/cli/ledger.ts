// agentctl for the ledger area: funding, policy, recipients, recurring payments, trusted destinations,
// withdrawal methods, one-off payments (recipient claim, owner cancel) and the simulated chain and price feed.
import { readFile } from 'node:fs/promises';
import type { DestinationAction } from '../services/ledger/destinations.js';
import { CliUsageError, onDatabase, optionalFlag, parseDateFlag, parseIntFlag, requireFlag, requirePositional, seg, type CliArgs, type CliCommand, type CliContext } from './types.js';

export async function requireAgent(ctx: CliContext, agentId: string) {
  const agent = /^[0-9a-f-]{36}$/i.test(agentId) ? await (await onDatabase()).findAgent(ctx.db, agentId) : undefined;
  if (!agent) throw new CliUsageError(`agent ${agentId} not found`);
  return agent;
}

export const agentPath = (args: CliArgs, rest: string) => `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}${rest}`;

/** The write response is printed whole (it carries `ok` in both modes). */
const whole = (body: Record<string, unknown>) => body;

export async function readPolicyFile(args: CliArgs): Promise<unknown> {
  const path = requireFlag(args, 'file');
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new CliUsageError(`cannot read policy file ${path}: ${(err as Error).message}`);
  }
}

function recipientKind(args: CliArgs): 'recurring' | 'one_off' {
  const kind = requireFlag(args, 'kind');
  if (kind !== 'recurring' && kind !== 'one_off') throw new CliUsageError('--kind must be recurring or one_off');
  return kind;
}

function failingAddress(args: CliArgs): string {
  const address = requirePositional(args, 0, 'ADDRESS');
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new CliUsageError('ADDRESS must be a 0x EVM address');
  return address;
}

const destinationCommand = (action: DestinationAction): CliCommand => ({
  name: `destination ${action}`,
  usage: `destination ${action} DESTINATION_ID`,
  run: async (ctx, args) => ({ ...(await ctx.services.ledger.destinations.actAsOwner(ctx.db, requirePositional(args, 0, 'DESTINATION_ID'), action)) }),
  http: (args) => ({ method: 'POST', path: `/v1/owner/trusted-destinations/${seg(requirePositional(args, 0, 'DESTINATION_ID'))}/${action}`, output: whole }),
});

const oneOffCommand = (verb: 'claim' | 'cancel'): CliCommand => ({
  name: `one-off ${verb}`,
  usage: `one-off ${verb} ONE_OFF_PAYMENT_ID (or its operation id)${verb === 'cancel' ? ' [--owner-key-file FILE]' : ''}`,
  run: async (ctx, args) => {
    const id = requirePositional(args, 0, 'ID');
    const row = verb === 'claim' ? await ctx.services.ledger.payments.claimOneOff(ctx.db, id) : await ctx.services.ledger.payments.cancelOneOff(ctx.db, id, ctx.ownerSignature);
    return { one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status };
  },
  http: (args) => ({ method: 'POST', path: `/v1/${verb === 'claim' ? 'admin' : 'owner'}/one-off-payments/${seg(requirePositional(args, 0, 'ID'))}/${verb}` }),
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
    http: (args) => ({ method: 'POST', path: agentPath(args, '/fund'), body: { asset: requireFlag(args, 'asset'), amount: requireFlag(args, 'amount') } }),
  },
  {
    name: 'agent set-policy',
    usage: "agent set-policy AGENT_ID --file policy.json [--owner-key-file FILE] (evm mode: the owner's key signs the change here)",
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      const policy = await ctx.services.ledger.policy.set(ctx.db, agentId, await readPolicyFile(args), ctx.ownerSignature);
      return { agent_id: agentId, policy: (await onDatabase()).policyToJson(policy) };
    },
    http: async (args) => ({ method: 'PUT', path: agentPath(args, '/policy'), body: await readPolicyFile(args) }),
  },
  {
    name: 'agent allow',
    usage: 'agent allow AGENT_ID --all',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      if (args.flags.all !== true) throw new CliUsageError('agent allow needs --all (a permissive development policy)');
      await requireAgent(ctx, agentId);
      const policy = await ctx.services.ledger.policy.allowAll(ctx.db, agentId);
      return { agent_id: agentId, policy: (await onDatabase()).policyToJson(policy) };
    },
    http: (args) => {
      if (args.flags.all !== true) throw new CliUsageError('agent allow needs --all (a permissive development policy)');
      return { method: 'PUT', path: agentPath(args, '/policy'), body: { allow: 'all' } };
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
    http: (args) => ({ method: 'GET', path: agentPath(args, '/limits') }),
  },
  {
    name: 'recipient add',
    usage: 'recipient add AGENT_ID --kind recurring|one_off --name N --address 0x... [--asset A] [--owner-key-file FILE] (evm mode, no allowed_recipients: a new payee of the account)',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.payments.addRecipient(
        ctx.db,
        agentId,
        {
          kind: recipientKind(args),
          name: requireFlag(args, 'name'),
          address: requireFlag(args, 'address'),
          asset: optionalFlag(args, 'asset') ?? null,
        },
        ctx.ownerSignature,
      );
    },
    http: (args) => ({
      method: 'POST',
      path: agentPath(args, '/recipients'),
      body: { kind: recipientKind(args), name: requireFlag(args, 'name'), address: requireFlag(args, 'address'), asset: optionalFlag(args, 'asset') ?? null },
    }),
  },
  {
    name: 'recurring add',
    usage: 'recurring add AGENT_ID --recipient RECIPIENT_ID --asset A --amount X --interval day|week|month',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.payments.addRecurring(ctx.db, agentId, {
        recipientId: requireFlag(args, 'recipient'),
        asset: requireFlag(args, 'asset'),
        amount: requireFlag(args, 'amount'),
        interval: requireFlag(args, 'interval'),
      });
    },
    http: (args) => ({
      method: 'POST',
      path: agentPath(args, '/recurring-payments'),
      body: { recipient_id: requireFlag(args, 'recipient'), asset: requireFlag(args, 'asset'), amount: requireFlag(args, 'amount'), interval: requireFlag(args, 'interval') },
    }),
  },
  {
    name: 'destination add',
    usage: 'destination add AGENT_ID --kind crypto --chain base --address 0x... --label L [--timelock-seconds N] [--owner-key-file FILE]',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      await requireAgent(ctx, agentId);
      return ctx.services.ledger.destinations.add(ctx.db, agentId, {
        kind: requireFlag(args, 'kind'),
        chain: optionalFlag(args, 'chain') ?? 'base',
        address: requireFlag(args, 'address'),
        label: requireFlag(args, 'label'),
        timelockSeconds: parseIntFlag(args, 'timelock-seconds'),
        signature: ctx.ownerSignature,
      });
    },
    http: (args) => ({
      method: 'POST',
      path: agentPath(args, '/trusted-destinations'),
      body: {
        kind: requireFlag(args, 'kind'),
        chain: optionalFlag(args, 'chain') ?? 'base',
        address: requireFlag(args, 'address'),
        label: requireFlag(args, 'label'),
        timelock_seconds: parseIntFlag(args, 'timelock-seconds'),
      },
    }),
  },
  destinationCommand('confirm'),
  destinationCommand('cancel'),
  destinationCommand('remove'),
  {
    name: 'withdrawal-method add',
    usage: 'withdrawal-method add AGENT_ID --kind bank --label L [--bank-name B] [--last4 NNNN] [--currency USD]',
    run: async (ctx, args) => {
      const agent = await requireAgent(ctx, requirePositional(args, 0, 'AGENT_ID'));
      return ctx.services.ledger.withdrawals.addMethod(ctx.db, agent.owner_id, {
        kind: requireFlag(args, 'kind'),
        label: requireFlag(args, 'label'),
        bankName: optionalFlag(args, 'bank-name') ?? null,
        last4: optionalFlag(args, 'last4') ?? null,
        currency: optionalFlag(args, 'currency') ?? null,
      });
    },
    http: (args) => ({
      method: 'POST',
      path: agentPath(args, '/withdrawal-methods'),
      body: {
        kind: requireFlag(args, 'kind'),
        label: requireFlag(args, 'label'),
        bank_name: optionalFlag(args, 'bank-name') ?? null,
        last4: optionalFlag(args, 'last4') ?? null,
        currency: optionalFlag(args, 'currency') ?? null,
      },
    }),
  },
  oneOffCommand('claim'),
  oneOffCommand('cancel'),
  {
    name: 'chain fail-address',
    usage: 'chain fail-address ADDRESS [--off]',
    run: async (ctx, args) => {
      const address = failingAddress(args);
      const failing = args.flags.off !== true;
      await ctx.services.ledger.ledger.setFailingAddress(ctx.db, address, failing);
      return { address: address.toLowerCase(), failing };
    },
    http: (args) => ({ method: 'PUT', path: `/v1/admin/chain/failing-addresses/${seg(failingAddress(args))}`, body: { failing: args.flags.off !== true } }),
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
    http: (args) => ({
      method: 'PUT',
      path: `/v1/admin/prices/${seg(requirePositional(args, 0, 'ASSET'))}`,
      body: { price_usd: requirePositional(args, 1, 'USD'), observed_at: (parseDateFlag(args, 'at') ?? new Date()).toISOString() },
    }),
  },
];
