// Tag owner (/v1/owner): the owner's agents, policy, funding, payees, destinations, webhooks,
// connected apps and audit log. Every id is checked against the caller's agents first (404 otherwise).
import type { LooseRequest } from '../http/types.js';
import type { LooseHandler, RequestContext } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import { answer } from '../lib/refusal.js';
import { policyToJson } from '../services/ledger/policy.js';
import type { DestinationAction } from '../services/ledger/destinations.js';
import { OAuthInputError } from '../oauth/oauth.service.js';
import { body, ok, pageQuery, param, query } from './ledger-common.js';
import { actorOf, okStatus, record } from './owner-common.js';

type Body = Record<string, unknown>;
const agentOf = (c: LooseRequest, ctx: RequestContext) => ctx.services.owner.requireAgent(ctx.db, actorOf(ctx), param(c, 'agent_id'));
const date = (v: unknown): Date | null => (typeof v === 'string' ? new Date(v) : null);
const iso = (d: Date | null) => d?.toISOString() ?? null;

export const ownerListAgents: LooseHandler = async (c, ctx) => ok(await ctx.services.owner.listAgents(ctx.db, actorOf(ctx), pageQuery(c)));

export const ownerCreateAgent: LooseHandler = async (c, ctx) => {
  const b = body<Body>(c);
  const ownerId = await ctx.services.owner.resolveOwner(ctx.db, actorOf(ctx), b.owner_id as string | undefined);
  const startsAt = date(b.starts_at);
  const endsAt = date(b.ends_at);
  if (startsAt && endsAt && startsAt >= endsAt) throw new ApiError('validation_failed', 'starts_at must be before ends_at', { errors: [{ location: 'body', path: '/starts_at', message: 'must be before ends_at' }] });
  const created = await ctx.services.agents.createAgent(ctx.db, { ownerId, name: b.name as string, startsAt, endsAt });
  await record(c, ctx, ownerId, { type: 'agent', id: created.agent_id }, { name: b.name });
  return okStatus(201, created);
};

export const ownerGetAgent: LooseHandler = async (c, ctx) => ok({ agent: await ctx.services.owner.getAgent(ctx.db, actorOf(ctx), param(c, 'agent_id')) });

export const ownerDeleteAgent: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  await ctx.services.owner.deleteAgent(ctx.db, actorOf(ctx), agent.id);
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id });
  return ok({ agent_id: agent.id, deleted: true });
};

const setEnabled = (enabled: boolean): LooseHandler => async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  await ctx.services.agents.setEnabled(ctx.db, agent.id, enabled);
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id });
  return ok({ agent_id: agent.id, enabled });
};
export const ownerDisableAgent = setEnabled(false);
export const ownerEnableAgent = setEnabled(true);

export const ownerSetAgentWindow: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<Body>(c);
  const startsAt = date(b.starts_at);
  const endsAt = date(b.ends_at);
  if (startsAt && endsAt && startsAt >= endsAt) throw new ApiError('validation_failed', 'starts_at must be before ends_at', { errors: [{ location: 'body', path: '/starts_at', message: 'must be before ends_at' }] });
  await ctx.services.agents.setWindow(ctx.db, agent.id, startsAt, endsAt);
  const window = { starts_at: iso(startsAt), ends_at: iso(endsAt) };
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id }, window);
  return ok({ agent_id: agent.id, ...window });
};

export const ownerRotateAgentKey: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const rotated = await ctx.services.agents.rotateKey(ctx.db, agent.id);
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id });
  return ok({ ...rotated });
};

export const ownerGetRateLimits: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const usage = await ctx.services.rateLimits.usage(ctx.db, agent.id);
  const classes = Object.entries(usage).map(([cls, d]) => ({ class: cls, limit: d.limit, burst: d.burst, window_seconds: d.windowSeconds, remaining: d.remaining, reset_at: d.resetAt.toISOString() }));
  return ok({ agent_id: agent.id, classes });
};

