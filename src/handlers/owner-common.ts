// Request helpers shared by the owner and admin handler files (not a tag: exports no handler).
import type { RequestContext } from '../http/types.js';
import { ApiError } from '../lib/errors.js';
import type { OwnerActor } from '../services/owner.service.js';
import type { StepUpAction } from '../services/passkey.service.js';

/** The owner-side caller as the owner service sees it. */
export function actorOf(ctx: RequestContext): OwnerActor {
  const admin = ctx.principal.method === 'admin_token';
  return {
    kind: admin ? 'admin' : 'owner',
    ownerId: admin ? null : ctx.principal.ownerId,
    tokenId: ctx.principal.ownerTokenId ?? null,
    clientAddress: ctx.clientAddress ?? null,
    requestId: ctx.requestId,
  };
}

/**
 * Records the action in the owner's audit log, in the request's transaction (ctx.db is the
 * idempotency transaction on writes), so the entry commits exactly when the change does.
 */
export async function record(req: { operationId: string }, ctx: RequestContext, ownerId: string, target: { type: string; id: string } | null, details: Record<string, unknown> = {}): Promise<void> {
  await ctx.services.owner.audit(ctx.db, { ownerId, actor: actorOf(ctx), action: req.operationId, targetType: target?.type ?? null, targetId: target?.id ?? null, details });
}

/** The payload's own fields as a plain object type (an interface has no index signature for OwnerResult). */
type Fields<P> = { [K in keyof P]: P[K] };
const result = <S extends 200 | 201, P extends object>(status: S, payload: P) => ({ status, body: { ok: true as const, ...(payload as Fields<P>) } });
/** The document's OwnerResult: `ok: true` and the action's fields. */
export const ok = <P extends object>(payload: P) => result(200, payload);
export const created = <P extends object>(payload: P) => result(201, payload);

/**
 * The console's step-up (issue 27): a console session whose owner has a passkey rotates a key or changes a policy
 * only with a fresh assertion of that passkey over a challenge issued for this action on this agent
 * (`POST /v1/owner/passkeys/assertion-options` with `purpose: step_up`), sent base64url-encoded in
 * `X-Passkey-Assertion`. Without one: 428 `step_up_required`, whose details name what to ask options for. Owner
 * tokens (script credentials the operator issues) and the admin token are not asked; neither is a request carrying
 * the owner's signature, which is itself the proof (evm mode). The passkey's id, for the audit log, or null.
 */
export async function stepUp(ctx: RequestContext, ownerId: string, header: string | string[] | undefined, action: StepUpAction, agentId: string, signed = false): Promise<string | null> {
  if (ctx.principal.method !== 'owner_session' || signed || !(await ctx.services.passkeys.hasPasskey(ctx.db, ownerId))) return null;
  const details = { purpose: 'step_up', action, agent_id: agentId };
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) throw new ApiError('step_up_required', `${action.replace(/_/g, ' ')} needs a fresh passkey assertion: ask assertion-options for it and send it in X-Passkey-Assertion`, details);
  let assertion: unknown;
  try {
    assertion = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    throw new ApiError('validation_failed', 'X-Passkey-Assertion must be the assertion JSON, base64url-encoded', {
      errors: [{ location: 'header', path: 'x-passkey-assertion', message: 'is not base64url JSON' }],
    });
  }
  return (await ctx.services.passkeys.verifyAssertion(ctx.db, assertion, { purpose: 'step_up', ownerId, action, agentId })).passkeyId;
}
