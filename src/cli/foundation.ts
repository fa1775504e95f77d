// agentctl: owners, owner tokens, agents, keys, activation windows and rate-limit overrides.
import { agentAccountView } from '../services/custody/account-view.js';
import { RATE_CLASSES } from '../../generated/vocabulary.js';
import type { Schema } from '../lib/contract.js';
import type { OwnerActor } from '../services/owner.service.js';
import { ownerSignerPlan } from './owner-keys.js';
import { CliUsageError, parseDateFlag, parseIntFlag, requireFlag, requirePositional, optionalFlag, seg, type CliArgs, type CliCommand } from './types.js';

function windowFlags(args: CliArgs) {
  const startsAt = parseDateFlag(args, 'starts-at') ?? null;
  const endsAt = parseDateFlag(args, 'ends-at') ?? null;
  if (startsAt && endsAt && startsAt >= endsAt) throw new CliUsageError('--starts-at must be before --ends-at');
  return { startsAt, endsAt };
}

const isRateClass = (value: string): value is Schema<'RateClass'> => (RATE_CLASSES as readonly string[]).includes(value);

function rateLimitFlags(args: CliArgs) {
  const agentId = requirePositional(args, 0, 'AGENT_ID');
  const cls = requireFlag(args, 'class');
  if (!isRateClass(cls)) throw new CliUsageError(`--class must be one of ${RATE_CLASSES.join(', ')}`);
  const limit = parseIntFlag(args, 'limit', true);
  const burst = parseIntFlag(args, 'burst', true);
  const windowSeconds = parseIntFlag(args, 'window') ?? 60;
  if (limit < 1 || burst < 1 || windowSeconds < 1) throw new CliUsageError('--limit, --burst and --window must be at least 1');
  if (burst > limit) throw new CliUsageError('--burst cannot exceed --limit');
  return { agentId, cls, limit, burst, windowSeconds };
}

