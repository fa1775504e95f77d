// Tag owner (/v1/owner): the owner's agents, policy, funding, payees, destinations, webhooks,
// connected apps and audit log. Every id is checked against the caller's agents first (404 otherwise).
import type { Handler, OperationRequest, RequestContext } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import { isRefusal, refusalAnswer } from '../lib/refusal.js';
import { policyToJson } from '../services/ledger/policy.js';
import type { DestinationAction } from '../services/ledger/destinations.js';
import { OAuthInputError } from '../oauth/oauth.service.js';
import { ownerSignatureOf } from '../services/custody/accounts.js';
import { agentAccountView } from '../services/custody/account-view.js';
import { answerDocument } from './document-answer.js';
import { actorOf, created, ok, record, stepUp } from './owner-common.js';

const agentOf = (req: { params: { agent_id: string } }, ctx: RequestContext) => ctx.services.owner.requireAgent(ctx.db, actorOf(ctx), req.params.agent_id);
const date = (v: string | null | undefined): Date | null => (typeof v === 'string' ? new Date(v) : null);
const iso = (d: Date | null) => d?.toISOString() ?? null;

export const ownerListAgents: Handler<'ownerListAgents'> = async (req, ctx) => ok(await ctx.services.owner.listAgents(ctx.db, actorOf(ctx), req.query));

export const ownerCreateAgent: Handler<'ownerCreateAgent'> = async (req, ctx) => {
  const b = req.body;
  const ownerId = await ctx.services.owner.resolveOwner(ctx.db, actorOf(ctx), b.owner_id);
  const startsAt = date(b.starts_at);
  const endsAt = date(b.ends_at);
  if (startsAt && endsAt && startsAt >= endsAt)
    throw new ApiError('validation_failed', 'starts_at must be before ends_at', { errors: [{ location: 'body', path: '/starts_at', message: 'must be before ends_at' }] });
  const agent = await ctx.services.agents.createAgent(ctx.db, { ownerId, name: b.name, startsAt, endsAt });
  await record(req, ctx, ownerId, { type: 'agent', id: agent.agent_id }, { name: b.name });
  return created(agent);
};

export const ownerGetAgent: Handler<'ownerGetAgent'> = async (req, ctx) => ok({ agent: await ctx.services.owner.getAgent(ctx.db, actorOf(ctx), req.params.agent_id) });

export const ownerDeleteAgent: Handler<'ownerDeleteAgent'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  await ctx.services.owner.deleteAgent(ctx.db, actorOf(ctx), agent.id);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id });
  return ok({ agent_id: agent.id, deleted: true });
};

async function setEnabled(req: OperationRequest<'ownerDisableAgent' | 'ownerEnableAgent'>, ctx: RequestContext, enabled: boolean) {
  const agent = await agentOf(req, ctx);
  // evm mode: the owner's pause or resume of the agent's account, signed by the owner's signer (issue 24).
  const onchain = await ctx.services.custody?.setPaused(ctx.db, agent.id, !enabled, ownerSignatureOf(req.body));
  await ctx.services.agents.setEnabled(ctx.db, agent.id, enabled);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, onchain ? { tx_hash: onchain.tx_hash } : undefined);
  return ok({ agent_id: agent.id, enabled, ...(onchain?.tx_hash ? { tx_hash: onchain.tx_hash } : {}) });
}
export const ownerDisableAgent: Handler<'ownerDisableAgent'> = (req, ctx) => setEnabled(req, ctx, false);
export const ownerEnableAgent: Handler<'ownerEnableAgent'> = (req, ctx) => setEnabled(req, ctx, true);

export const ownerSetAgentWindow: Handler<'ownerSetAgentWindow'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const startsAt = date(b.starts_at);
  const endsAt = date(b.ends_at);
  if (startsAt && endsAt && startsAt >= endsAt)
    throw new ApiError('validation_failed', 'starts_at must be before ends_at', { errors: [{ location: 'body', path: '/starts_at', message: 'must be before ends_at' }] });
  await ctx.services.agents.setWindow(ctx.db, agent.id, startsAt, endsAt);
  const window = { starts_at: iso(startsAt), ends_at: iso(endsAt) };
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, window);
  return ok({ agent_id: agent.id, ...window });
};

