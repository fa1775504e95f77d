// Tag simulate: runs any write route (routing, scope, request validation, policy, ledger maths) inside a
// transaction that is always rolled back, without charging the target route's rate limit (contract §9, §14).
import { dryRun, requireScope, type Settled } from '../http/steps.js';
import type { Handler, HandlerResult, Schema } from '../http/types.js';
import { ApiError, errorBody, isApiError, type ErrorBody, type ErrorCode } from '../lib/errors.js';

const POLICY_CODES = new Set<ErrorCode>(['permission_not_granted', 'asset_not_allowed', 'recipient_not_allowed', 'protocol_not_allowed', 'limit_exceeded', 'ltv_too_high']);
const FUNDS_CODES = new Set<ErrorCode>(['insufficient_funds']);

type Stage = Schema<'SimulateStage'>;
type Failure = { status: number; error: ErrorBody['error'] };

function stagesFor(code: ErrorCode | null, message?: string): Stage[] {
  const order = ['validation', 'policy', 'funds', 'execution'];
  const failedAt = code === null ? -1 : code === 'validation_failed' ? 0 : POLICY_CODES.has(code) ? 1 : FUNDS_CODES.has(code) ? 2 : 3;
  return order.map((name, i) => {
    if (failedAt === -1 || i < failedAt) return { name, outcome: 'passed' };
    if (i === failedAt) return { name, outcome: 'failed', code: code!, message };
    return { name, outcome: 'skipped' };
  });
}

type PathStage = NonNullable<Schema<'SimulateResponse'>['execution_path']>[number];
type Depth = Schema<'SimulateDepth'>;

/** Our stages in Hightop's vocabulary (issue 26, item 7): only the stages that ran, in order. */
function executionPathOf(stages: Stage[]): PathStage[] {
  const path: PathStage[] = [];
  for (const stage of stages) {
    if (stage.name === 'onchain') path.push(stage.outcome === 'skipped' ? 'simulate_onchain_not_run' : 'simulate_onchain');
    else if (stage.outcome === 'skipped') continue;
    else if (stage.name === 'route') path.push('validate_route');
    else if (stage.name === 'validation') path.push('validate_request_body', 'validate_static_contract');
    else if (stage.name === 'policy')
      path.push(...(stage.code === 'permission_not_granted' ? (['evaluate_policy_permission'] as const) : (['evaluate_policy_permission', 'evaluate_policy_limits'] as const)));
  }
  return path;
}

const isErrorBody = (body: unknown): body is ErrorBody => typeof body === 'object' && body !== null && (body as ErrorBody).ok === false && typeof (body as ErrorBody).error?.code === 'string';
const failureOf = (e: ApiError): Failure => ({ status: e.status, error: errorBody(e.code, e.message, e.details).error });

/**
 * The refusal in a dry run's outcome, or null when the write would succeed. A refusal the handler
 * returns (status >= 400, the error envelope) counts exactly as the ApiError it would have thrown;
 * anything else thrown is not a refusal and propagates.
 */
function refusalIn(outcome: Settled<HandlerResult>): Failure | null {
  if (!outcome.ok) {
    if (isApiError(outcome.error)) return failureOf(outcome.error);
    throw outcome.error;
  }
  const { status, body } = outcome.value;
  return status >= 400 && isErrorBody(body) ? { status, error: body.error } : null;
}

export const simulateRequest: Handler<'simulateRequest'> = async (req, ctx) => {
  const input = req.body;
  const method = input.method.toUpperCase();
  const path = input.path.split('?')[0]!;
  const depth: Depth = input.depth ?? 'policy';
  const { router } = ctx;
  const stages: Stage[] = [];
  const answer = (failure: Failure | null, success?: HandlerResult) => ({
    status: 200 as const,
    body: failure
      ? { ok: true as const, would_succeed: false, status: failure.status, error: failure.error, stages, depth, execution_path: executionPathOf(stages) }
      : success
        ? { ok: true as const, would_succeed: true, status: success.status, response: success.body as Record<string, unknown>, stages, depth, execution_path: executionPathOf(stages) }
        : // depth static, refused past the static checks: those passed, the rest was not evaluated.
          { ok: true as const, would_succeed: true, status: 200, stages, depth, execution_path: executionPathOf(stages) },
  });

  // route
  const match = router.match(method, path);
  if (match.kind !== 'operation' || match.op.method === 'get' || match.op.operationId === 'simulateRequest') {
    const code: ErrorCode = match.kind === 'method_not_allowed' ? 'method_not_allowed' : match.kind === 'not_found' ? 'not_found' : 'validation_failed';
    const message = match.kind === 'operation' ? 'only write routes can be simulated' : 'No route matches this request.';
    stages.push({ name: 'route', outcome: 'failed', code, message });
    return answer(failureOf(new ApiError(code, message)));
  }
  stages.push({ name: 'route', outcome: 'passed' });

  // scope: the pipeline's own step
  try {
    requireScope(ctx.config.baseUrl, ctx.principal, [match.op], 'agent');
  } catch (err) {
    if (!isApiError(err)) throw err;
    stages.push({ name: 'scope', outcome: 'failed', code: err.code, message: err.message });
    return answer(failureOf(err));
  }
  stages.push({ name: 'scope', outcome: 'passed' });

  // validation, policy, funds, execution: the route itself, rolled back
  const outcome = await dryRun(ctx, match.op, { path, params: match.params, body: input.body ?? {} });
  const refusal = refusalIn(outcome);
  const evaluated = stagesFor(refusal?.error.code ?? null, refusal?.error.message);
  if (depth === 'static') {
    // Only the request's shape counts: what the route decided past validation is reported as not evaluated.
    stages.push(evaluated[0]!, ...evaluated.slice(1).map((stage) => ({ name: stage.name, outcome: 'skipped' as const })));
    if (refusal?.error.code === 'validation_failed') return answer(refusal);
    return refusal ? answer(null) : answer(null, (outcome as { value: HandlerResult }).value);
  }
  stages.push(...evaluated);
  if (refusal) return answer(refusal);
  if (depth === 'onchain') {
    const check = await ctx.services.simulation.onchain(ctx.db, ctx.principal.agentId, (input.body ?? {}) as Record<string, unknown>);
    if (!check.ran) stages.push({ name: 'onchain', outcome: 'skipped', message: check.reason });
    else if (check.revert === null) stages.push({ name: 'onchain', outcome: 'passed' });
    else {
      const failure = failureOf(new ApiError('upstream_error', `the on-chain call would revert: ${check.revert}`, { reason: 'onchain_revert', revert: check.revert }));
      stages.push({ name: 'onchain', outcome: 'failed', code: failure.error.code, message: failure.error.message });
      return answer(failure);
    }
  }
  const value = (outcome as { value: HandlerResult }).value;
  // Accepted, but held for the owner's approval (issue 27): the stage says so and why.
  const approval = (value.body as { approval?: Schema<'OperationApproval'> } | undefined)?.approval;
  if (approval)
    stages.push({
      name: 'approval_required',
      outcome: 'passed',
      message: `the owner must approve this operation (${approval.reasons.map((r) => (r === 'above_threshold' ? `above the approval threshold of ${approval.threshold_usd} USD` : 'first payment to this payee')).join('; ')}) before ${approval.expires_at}; until then it stays accepted with its funds held`,
    });
  return answer(null, value);
};
