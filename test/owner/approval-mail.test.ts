// Issue 27: "The owner also gets an e-mail with a console link." A payment held for approval is mailed to its owner
// (through a real SMTP conversation with a local sink): once, with what, how much, why, until when and the console
// link to that approval; not again by a second pass or a second worker; and a notice the mail server refuses waits
// its backoff without holding back another owner's.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { createFakeClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import { createApprovalMailer, createApprovalNotices, noticeBackoffMs } from '../../src/webhooks/approval-mail.js';
import { startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import type { TestAgent } from '../helpers/server.js';

const PAYEE = '0x00000000000000000000000000000000000a11ce';

interface Sink {
  url: string;
  mails: { to: string; text: string }[];
  refuse: Set<string>;
  close(): Promise<void>;
}

/** An SMTP server on loopback that keeps what it receives and refuses the recipients in `refuse` (550). */
async function startSink(): Promise<Sink> {
  const mails: Sink['mails'] = [];
  const refuse = new Set<string>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (refuse.has(address.address.toLowerCase())) return callback(Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const text = Buffer.concat(chunks)
          .toString('utf8')
          .replace(/=\r?\n/g, '');
        for (const r of session.envelope.rcptTo) mails.push({ to: r.address.toLowerCase(), text });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, mails, refuse, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('approval e-mail (issue 27)', function () {
  this.timeout(60_000);
  let srv: LedgerServer;
  let sink: Sink;
  const clock = createFakeClock('2026-11-27T09:00:00Z');
  const log = createLogger('silent');

  before(async () => {
    sink = await startSink();
    srv = await startLedgerServer();
  });
  after(async () => {
    await srv?.close();
    await sink?.close();
  });
  afterEach(() => {
    sink.mails.length = 0;
    sink.refuse.clear();
  });

  const notices = () => createApprovalNotices({ db: srv.db, clock, log, mailer: createApprovalMailer({ smtpUrl: sink.url, log }), baseUrl: 'https://agents.example.com' });
  const owner = async (): Promise<{ agent: TestAgent; email: string }> => {
    const email = `owner-${randomUUID()}@example.com`;
    const ownerId = (await srv.services.agents.createOwner(srv.db, { email })).owner_id;
    const agent = await srv.createAgent({ ownerId, policy: { operation_types: 'all', allowed_recipients: 'all', approval_threshold_usd: '100' }, fund: { USDC: '1000' } });
    return { agent, email };
  };
  const pay = async (agent: TestAgent, amount: string) => {
    const res = await srv.request('POST', '/v1/agent/payments', { agent, body: { to: PAYEE, asset: 'USDC', amount }, idempotencyKey: randomUUID() });
    expect(res.status, res.text).to.equal(200);
    return res.body as { operation_id: string; approval?: { state: string } };
  };
  const mailsTo = (email: string) => sink.mails.filter((m) => m.to === email.toLowerCase());

  it('mails the owner once, with the amount, the reason, the deadline and the console link to that approval', async () => {
    const { agent, email } = await owner();
    const small = await pay(agent, '50');
    const held = await pay(agent, '300');
    expect(held.approval?.state).to.equal('pending');

    // Two workers' passes at once, then a third: one mail (the row is the outbox, claimed with SKIP LOCKED).
    const [a, b] = await Promise.all([notices().sendDue(), notices().sendDue()]);
    expect(a + b).to.be.greaterThan(0);
    await notices().sendDue();
    const mine = mailsTo(email);
    expect(mine).to.have.length(1);
    const text = mine[0]!.text;
    expect(text).to.include('300 USDC');
    expect(text).to.include('above your approval threshold of 100 USD');
    expect(text).to.include(`https://agents.example.com/console/#/approvals/${held.operation_id}`);
    const row = await srv.db('operations').where({ id: held.operation_id }).first();
    expect(text).to.include(row.approval_expires_at.toISOString());
    expect(row.approval_notified_at).to.not.equal(null);
    // The payment below the threshold needed no approval and sent nothing.
    expect(text).to.not.include(small.operation_id);
  });

  it("defers a notice the mail server refuses without holding back another owner's, and sends it once accepted", async () => {
    const refused = await owner();
    const other = await owner();
    const first = await pay(refused.agent, '200');
    await pay(other.agent, '250');
    sink.refuse.add(refused.email.toLowerCase());

    await notices().sendDue();
    expect(mailsTo(refused.email)).to.have.length(0);
    expect(mailsTo(other.email)).to.have.length(1);
    let row = await srv.db('operations').where({ id: first.operation_id }).first();
    expect(row.approval_notified_at).to.equal(null);
    expect(row.approval_notice_attempts).to.equal(1);
    expect(row.approval_notice_after.getTime()).to.equal(clock.now().getTime() + noticeBackoffMs(1));

    // Before its retry time the refused notice is not tried again, even with the server accepting now.
    sink.refuse.clear();
    await notices().sendDue();
    expect(mailsTo(refused.email)).to.have.length(0);
    clock.advance(noticeBackoffMs(1));
    await notices().sendDue();
    expect(mailsTo(refused.email)).to.have.length(1);
    row = await srv.db('operations').where({ id: first.operation_id }).first();
    expect(row.approval_notified_at).to.not.equal(null);
    await notices().sendDue();
    expect(mailsTo(refused.email)).to.have.length(1);
    expect(mailsTo(other.email)).to.have.length(1);
  });

  it('backs off by doubling from 2 s to at most an hour', () => {
    expect([1, 2, 3, 4].map(noticeBackoffMs)).to.deep.equal([2_000, 4_000, 8_000, 16_000]);
    expect(noticeBackoffMs(12)).to.equal(3_600_000);
    expect(noticeBackoffMs(500)).to.equal(3_600_000);
  });
});