export const ownerRotateAgentKey: Handler<'ownerRotateAgentKey'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const passkeyId = await stepUp(ctx, agent.owner_id, req.headers['x-passkey-assertion'], 'rotate_agent_key', agent.id);
  const rotated = await ctx.services.agents.rotateKey(ctx.db, agent.id);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, passkeyId ? { passkey_id: passkeyId } : {});
  return ok({ ...rotated });
};

export const ownerRotateLaneKey: Handler<'ownerRotateLaneKey'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  if (!ctx.services.custody) throw new ApiError('invalid_state_transition', 'the agent has no lane key: agent accounts exist in evm mode only (CHAIN_RPC_URL)');
  const signature = ownerSignatureOf(req.body);
  const passkeyId = await stepUp(ctx, agent.owner_id, req.headers['x-passkey-assertion'], 'rotate_lane_key', agent.id, signature !== undefined);
  const rotated = await ctx.services.custody.rotateLane(ctx.db, agent.id, signature);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { ...rotated, ...(passkeyId ? { passkey_id: passkeyId } : {}) });
  return ok({ agent_id: agent.id, ...rotated });
};

export const ownerGetRateLimits: Handler<'ownerGetRateLimits'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const usage = await ctx.services.rateLimits.usage(ctx.db, agent.id);
  const classes = Object.entries(usage).map(([cls, d]) => ({ class: cls, limit: d.limit, burst: d.burst, window_seconds: d.windowSeconds, remaining: d.remaining, reset_at: d.resetAt.toISOString() }));
  return ok({ agent_id: agent.id, classes });
};

export const ownerSetRateLimit: Handler<'ownerSetRateLimit'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const cls = req.params.class;
  if (b.burst > b.limit) throw new ApiError('validation_failed', 'burst cannot exceed limit', { errors: [{ location: 'body', path: '/burst', message: 'cannot exceed limit' }] });
  const windowSeconds = b.window_seconds ?? 60;
  await ctx.services.agents.setRateLimit(ctx.db, agent.id, { class: cls, limit: b.limit, burst: b.burst, windowSeconds });
  const result = { agent_id: agent.id, class: cls, limit: b.limit, burst: b.burst, window_seconds: windowSeconds };
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, result);
  return ok(result);
};

export const ownerGetPolicy: Handler<'ownerGetPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const policy = await ctx.services.ledger.policy.get(ctx.db, agent.id);
  return ok({ agent_id: agent.id, policy: policy ? policyToJson(policy) : null });
};

/** `{"allow": "all"}` is the permissive development policy (agentctl agent allow --all). */
const isAllowAll = (b: Record<string, unknown>) => Object.keys(b).length === 1 && b.allow === 'all';

export const ownerReplacePolicy: Handler<'ownerReplacePolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const { owner_signature: _signature, ...b } = req.body;
  const signature = ownerSignatureOf(req.body);
  const passkeyId = await stepUp(ctx, agent.owner_id, req.headers['x-passkey-assertion'], 'replace_policy', agent.id, signature !== undefined);
  const policy = await ctx.services.ledger.policy.set(ctx.db, agent.id, isAllowAll(b) ? policyBody(b) : b, signature);
  const json = policyToJson(policy);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { policy: json, ...(passkeyId ? { passkey_id: passkeyId } : {}) });
  return ok({ agent_id: agent.id, policy: json });
};

export const ownerValidatePolicy: Handler<'ownerValidatePolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  try {
    const policy = ctx.services.ledger.policy.parse(isAllowAll(b) ? { operation_types: 'all' } : b);
    return ok({ agent_id: agent.id, valid: true, problems: [], policy: policyToJson(policy) });
  } catch (err) {
    if (err instanceof ApiError && err.code === 'validation_failed')
      return ok({ agent_id: agent.id, valid: false, problems: (err.details as { problems?: string[] } | undefined)?.problems ?? [err.message], policy: null });
    throw err;
  }
};