export const ownerSetRateLimit: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ limit: number; burst: number; window_seconds?: number }>(c);
  const cls = param(c, 'class');
  if (b.burst > b.limit) throw new ApiError('validation_failed', 'burst cannot exceed limit', { errors: [{ location: 'body', path: '/burst', message: 'cannot exceed limit' }] });
  const windowSeconds = b.window_seconds ?? 60;
  await ctx.services.agents.setRateLimit(ctx.db, agent.id, { class: cls, limit: b.limit, burst: b.burst, windowSeconds });
  const result = { agent_id: agent.id, class: cls, limit: b.limit, burst: b.burst, window_seconds: windowSeconds };
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id }, result);
  return ok(result);
};

export const ownerGetPolicy: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const policy = await ctx.services.ledger.policy.get(ctx.db, agent.id);
  return ok({ agent_id: agent.id, policy: policy ? policyToJson(policy) : null });
};

/** `{"allow": "all"}` is the permissive development policy (agentctl agent allow --all). */
const isAllowAll = (b: Body) => Object.keys(b).length === 1 && b.allow === 'all';

export const ownerReplacePolicy: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<Body>(c);
  const policy = isAllowAll(b) ? await ctx.services.ledger.policy.allowAll(ctx.db, agent.id) : await ctx.services.ledger.policy.set(ctx.db, agent.id, b);
  const json = policyToJson(policy);
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { policy: json });
  return ok({ agent_id: agent.id, policy: json });
};

export const ownerValidatePolicy: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<Body>(c);
  try {
    const policy = ctx.services.ledger.policy.parse(isAllowAll(b) ? { operation_types: 'all' } : b);
    return ok({ agent_id: agent.id, valid: true, problems: [], policy: policyToJson(policy) });
  } catch (err) {
    if (err instanceof ApiError && err.code === 'validation_failed') return ok({ agent_id: agent.id, valid: false, problems: (err.details as { problems?: string[] } | undefined)?.problems ?? [err.message], policy: null });
    throw err;
  }
};

export const ownerGetPolicyLimits: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok({ agent_id: agent.id, ...(await ctx.services.ledger.policy.limits(ctx.db, agent.id)) });
};

export const ownerFundWallet: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ asset: string; amount: string }>(c);
  const funded = await ctx.services.ledger.account.fund(ctx.db, agent.id, { asset: b.asset, amount: b.amount });
  await record(c, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { asset: b.asset, amount: b.amount });
  return ok(funded);
};

export const ownerListActivity: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.account.listActivity(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, pageQuery(c)));
};

export const ownerListOperations: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.operations.list(ctx.db, agent.id, { ...pageQuery(c), status: query(c, 'status'), type: query(c, 'type') }));
};

export const ownerListRecipients: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.payments.listRecipients(ctx.db, agent.id, pageQuery(c)));
};

export const ownerListRecurringPayments: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.payments.listRecurring(ctx.db, agent.id, pageQuery(c)));
};

export const ownerListWithdrawalMethods: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.withdrawals.listMethods(ctx.db, agent.owner_id, pageQuery(c)));
};

export const ownerAddRecipient: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ kind: 'recurring' | 'one_off'; name: string; address: string; asset?: string | null }>(c);
  const added = await ctx.services.ledger.payments.addRecipient(ctx.db, agent.id, { kind: b.kind, name: b.name, address: b.address, asset: b.asset ?? null });
  await record(c, ctx, agent.owner_id, { type: 'recipient', id: added.recipient_id }, { agent_id: agent.id, kind: b.kind, name: b.name });
  return okStatus(201, added);
};

export const ownerAddRecurringPayment: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ recipient_id: string; asset: string; amount: string; interval: string }>(c);
  const added = await ctx.services.ledger.payments.addRecurring(ctx.db, agent.id, { recipientId: b.recipient_id, asset: b.asset, amount: b.amount, interval: b.interval });
  await record(c, ctx, agent.owner_id, { type: 'recurring_payment', id: added.recurring_payment_id }, { agent_id: agent.id, ...b });
  return okStatus(201, added);
};

export const ownerAddWithdrawalMethod: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ kind: string; label: string; bank_name?: string | null; last4?: string | null; currency?: string | null }>(c);
  const added = await ctx.services.ledger.withdrawals.addMethod(ctx.db, agent.owner_id, { kind: b.kind, label: b.label, bankName: b.bank_name ?? null, last4: b.last4 ?? null, currency: b.currency ?? null });
  await record(c, ctx, agent.owner_id, { type: 'withdrawal_method', id: added.method_id }, { kind: b.kind, label: b.label });
  return okStatus(201, added);
};

