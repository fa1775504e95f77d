// Connect-page one-time codes without SMTP: development writes them to the log (production refuses to start, see config).
import { expect } from 'chai';
import { pino } from 'pino';
import { createLoginCodeMailer } from '../../src/oauth/mailer.js';

describe('createLoginCodeMailer', () => {
  it('writes the code to the log when SMTP_URL is unset in development', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'info', base: undefined }, { write: (line: string) => lines.push(line) });
    const mailer = createLoginCodeMailer({ smtpUrl: null, log, nodeEnv: 'development' });
    await mailer.sendLoginCode('owner@example.com', '966350', { clientName: 'app' });
    expect(lines).to.have.length(1);
    expect(JSON.parse(lines[0]!)).to.include({ code: '966350', to: 'owner@example.com' });
  });
});