/** The policy body as `PUT …/policy` takes it (`{"allow": "all"}` included). */
const policyBody = (b: Record<string, unknown>) => (isAllowAll(b) ? { operation_types: 'all', allowed_assets: 'all', allowed_recipients: 'all', allowed_protocols: 'all' } : b);

export const ownerReplayPolicy: Handler<'ownerReplayPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.policy.replay(ctx.db, agent.id, { policy: policyBody(req.body.policy), since: new Date(req.body.since) }));
};

export const ownerGetShadowPolicy: Handler<'ownerGetShadowPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const shadow = await ctx.services.ledger.policy.getShadow(ctx.db, agent.id);
  return ok({ agent_id: agent.id, shadow_policy: shadow ? policyToJson(shadow) : null });
};

export const ownerSetShadowPolicy: Handler<'ownerSetShadowPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const json = policyToJson(await ctx.services.ledger.policy.setShadow(ctx.db, agent.id, policyBody(req.body)));
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { shadow_policy: json });
  return ok({ agent_id: agent.id, shadow_policy: json });
};

export const ownerDeleteShadowPolicy: Handler<'ownerDeleteShadowPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const dropped = await ctx.services.ledger.policy.dropShadow(ctx.db, agent.id);
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { dropped });
  return ok({ agent_id: agent.id, shadow_policy: null });
};

export const ownerPromoteShadowPolicy: Handler<'ownerPromoteShadowPolicy'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const passkeyId = await stepUp(ctx, agent.owner_id, req.headers['x-passkey-assertion'], 'promote_shadow_policy', agent.id, req.body?.signature !== undefined);
  const json = policyToJson(await ctx.services.ledger.policy.promoteShadow(ctx.db, agent.id, req.body?.signature));
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { policy: json, promoted: 'shadow_policy', ...(passkeyId ? { passkey_id: passkeyId } : {}) });
  return ok({ agent_id: agent.id, policy: json });
};

export const ownerListShadowDecisions: Handler<'ownerListShadowDecisions'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok({ agent_id: agent.id, ...(await ctx.services.ledger.policy.shadowDecisions(ctx.db, agent.id, { cursor: req.query.cursor, limit: req.query.limit ?? 50 })) });
};

export const ownerGetOverview: Handler<'ownerGetOverview'> = async (req, ctx) => ok(await ctx.services.ownerOverview.overview(ctx.db, actorOf(ctx), req.query));

export const ownerGetSpending: Handler<'ownerGetSpending'> = async (req, ctx) => ok(await ctx.services.ownerOverview.spending(ctx.db, actorOf(ctx), req.params.agent_id, req.query.days ?? 30));

export const ownerGetPolicyLimits: Handler<'ownerGetPolicyLimits'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok({ agent_id: agent.id, ...(await ctx.services.ledger.policy.limits(ctx.db, agent.id)) });
};

export const ownerGetAgentAccount: Handler<'ownerGetAgentAccount'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await agentAccountView(ctx.db, { custody: ctx.services.custody, policy: ctx.services.ledger.policy, dataDir: ctx.config.dataDir }, agent.id));
};

/** Issue 27: the account's owner on chain becomes one of the owner's passkeys (its PasskeyOwner), signed by the current owner. */
export const ownerSetAccountOwner: Handler<'ownerSetAccountOwner'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  if (!ctx.services.custody) throw new ApiError('invalid_state_transition', 'a passkey can own an agent account in evm mode only (CHAIN_RPC_URL)');
  const passkey = await ctx.services.passkeys.signerKey(ctx.db, agent.owner_id, req.body.passkey_id);
  const handed = await ctx.services.custody.handToPasskey(ctx.db, agent.id, passkey, ownerSignatureOf(req.body));
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { passkey_id: passkey.id, ...handed });
  return ok({ agent_id: agent.id, owner_signer: handed.owner_signer, owner_signer_kind: 'passkey' as const, owner_passkey_id: passkey.id, tx_hash: handed.tx_hash });
};

