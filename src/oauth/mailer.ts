// Sends connect-page one-time codes: nodemailer to SMTP_URL, or the log when no SMTP_URL is set (development).
import type { Transporter } from 'nodemailer';
import type { Logger } from '../lib/logger.js';

export interface LoginCodeMailer {
  sendLoginCode(to: string, code: string, context: { clientName: string }): Promise<void>;
  close(): void;
}

export function createLoginCodeMailer(deps: { smtpUrl: string | null; from?: string; log: Logger; nodeEnv: string }): LoginCodeMailer {
  const from = deps.from ?? 'Agent API <no-reply@agent-api.invalid>';
  if (!deps.smtpUrl) {
    return {
      async sendLoginCode(to, code) {
        // Development only: config refuses nothing here, so say loudly where the code went.
        deps.log.warn({ to, code }, 'SMTP_URL is not set: one-time connect code written to the log');
      },
      close() {},
    };
  }
  // nodemailer (~3 MB of heap) loads on the first message, not at start.
  const smtpUrl = deps.smtpUrl;
  let transport: Promise<Transporter> | undefined;
  const transportOf = () => (transport ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(smtpUrl, { from })));
  return {
    async sendLoginCode(to, code, context) {
      await (
        await transportOf()
      ).sendMail({
        to,
        subject: `Your sign-in code: ${code}`,
        text: [`Your one-time code is: ${code}`, '', `It connects "${context.clientName}" to one of your agents and expires in 10 minutes.`, 'If you did not ask for it, ignore this message.'].join(
          '\n',
        ),
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
