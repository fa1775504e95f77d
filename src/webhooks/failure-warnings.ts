// Warns an owner by e-mail when one of their endpoints has been failing for 24 hours, and again at
// 48 hours (auto-disable comes at 72): the failure reason and a link to the console. Each warning is
// recorded in the owner's audit log. No webhook event is emitted (spec 9.2 has no such type).
import type { Transporter } from 'nodemailer';
import type { Knex } from 'knex';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/owner.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { OwnerService } from '../services/owner.service.js';
import { createPollingLoop, type WorkerLoop } from '../worker.js';

export interface FailureWarning {
  to: string;
  agentName: string;
  url: string;
  hours: 24 | 48;
  failingSince: Date;
  reason: string;
  consoleUrl: string;
}

export interface WarningMailer {
  send(warning: FailureWarning): Promise<void>;
  close(): void;
}

export function createWarningMailer(deps: { smtpUrl: string | null; log: Logger; from?: string }): WarningMailer {
  if (!deps.smtpUrl) {
    return {
      async send(w) {
        deps.log.warn({ to: w.to, url: w.url, hours: w.hours, reason: w.reason }, 'SMTP_URL is not set: webhook failure warning written to the log');
      },
      close() {},
    };
  }
  // nodemailer (~3 MB of heap) loads on the first message, not at start.
  const smtpUrl = deps.smtpUrl;
  let transport: Promise<Transporter> | undefined;
  const transportOf = () =>
    (transport ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(smtpUrl, { from: deps.from ?? 'Agent API <no-reply@agent-api.invalid>' })));
  return {
    async send(w) {
      await (
        await transportOf()
      ).sendMail({
        to: w.to,
        subject: `Webhook endpoint failing for ${w.hours} hours: ${w.url}`,
        text: [
          `The webhook endpoint ${w.url} of your agent "${w.agentName}" has been failing since ${w.failingSince.toISOString()} (${w.hours} hours).`,
          `Last failure: ${w.reason}.`,
          '',
          'Deliveries are retried for up to 72 hours; then the endpoint is disabled (sustained_failures).',
          `Check it, re-enable it and recover its events in the console: ${w.consoleUrl}`,
        ].join('\n'),
      });
    },
    close() {
      void transport?.then(
        (t) => t.close(),
        () => {},
      );
    },
  };
}

export function describeFailure(last: { error_class: string | null; http_status: number | null } | undefined): string {
  if (!last?.error_class) return 'unknown';
  return last.http_status ? `${last.error_class} (HTTP ${last.http_status})` : last.error_class;
}

export function createFailureWarnings(deps: { db: Knex; clock: Clock; log: Logger; mailer: WarningMailer; owner: OwnerService; baseUrl: string }) {
  /** Sends at most one warning (48 h first); true when one was sent. */
  async function warnOne(): Promise<boolean> {
    for (const level of [48, 24] as const) {
      const sent = await withTransaction(deps.db, async (trx) => {
        const now = deps.clock.now();
        const endpoint = await repo.lockEndpointToWarn(trx, level, now);
        if (!endpoint) return false;
        const reason = describeFailure(await repo.lastFailureOf(trx, endpoint.id));
        const consoleUrl = `${deps.baseUrl}/console/#/webhooks/${endpoint.id}`;
        await deps.mailer.send({ to: endpoint.owner_email, agentName: endpoint.agent_name, url: endpoint.url, hours: level, failingSince: new Date(endpoint.failing_since), reason, consoleUrl });
        await repo.markEndpointWarned(trx, endpoint.id, level, now);
        await deps.owner.audit(trx, {
          ownerId: endpoint.owner_id,
          actor: 'system',
          action: 'webhook.failure_warning',
          targetType: 'webhook_endpoint',
          targetId: endpoint.id,
          details: { agent_id: endpoint.agent_id, hours: level, failing_since: new Date(endpoint.failing_since).toISOString(), reason, sent_to: endpoint.owner_email },
        });
        return true;
      });
      if (sent) return true;
    }
    return false;
  }

  /** Sends every due warning; returns how many. */
  async function runOnce(): Promise<number> {
    let sent = 0;
    while (await warnOne()) sent++;
    return sent;
  }

  return {
    runOnce,
    loop: (idleMs = 60_000): WorkerLoop => createPollingLoop('webhook-failure-warnings', runOnce, { idleMs, log: deps.log }),
  };
}