export const ownerFundWallet: Handler<'ownerFundWallet'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const funded = await ctx.services.ledger.account.fund(ctx.db, agent.id, { asset: b.asset, amount: b.amount });
  await record(req, ctx, agent.owner_id, { type: 'agent', id: agent.id }, { asset: b.asset, amount: b.amount });
  return ok(funded);
};

export const ownerListActivity: Handler<'ownerListActivity'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.account.listActivity(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, req.query));
};

export const ownerListOperations: Handler<'ownerListOperations'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.operations.list(ctx.db, agent.id, { ...req.query, status: req.query.status, type: req.query.type }));
};

export const ownerListRecipients: Handler<'ownerListRecipients'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.payments.listRecipients(ctx.db, agent.id, req.query));
};

export const ownerListRecurringPayments: Handler<'ownerListRecurringPayments'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.payments.listRecurring(ctx.db, agent.id, req.query));
};

export const ownerListWithdrawalMethods: Handler<'ownerListWithdrawalMethods'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.withdrawals.listMethods(ctx.db, agent.owner_id, req.query));
};

export const ownerAddRecipient: Handler<'ownerAddRecipient'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const added = await ctx.services.ledger.payments.addRecipient(ctx.db, agent.id, { kind: b.kind, name: b.name, address: b.address, asset: b.asset ?? null }, ownerSignatureOf(b));
  await record(req, ctx, agent.owner_id, { type: 'recipient', id: added.recipient_id }, { agent_id: agent.id, kind: b.kind, name: b.name });
  return created(added);
};

export const ownerAddRecurringPayment: Handler<'ownerAddRecurringPayment'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const added = await ctx.services.ledger.payments.addRecurring(ctx.db, agent.id, { recipientId: b.recipient_id, asset: b.asset, amount: b.amount, interval: b.interval });
  await record(req, ctx, agent.owner_id, { type: 'recurring_payment', id: added.recurring_payment_id }, { agent_id: agent.id, ...b });
  return created(added);
};

export const ownerAddWithdrawalMethod: Handler<'ownerAddWithdrawalMethod'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const added = await ctx.services.ledger.withdrawals.addMethod(ctx.db, agent.owner_id, {
    kind: b.kind,
    label: b.label,
    bankName: b.bank_name ?? null,
    last4: b.last4 ?? null,
    currency: b.currency ?? null,
  });
  await record(req, ctx, agent.owner_id, { type: 'withdrawal_method', id: added.method_id }, { kind: b.kind, label: b.label });
  return created(added);
};

export const ownerListTrustedDestinations: Handler<'ownerListTrustedDestinations'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  return ok(await ctx.services.ledger.destinations.list(ctx.db, agent.id, req.query));
};

export const ownerAddTrustedDestination: Handler<'ownerAddTrustedDestination'> = async (req, ctx) => {
  const agent = await agentOf(req, ctx);
  const b = req.body;
  const added = await ctx.services.ledger.destinations.add(ctx.db, agent.id, {
    kind: b.kind,
    chain: b.chain ?? 'base',
    address: b.address,
    label: b.label,
    timelockSeconds: b.timelock_seconds,
    signature: b.owner_signature,
  });
  await record(req, ctx, agent.owner_id, { type: 'trusted_destination', id: added.destination_id }, { agent_id: agent.id, address: b.address, label: b.label });
  return created(added);
};