const agentAction = (verb: 'disable' | 'enable'): CliCommand => ({
  name: `agent ${verb}`,
  usage: `agent ${verb} AGENT_ID [--owner-key-file FILE] (evm mode: also ${verb === 'disable' ? 'pauses' : 'resumes'} the agent's account, signed by the owner's key here)`,
  run: async (ctx, args) => {
    const agentId = requirePositional(args, 0, 'AGENT_ID');
    const onchain = await ctx.services.custody?.setPaused(ctx.db, agentId, verb === 'disable', ctx.ownerSignature);
    await ctx.services.agents.setEnabled(ctx.db, agentId, verb === 'enable');
    return { agent_id: agentId, enabled: verb === 'enable', ...(onchain?.tx_hash ? { tx_hash: onchain.tx_hash } : {}) };
  },
  http: (args) => ({ method: 'POST', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/${verb}` }),
});

/** agentctl acts as the operator: on the database directly it sees every owner, as the admin token does over HTTP. */
const OPERATOR: OwnerActor = { kind: 'admin', ownerId: null, tokenId: null, clientAddress: null, requestId: null };

/** `--limit N --cursor C` of the list commands, as the API's query. */
function pageFlags(args: CliArgs): { limit?: number; cursor?: string } {
  const limit = parseIntFlag(args, 'limit');
  if (limit !== undefined && (limit < 1 || limit > 100)) throw new CliUsageError('--limit must be between 1 and 100');
  const cursor = optionalFlag(args, 'cursor');
  return { ...(limit !== undefined ? { limit } : {}), ...(cursor !== undefined ? { cursor } : {}) };
}

const query = (params: Record<string, string | number | undefined>): string => {
  const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined);
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}` : '';
};

export const foundationCommands: CliCommand[] = [
  {
    name: 'owner list',
    usage: 'owner list [--limit N] [--cursor C]                     # owners, newest first, with their agent counts',
    run: async (ctx, args) => ({ ...(await ctx.services.owner.listOwners(ctx.db, pageFlags(args))) }),
    http: (args) => ({ method: 'GET', path: `/v1/admin/owners${query(pageFlags(args))}` }),
  },
  {
    name: 'agent list',
    usage: 'agent list [--owner OWNER_ID] [--limit N] [--cursor C]  # agents with status, wallet and balances (no keys)',
    run: async (ctx, args) => ({ ...(await ctx.services.owner.listAgents(ctx.db, OPERATOR, { ...pageFlags(args), owner_id: optionalFlag(args, 'owner') })) }),
    http: (args) => ({ method: 'GET', path: `/v1/owner/agents${query({ owner_id: optionalFlag(args, 'owner'), ...pageFlags(args) })}` }),
  },
  {
    name: 'agent show',
    usage: 'agent show AGENT_ID                                     # one agent (no keys: the API key shows its prefix only)',
    run: async (ctx, args) => ({ agent: await ctx.services.owner.getAgent(ctx.db, OPERATOR, requirePositional(args, 0, 'AGENT_ID')) }),
    http: (args) => ({ method: 'GET', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}` }),
  },
  {
    name: 'owner create',
    usage:
      "owner create --email E [--name N] [--signer 0xADDRESS] (evm mode: the signer owns the agents' accounts; on chain 31337 without --signer a key is generated into DATA_DIR/owner-keys/<owner_id>.key)",
    run: async (ctx, args) => {
      const plan = await ownerSignerPlan(ctx.config, args);
      return plan.finish({ ...(await ctx.services.agents.createOwner(ctx.db, { email: requireFlag(args, 'email'), name: optionalFlag(args, 'name'), signerAddress: plan.signer })) });
    },
    http: async (args, config) => {
      const plan = await ownerSignerPlan(config, args);
      return {
        method: 'POST',
        path: '/v1/admin/owners',
        body: { email: requireFlag(args, 'email'), name: optionalFlag(args, 'name') ?? null, ...(plan.signer ? { signer_address: plan.signer } : {}) },
        output: ({ ok: _ok, ...rest }) => plan.finish(rest),
      };
    },
  },
  {
    name: 'owner delete',
    usage: 'owner delete OWNER_ID',
    run: async (ctx, args) => {
      const ownerId = requirePositional(args, 0, 'OWNER_ID');
      await ctx.services.agents.deleteOwner(ctx.db, ownerId);
      return { owner_id: ownerId, deleted: true };
    },
    http: (args) => ({ method: 'DELETE', path: `/v1/admin/owners/${seg(requirePositional(args, 0, 'OWNER_ID'))}` }),
  },
  {
    name: 'owner token create',
    usage: 'owner token create --owner OWNER_ID [--label L]',
    run: async (ctx, args) => {
      const created = await ctx.services.owner.createToken(ctx.db, requireFlag(args, 'owner'), optionalFlag(args, 'label') ?? null);
      await ctx.services.owner.audit(ctx.db, {
        ownerId: created.owner_id,
        actor: 'system',
        action: 'adminCreateOwnerToken',
        targetType: 'owner_token',
        targetId: created.token_id,
        details: { via: 'agentctl' },
      });
      return { owner_id: created.owner_id, token: created.token };
    },
    http: (args) => ({ method: 'POST', path: `/v1/admin/owners/${seg(requireFlag(args, 'owner'))}/tokens`, body: optionalFlag(args, 'label') ? { label: optionalFlag(args, 'label') } : {} }),
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
    http: (args) => {
      const { startsAt, endsAt } = windowFlags(args);
      return {
        method: 'POST',
        path: '/v1/owner/agents',
        body: { owner_id: requireFlag(args, 'owner'), name: requireFlag(args, 'name'), starts_at: startsAt?.toISOString() ?? null, ends_at: endsAt?.toISOString() ?? null },
      };
    },
  },
  agentAction('disable'),
  agentAction('enable'),
  {
    name: 'agent rotate-key',
    usage: 'agent rotate-key AGENT_ID',
    run: async (ctx, args) => ({ ...(await ctx.services.agents.rotateKey(ctx.db, requirePositional(args, 0, 'AGENT_ID'))) }),
    http: (args) => ({ method: 'POST', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/rotate-key` }),
  },
  {
    name: 'agent rotate-lane-key',
    usage: "agent rotate-lane-key AGENT_ID [--owner-key-file FILE] (evm mode: a new lane key for the agent's account; the old key's calls revert)",
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      if (!ctx.services.custody) throw new CliUsageError('the agent has no lane key: agent accounts exist in evm mode only (CHAIN_RPC_URL)');
      return { agent_id: agentId, ...(await ctx.services.custody.rotateLane(ctx.db, agentId, ctx.ownerSignature)) };
    },
    http: (args) => ({ method: 'POST', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/rotate-lane-key` }),
  },
  {
    name: 'agent account',
    usage: "agent account AGENT_ID (how the agent's limits are enforced; evm mode: the account, its caps and usage read from the chain, and the command of each owner change)",
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      return { ...(await agentAccountView(ctx.db, { custody: ctx.services.custody, policy: ctx.services.ledger.policy, dataDir: ctx.config.dataDir }, agentId)) };
    },
    http: (args) => ({ method: 'GET', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/account` }),
  },
  {
    name: 'agent hand-to-passkey',
    usage: "agent hand-to-passkey AGENT_ID --passkey PASSKEY_ID [--owner-key-file FILE] (evm mode: the owner's passkey becomes the account's owner; the owner's key signs the transfer here)",
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      const acct = await ctx.services.custody?.account(ctx.db, agentId);
      if (!ctx.services.custody || !acct) throw new CliUsageError("the agent's wallet is not an agent account: a passkey can own one in evm mode only (CHAIN_RPC_URL)");
      const passkey = await ctx.services.passkeys.signerKey(ctx.db, acct.owner_id, requireFlag(args, 'passkey'));
      const handed = await ctx.services.custody.handToPasskey(ctx.db, agentId, passkey, ctx.ownerSignature);
      return { agent_id: agentId, owner_signer: handed.owner_signer, owner_signer_kind: 'passkey', owner_passkey_id: passkey.id, tx_hash: handed.tx_hash };
    },
    http: (args) => ({ method: 'POST', path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/account/owner`, body: { passkey_id: requireFlag(args, 'passkey') } }),
  },
  {
    name: 'agent set-window',
    usage: 'agent set-window AGENT_ID --starts-at ISO --ends-at ISO',
    run: async (ctx, args) => {
      const agentId = requirePositional(args, 0, 'AGENT_ID');
      const { startsAt, endsAt } = windowFlags(args);
      await ctx.services.agents.setWindow(ctx.db, agentId, startsAt, endsAt);
      return { agent_id: agentId, starts_at: startsAt?.toISOString() ?? null, ends_at: endsAt?.toISOString() ?? null };
    },
    http: (args) => {
      const { startsAt, endsAt } = windowFlags(args);
      return {
        method: 'PUT',
        path: `/v1/owner/agents/${seg(requirePositional(args, 0, 'AGENT_ID'))}/window`,
        body: { starts_at: startsAt?.toISOString() ?? null, ends_at: endsAt?.toISOString() ?? null },
      };
    },
  },
  {
    name: 'agent set-rate-limit',
    usage: 'agent set-rate-limit AGENT_ID --class C --limit N --burst B [--window SECONDS]',
    run: async (ctx, args) => {
      const { agentId, cls, limit, burst, windowSeconds } = rateLimitFlags(args);
      await ctx.services.agents.setRateLimit(ctx.db, agentId, { class: cls, limit, burst, windowSeconds });
      return { agent_id: agentId, class: cls, limit, burst, window_seconds: windowSeconds };
    },
    http: (args) => {
      const { agentId, cls, limit, burst, windowSeconds } = rateLimitFlags(args);
      return { method: 'PUT', path: `/v1/owner/agents/${seg(agentId)}/rate-limits/${seg(cls)}`, body: { limit, burst, window_seconds: windowSeconds } };
    },
  },
];
