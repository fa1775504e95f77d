// Sends connect-page one-time codes: nodemailer to SMTP_URL, or the log when no SMTP_URL is set (development).
import nodemailer from 'nodemailer';
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
  const transport = nodemailer.createTransport(deps.smtpUrl, { from });
  return {
    async sendLoginCode(to, code, context) {
      await transport.sendMail({
        to,
        subject: `Your sign-in code: ${code}`,
        text: [
          `Your one-time code is: ${code}`,
          '',
          `It connects "${context.clientName}" to one of your agents and expires in 10 minutes.`,
          'If you did not ask for it, ignore this message.',
        ].join('\n'),
      });
    },
    close() {
      transport.close();
    },
  };
}