type DestinationActionId = 'ownerConfirmTrustedDestination' | 'ownerCancelTrustedDestination' | 'ownerRemoveTrustedDestination';
async function destinationAction(req: OperationRequest<DestinationActionId>, ctx: RequestContext, action: DestinationAction) {
  const id = req.params.id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'trusted_destination', id);
  const result = await ctx.services.ledger.destinations.act(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, id, action, { byOwner: true });
  await record(req, ctx, agent.owner_id, { type: 'trusted_destination', id }, { agent_id: agent.id });
  return isRefusal(result) ? refusalAnswer(result) : ok(result);
}
export const ownerConfirmTrustedDestination: Handler<'ownerConfirmTrustedDestination'> = (req, ctx) => destinationAction(req, ctx, 'confirm');
export const ownerCancelTrustedDestination: Handler<'ownerCancelTrustedDestination'> = (req, ctx) => destinationAction(req, ctx, 'cancel');
export const ownerRemoveTrustedDestination: Handler<'ownerRemoveTrustedDestination'> = (req, ctx) => destinationAction(req, ctx, 'remove');

export const ownerCancelOneOffPayment: Handler<'ownerCancelOneOffPayment'> = async (req, ctx) => {
  const id = req.params.id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'one_off_payment', id);
  const row = await ctx.services.ledger.payments.cancelOneOff(ctx.db, id, ownerSignatureOf(req.body));
  await record(req, ctx, agent.owner_id, { type: 'one_off_payment', id: row.id }, { agent_id: agent.id });
  return ok({ one_off_payment_id: row.id, operation_id: row.operation_id, status: row.status });
};

export const ownerListWebhooks: Handler<'ownerListWebhooks'> = async (req, ctx) => ok(await ctx.services.owner.listEndpoints(ctx.db, actorOf(ctx), req.query));

export const ownerListWebhookDeliveries: Handler<'ownerListWebhookDeliveries'> = async (req, ctx) => {
  const id = req.params.id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const page = await ctx.services.webhooks.listDeliveries(ctx.db, { agentId: agent.id, walletId: agent.wallet_id }, id, req.query);
  return ok(page);
};

export const ownerEnableWebhook: Handler<'ownerEnableWebhook'> = async (req, ctx) => {
  const id = req.params.id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const webhook = await ctx.services.webhooks.enableByOwner(ctx.db, id);
  await record(req, ctx, agent.owner_id, { type: 'webhook_endpoint', id }, { agent_id: agent.id });
  return ok({ webhook });
};

export const ownerRecoverWebhook: Handler<'ownerRecoverWebhook'> = async (req, ctx) => {
  const id = req.params.id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'webhook_endpoint', id);
  const since = req.body.since;
  const result = await ctx.services.webhooks.recover(ctx.db, id, new Date(since));
  await record(req, ctx, agent.owner_id, { type: 'webhook_endpoint', id }, { agent_id: agent.id, since, requeued: result.requeued });
  return ok(result);
};

export const ownerListConnectedApps: Handler<'ownerListConnectedApps'> = async (req, ctx) => {
  const ownerId = await ctx.services.owner.resolveOwner(ctx.db, actorOf(ctx), req.query.owner_id);
  return ok({ items: await ctx.services.oauth.listGrants(ctx.db, ownerId) });
};

export const ownerRevokeConnectedApp: Handler<'ownerRevokeConnectedApp'> = async (req, ctx) => {
  const grantId = req.params.grant_id;
  const agent = await ctx.services.owner.requireOwned(ctx.db, actorOf(ctx), 'oauth_grant', grantId);
  try {
    const revoked = await ctx.services.oauth.revokeGrant(ctx.db, grantId);
    await record(req, ctx, agent.owner_id, { type: 'oauth_grant', id: grantId }, { agent_id: agent.id });
    return ok({ ...revoked });
  } catch (err) {
    if (err instanceof OAuthInputError) throw new ApiError('not_found', err.message);
    throw err;
  }
};

export const ownerListAudit: Handler<'ownerListAudit'> = async (req, ctx) => ok(await ctx.services.owner.listAudit(ctx.db, actorOf(ctx), { ...req.query, since: req.query.since }));

export const getOwnerOpenApi: Handler<'getOwnerOpenApi'> = async (req, ctx) => answerDocument<'getOwnerOpenApi'>(req.headers['if-none-match'], ctx.services.self.publicDocument('owner'));
