// Request helpers shared by the owner and admin handler files (not a tag: exports no handler).
import type { RequestContext } from '../http/types.js';
import type { OwnerActor } from '../services/owner.service.js';

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
