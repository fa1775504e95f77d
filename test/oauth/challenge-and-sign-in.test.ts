// Two protocol slips of issue 29 (item 6): the bearer challenge carries no error code when no credentials were sent
// (RFC 6750 §3.1) and `error="invalid_token"` for a bad token; an e-mail no owner has, given at sign-in, is logged
// outside production (a newcomer sees why no code came) and never in production.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { createSealer } from '../../src/lib/crypto.js';
import { createOAuthService } from '../../src/oauth/oauth.service.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

describe('WWW-Authenticate and sign-in with an unknown e-mail', function () {
  this.timeout(60_000);
  let srv: TestServer;
  before(async () => {
    srv = await startTestServer();
  });
  after(async () => srv?.close());

  describe('the bearer challenge', () => {
    const mcp = (headers: Record<string, string>) => srv.request('POST', '/mcp', { headers: { accept: 'application/json, text/event-stream', ...headers }, body: INIT });

    it('names no error when no credentials were sent', async () => {
      const res = await mcp({});
      expect(res.status).to.equal(401);
      const challenge = res.headers.get('www-authenticate')!;
      expect(challenge).to.equal(`Bearer resource_metadata="${srv.baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    });

    it('says invalid_token for a bad token, on /mcp and on /v1/agent', async () => {
      const res = await mcp({ authorization: 'Bearer not-a-token' });
      expect(res.status).to.equal(401);
      expect(res.headers.get('www-authenticate')).to.include('error="invalid_token"');
      const agent = await srv.request('GET', '/v1/agent/self', { headers: { authorization: 'Bearer not-a-token' } });
      expect(agent.status).to.equal(401);
      expect(agent.headers.get('www-authenticate')).to.include('error="invalid_token"');
    });

    it('says invalid_token for an Authorization header that is no bearer token', async () => {
      const res = await mcp({ authorization: 'Basic dXNlcjpwYXNz' });
      expect(res.headers.get('www-authenticate')).to.include('error="invalid_token"');
    });
  });

  describe('requestLoginCode', () => {
    const serviceFor = (nodeEnv: 'development' | 'production') => {
      const lines: Record<string, unknown>[] = [];
      const log = pino({ level: 'debug', base: undefined }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
      const sent: string[] = [];
      const mailer = { sendLoginCode: async (to: string) => void sent.push(to), close() {} };
      const service = createOAuthService({ clock: srv.clock, sealer: createSealer(srv.config.masterKey), masterKey: srv.config.masterKey, mailer, log, nodeEnv });
      return { service, lines, sent };
    };

    it('logs an unknown e-mail in development, naming it, and sends nothing', async () => {
      const { service, lines, sent } = serviceFor('development');
      const email = `nobody-${randomUUID()}@example.com`;
      expect(await service.requestLoginCode(srv.db, { interactionUid: randomUUID(), email, clientName: 'console' })).to.deep.equal({ throttled: false });
      expect(sent).to.deep.equal([]);
      expect(lines.filter((l) => l.email === email).map((l) => l.msg)).to.deep.equal(['sign-in with an e-mail no owner has: no code was sent (the demo owner is demo@example.com)']);
    });

    it('never logs it in production', async () => {
      const { service, lines, sent } = serviceFor('production');
      const email = `nobody-${randomUUID()}@example.com`;
      await service.requestLoginCode(srv.db, { interactionUid: randomUUID(), email, clientName: 'console' });
      expect(sent).to.deep.equal([]);
      expect(lines.map((l) => JSON.stringify(l)).filter((l) => l.includes(email))).to.deep.equal([]);
    });

    it('logs nothing about a known e-mail (its code goes to the mailer)', async () => {
      const { service, lines, sent } = serviceFor('development');
      const email = `owner-${randomUUID()}@example.com`;
      await srv.services.agents.createOwner(srv.db, { email });
      await service.requestLoginCode(srv.db, { interactionUid: randomUUID(), email, clientName: 'console' });
      await new Promise((r) => setImmediate(r));
      expect(sent).to.deep.equal([email]);
      expect(lines.filter((l) => l.email === email)).to.deep.equal([]);
    });
  });
});
