// Tag simulate: runs any write route (routing, scope, request validation, policy, ledger maths) inside a
// transaction that is always rolled back, without charging the target route's rate limit (contract §9, §14).
import type { LooseHandler, HandlerResult, RequestContext } from '../http/types.js';
import { ApiError, isApiError, type ErrorBody, type ErrorCode } from '../lib/errors.js';
import { body } from './ledger-common.js';

const POLICY_CODES = new Set<ErrorCode>(['permission_not_granted', 'asset_not_allowed', 'recipient_not_allowed', 'protocol_not_allowed', 'limit_exceeded', 'ltv_too_high']);
const FUNDS_CODES = new Set<ErrorCode>(['insufficient_funds']);

type Stage = { name: string; outcome: 'passed' | 'failed' | 'skipped'; code?: ErrorCode; message?: string };

class Rollback extends Error {
  constructor(readonly result: { result?: HandlerResult; error?: unknown }) {
    super('simulation rollback');
  }
}

function stagesFor(code: ErrorCode | null, message?: string): Stage[] {
  const order = ['validation', 'policy', 'funds', 'execution'];
  const failedAt = code === null ? -1 : code === 'validation_failed' ? 0 : POLICY_CODES.has(code) ? 1 : FUNDS_CODES.has(code) ? 2 : 3;
  return order.map((name, i) => {
    if (failedAt === -1 || i < failedAt) return { name, outcome: 'passed' };
    if (i === failedAt) return { name, outcome: 'failed', code: code!, message };
    return { name, outcome: 'skipped' };
  });
}

export const simulateRequest: LooseHandler = async (c, ctx) => {
  const input = body<{ method: string; path: string; body?: Record<string, unknown> | null }>(c);
  const method = input.method.toUpperCase();
  const path = input.path.split('?')[0]!;
  const { router } = ctx;
  const stages: Stage[] = [];
  const answer = (status: number, error: { code: ErrorCode; message: string; details?: Record<string, unknown> } | null, response?: unknown) => ({
    status: 200,
    body: error ? { ok: true, would_succeed: false, status, error, stages } : { ok: true, would_succeed: true, status, response, stages },
  });

  const match = router.match(method, path);
  if (match.kind !== 'operation' || match.op.method === 'get' || match.op.operationId === 'simulateRequest') {
    const code: ErrorCode = match.kind === 'method_not_allowed' ? 'method_not_allowed' : match.kind === 'not_found' ? 'not_found' : 'validation_failed';
    const message = match.kind === 'operation' ? 'only write routes can be simulated' : 'No route matches this request.';
    stages.push({ name: 'route', outcome: 'failed', code, message });
    return answer(new ApiError(code, message).status, { code, message });
  }
  stages.push({ name: 'route', outcome: 'passed' });
  const op = match.op;
  if (ctx.principal.method === 'oauth' && op.scope && !ctx.principal.scopes.has(op.scope) && !op.altScopes.some((s) => ctx.principal.scopes.has(s))) {
    const message = `This route requires the scope ${op.scope}.`;
    stages.push({ name: 'scope', outcome: 'failed', code: 'insufficient_scope', message });
    return answer(403, { code: 'insufficient_scope', message, details: { required_scope: op.scope } });
  }
  stages.push({ name: 'scope', outcome: 'passed' });

  const db = ctx.db as import('knex').Knex;
  const outcome = await db
    .transaction(async (trx) => {
      const inner: RequestContext = { ...ctx, db: trx, idempotencyKey: null, dryRun: true };
      try {
        const result = await router.handle({ method, path, query: {}, headers: { 'idempotency-key': `simulate-${ctx.requestId}`, 'content-type': 'application/json' }, body: input.body ?? {} } as never, inner);
        throw new Rollback({ result });
      } catch (err) {
        if (err instanceof Rollback) throw err;
        throw new Rollback({ error: err });
      }
    })
    .catch((err: unknown) => {
      if (err instanceof Rollback) return err.result;
      throw err;
    });

  if (outcome.error !== undefined) {
    if (!isApiError(outcome.error)) throw outcome.error;
    const e = outcome.error;
    stages.push(...stagesFor(e.code, e.message));
    return answer(e.status, e.details === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, details: e.details });
  }
  const result = outcome.result!;
  // A refusal the handler answered (a policy rejection) fails the simulation as a thrown error does.
  if (result.status >= 400) {
    const { error } = result.body as ErrorBody;
    stages.push(...stagesFor(error.code, error.message));
    return answer(result.status, error);
  }
  stages.push(...stagesFor(null));
  return answer(result.status, null, result.body);
};
