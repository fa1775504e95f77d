// Tells an owner by e-mail that an operation waits for their approval (issue 27): what, to whom, how much, why, until
// when, and the console's inbox link. The operation row is the outbox: `approval_notified_at` marks it sent, in the
// transaction that claimed it (SKIP LOCKED), so two workers never mail the same approval twice.
import type { Transporter } from 'nodemailer';
import type { Knex } from 'knex';
import { withTransaction } from '../db/knex.js';
import { claimUnnotifiedApprovals, deferNotice, markNotified } from '../db/repositories/approval.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { createPollingLoop, type WorkerLoop } from '../worker.js';

export interface ApprovalNotice {
  to: string;
  agentName: string;
  what: string;
  reasons: string;
  expiresAt: Date;
  consoleUrl: string;
}

export interface ApprovalMailer {
  send(notice: ApprovalNotice): Promise<void>;
}

export function createApprovalMailer(deps: { smtpUrl: string | null; log: Logger; from?: string }): ApprovalMailer {
  if (!deps.smtpUrl) return { send: async (n) => deps.log.warn({ to: n.to, what: n.what, url: n.consoleUrl }, 'SMTP_URL is not set: approval request written to the log') };
  const smtpUrl = deps.smtpUrl;
  let transport: Promise<Transporter> | undefined;
  const transportOf = () =>
    (transport ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(smtpUrl, { from: deps.from ?? 'Agent API <no-reply@agent-api.invalid>' })));
  return {
    async send(n) {
      await (
        await transportOf()
      ).sendMail({
        to: n.to,
        subject: `Approval needed: ${n.agentName} — ${n.what}`,
        text: [
          `Your agent "${n.agentName}" asks to make this operation: ${n.what}.`,
          `It needs your approval because ${n.reasons}.`,
          '',
          `The funds are held and nothing leaves the wallet until you decide. Without an answer it is cancelled at ${n.expiresAt.toISOString()}.`,
          `Approve (with your passkey) or reject it in the console: ${n.consoleUrl}`,
          '',
          'The agent cannot approve it: if it asks you to approve through a chat or a tool, use the console instead.',
        ].join('\n'),
      });
    },
  };
}

/** The wait before the next try of a refused notice: 2 s doubling per attempt, at most an hour. */
export const noticeBackoffMs = (attempts: number): number => Math.min(3_600_000, 2_000 * 2 ** Math.min(attempts - 1, 20));

export function createApprovalNotices(deps: { db: Knex; clock: Clock; log: Logger; mailer: ApprovalMailer; baseUrl: string }): { loop(): WorkerLoop; sendDue(): Promise<number> } {
  /** Notices sent in this pass. One the mail server refuses is deferred (noticeBackoffMs) and does not hold back the others. */
  async function sendDue(): Promise<number> {
    return withTransaction(deps.db, async (trx) => {
      const now = deps.clock.now();
      const due = await claimUnnotifiedApprovals(trx, now, 20);
      let sent = 0;
      for (const op of due) {
        const r = op.approval_reasons ?? {};
        const reasons = [r.threshold_usd ? `it is above your approval threshold of ${r.threshold_usd} USD` : null, r.new_payee ? 'it is the first payment to this payee' : null]
          .filter(Boolean)
          .join(' and ');
        try {
          await deps.mailer.send({
            to: op.owner_email,
            agentName: op.agent_name,
            what: op.human_message,
            reasons: reasons || 'your policy asks for it',
            expiresAt: op.approval_expires_at!,
            consoleUrl: `${deps.baseUrl}/console/#/approvals/${op.id}`,
          });
        } catch (err) {
          const attempts = op.approval_notice_attempts + 1;
          const after = new Date(now.getTime() + noticeBackoffMs(attempts));
          deps.log.warn({ operation_id: op.id, attempts, retry_at: after.toISOString(), err: err instanceof Error ? err.message : String(err) }, 'approval mail refused; retried later');
          await deferNotice(trx, op.id, attempts, after);
          continue;
        }
        await markNotified(trx, op.id, deps.clock.now());
        sent++;
      }
      return sent;
    });
  }
  return {
    sendDue,
    loop: () =>
      createPollingLoop(
        'approval-mail',
        async () =>
          sendDue().catch((err: unknown) => {
            deps.log.error({ err: err instanceof Error ? err.message : String(err) }, 'approval mail failed; retried on the next pass');
            return 0;
          }),
        { idleMs: 1000, log: deps.log },
      ),
  };
}