export const ownerListTrustedDestinations: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  return ok(await ctx.services.ledger.destinations.list(ctx.db, agent.id, pageQuery(c)));
};

export const ownerAddTrustedDestination: LooseHandler = async (c, ctx) => {
  const agent = await agentOf(c, ctx);
  const b = body<{ kind: string; chain?: string; address: string; label: string; timelock_seconds?: number }>(c);
  const added = await ctx.services.ledger.destinations.add(ctx.db, agent.id, { kind: b.kind, chain: b.chain ?? 'base', address: b.address, label: b.label, timelockSeconds: b.timelock_seconds });
  await record(c, ctx, agent.owner_id, { type: 'trusted_destination', id: added.destination_id }, { agent_id: agent.id, address: b.address, label: b.label });
  return okStatus(201, added);
};

const destinationAction = (action: DestinationAction): LooseHandler => async (c, ctx) => {
  const id = param(c, 'id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'trusted_destination', id);
  const result = await ctx.services.ledger.destinations.act(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, id, action, { byOwner: true });
  await record(c, ctx, agent.owner_id, { type: 'trusted_destination', id }, { agent_id: agent.id });
  return answer(result);
};
export const ownerConfirmTrustedDestination = destinationAction('confirm');
export const ownerCancelTrustedDestination = destinationAction('cancel');
export const ownerRemoveTrustedDestination = destinationAction('remove');

export const ownerCancelOneOffPayment: LooseHandler = async (c, ctx) => {
  const id = param(c, 'id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'one_off_payment', id);
  const row = await ctx.services.ledger.payments.cancelOneOff(ctx.db, id);
  await record(c, ctx, agent.owner_id, { type: 'one_off_payment', id: row.id }, { agent_id: agent.id });
  return ok({ one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status });
};

export const ownerListWebhooks: LooseHandler = async (c, ctx) => ok(await ctx.services.owner.listEndpoints(ctx.db, actorOf(ctx), pageQuery(c)));

export const ownerListWebhookDeliveries: LooseHandler = async (c, ctx) => {
  const id = param(c, 'id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const limit = query(c, 'limit');
  const page = await ctx.services.webhooks.listDeliveries(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, id, { cursor: query(c, 'cursor'), limit: limit === undefined ? undefined : Number(limit), status: query(c, 'status') });
  return ok(page);
};

export const ownerEnableWebhook: LooseHandler = async (c, ctx) => {
  const id = param(c, 'id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const webhook = await ctx.services.webhooks.enableByOwner(ctx.db, id);
  await record(c, ctx, agent.owner_id, { type: 'webhook_endpoint', id }, { agent_id: agent.id });
  return ok({ webhook: { ...webhook } });
};

export const ownerRecoverWebhook: LooseHandler = async (c, ctx) => {
  const id = param(c, 'id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const since = body<{ since: string }>(c).since;
  const result = await ctx.services.webhooks.recover(ctx.db, id, new Date(since));
  await record(c, ctx, agent.owner_id, { type: 'webhook_endpoint', id }, { agent_id: agent.id, since, requeued: result.requeued });
  return ok(result);
};

export const ownerListConnectedApps: LooseHandler = async (c, ctx) => {
  const ownerId = await ctx.services.owner.resolveOwner(ctx.db, actorOf(ctx), query(c, 'owner_id'));
  return ok({ items: await ctx.services.oauth.listGrants(ctx.db, ownerId) });
};

export const ownerRevokeConnectedApp: LooseHandler = async (c, ctx) => {
  const grantId = param(c, 'grant_id');
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'oauth_grant', grantId);
  try {
    const revoked = await ctx.services.oauth.revokeGrant(ctx.db, grantId);
    await record(c, ctx, agent.owner_id, { type: 'oauth_grant', id: grantId }, { agent_id: agent.id });
    return ok({ ...revoked });
  } catch (err) {
    if (err instanceof OAuthInputError) throw new ApiError('not_found', err.message);
    throw err;
  }
};

export const ownerListAudit: LooseHandler = async (c, ctx) => ok(await ctx.services.owner.listAudit(ctx.db, actorOf(ctx), { ...pageQuery(c), since: query(c, 'since') }));
