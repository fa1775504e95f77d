// Recording failed attempts, one by one under the endpoint's row lock, because they reschedule, count
// failures and may disable the endpoint. Delivered attempts are recorded by the next claim
// (delivery-worker.ts, `recordAndClaimDeliveries`).
import type { Knex } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as deliveries from '../db/repositories/delivery.repository.js';
import * as endpoints from '../db/repositories/webhook.repository.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { appendEvent } from '../db/repositories/event.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { nextAttemptAt, parseRetryAfter } from './backoff.js';
import { isRetryable, type SendResult } from './sender.js';

export interface Outcome {
  result: SendResult;
  latencyMs: number | null;
}

export interface RecorderDeps {
  db: Knex;
  clock: Clock;
  log: Logger;
  random: () => number;
  metrics?: Pick<Metrics, 'webhookAttempt'>;
}

export interface Recorder {
  /** Resolves once the failure is committed; rejects when the commit failed (left in flight for its lease to expire). */
  recordFailure(row: deliveries.ClaimedRow, token: string, outcome: Outcome): Promise<void>;
}

export function createRecorder(deps: RecorderDeps): Recorder {
  const { db, clock, log } = deps;

  /** Applies one failed attempt under the endpoint's row lock (lock order: endpoint, then delivery). */
  async function recordFailure(row: deliveries.ClaimedRow, token: string, outcome: Outcome): Promise<void> {
    const { result, latencyMs } = outcome;
    const errorClass = result.errorClass!;
    const base = (now: Date) => ({ http_status: result.httpStatus, latency_ms: latencyMs, response_body: result.responseBody, updated_at: now });
    await withTransaction(db, async (trx) => {
      const endpoint = await endpoints.findEndpointById(trx, row.endpoint_id, { forUpdate: true });
      if (!endpoint) return; // deleted meanwhile; its deliveries went with it
      const now = clock.now();
      const baseNow = base(now);
      if (errorClass === 'endpoint_disabled') {
        await deliveries.completeClaimedDelivery(trx, row.id, token, { ...baseNow, status: 'failed', error_class: errorClass, next_attempt_at: null, terminal_at: now });
        deps.metrics?.webhookAttempt('failed', errorClass);
        return;
      }
      let patch: deliveries.AttemptResultPatch;
      let exhausted = false;
      if (isRetryable(errorClass)) {
        const honoursRetryAfter = result.httpStatus === 429 || result.httpStatus === 503;
        const next = nextAttemptAt({
          attempts: row.attempt,
          now,
          deadline: new Date(row.deadline_at ?? now.getTime()),
          retryAfterMs: honoursRetryAfter ? parseRetryAfter(result.retryAfter, now) : null,
          random: deps.random,
        });
        const stillWanted = endpoint.enabled || row.event_type === 'webhook.test';
        if (next && stillWanted) patch = { ...baseNow, status: 'retrying', error_class: errorClass, next_attempt_at: next };
        else if (!next) {
          exhausted = true;
          patch = { ...baseNow, status: 'failed', error_class: 'retries_exhausted', next_attempt_at: null, terminal_at: now };
        } else patch = { ...baseNow, status: 'failed', error_class: 'endpoint_disabled', next_attempt_at: null, terminal_at: now };
      } else {
        patch = { ...baseNow, status: 'failed', error_class: errorClass, next_attempt_at: null, terminal_at: now };
      }
      const done = await deliveries.completeClaimedDelivery(trx, row.id, token, patch);
      if (!done) return; // fenced out: another worker holds this delivery now
      deps.metrics?.webhookAttempt(patch.status === 'retrying' ? 'retrying' : 'failed', patch.error_class ?? null);
      await endpoints.recordEndpointFailure(trx, endpoint.id, now);
      if (exhausted && (await endpoints.disableEndpointForFailures(trx, endpoint.id, now))) {
        const failed = await deliveries.failWaitingDeliveries(trx, endpoint.id, 'endpoint_disabled', now);
        const wallet = await findWalletByAgent(trx, endpoint.agent_id);
        await appendEvent(trx, {
          type: 'agent.webhook_disabled',
          agentId: endpoint.agent_id,
          walletId: wallet?.id ?? '',
          operationId: null,
          resource: { type: 'webhook_endpoint', id: endpoint.id },
          data: {
            webhook_id: endpoint.id,
            url: endpoint.url,
            disabled_reason: 'sustained_failures',
            failing_since: endpoint.failing_since ? new Date(endpoint.failing_since).toISOString() : now.toISOString(),
          },
          createdAt: now,
        });
        log.warn({ endpointId: endpoint.id, failedDeliveries: failed }, 'webhook endpoint disabled after sustained failures');
      }
    });
  }

  return { recordFailure };
}
