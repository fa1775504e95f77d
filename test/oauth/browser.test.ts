// The connect page in headless Chromium (Debian's /usr/bin/chromium through playwright-core), with a screenshot artefact.
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { chromium, type Browser as Chromium } from 'playwright-core';
import { createFakeClock } from '../../src/lib/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { authorizationUrl, pkcePair, registerClient, startMailSink, tokenRequest, type MailSink } from './helpers.js';

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

describe('connect page in headless Chromium', function () {
  this.timeout(60_000);
  let server: TestServer;
  let mail: MailSink;
  let browser: Chromium;
  let callbackServer: Server;
  let callbackUrl: string;

  before(async () => {
    mail = await startMailSink();
    server = await startTestServer({ clock: createFakeClock(new Date()), env: { SMTP_URL: mail.url, TRUST_PROXY: 'true' } });
    callbackServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>connected</p>'));
    await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  });

  after(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (callbackServer ? callbackServer.close(() => resolve()) : resolve()));
    await server?.close();
    await mail?.close();
  });

  it('signs in with an e-mailed code, picks an agent, unticks a scope and returns a code to the client', async () => {
    const email = `browser-${Date.now()}@example.com`;
    const { owner_id } = await server.services.agents.createOwner(server.db, { email });
    await server.createAgent({ ownerId: owner_id, name: 'Shopping agent' });
    const chosen = (await server.createAgent({ ownerId: owner_id, name: 'Research agent' })).agentId;
    const reg = await registerClient(server.baseUrl, { redirect_uris: [callbackUrl], client_name: 'Chromium test app' });
    expect(reg.status).to.equal(201);
    const clientId = reg.body.client_id as string;
    const resource = `${server.baseUrl}/v1/agent`;
    const { verifier, challenge } = pkcePair();
    const url = authorizationUrl(server.baseUrl, {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: callbackUrl,
      scope: 'agent:read agent:payments:write agent:webhooks:manage',
      resource,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'browser-state',
    });

    const page = await browser.newPage();
    await page.goto(url);
    expect(new URL(page.url()).pathname).to.match(/^\/connect\/[^/]+$/);
    expect(await page.textContent('h1')).to.include('Chromium test app');

    await page.fill('input[type="email"]', email);
    await page.click('text=Send me a code');
    await page.waitForSelector('input[name="code"]');
    await page.fill('input[name="code"]', await mail.nextCode(email));
    await page.click('text=Continue');
    await page.waitForSelector('input[name="agent_id"]');

    await page.check(`input[name="agent_id"][value="${chosen}"]`);
    await page.uncheck('input[name="scope"][value="agent:webhooks:manage"]');
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/oauth-connect-consent.png', fullPage: true });

    await Promise.all([page.waitForURL((u) => u.href.startsWith(callbackUrl)), page.click('text=Approve')]);
    const back = new URL(page.url());
    expect(back.searchParams.get('state')).to.equal('browser-state');
    expect(back.searchParams.get('iss')).to.equal(server.baseUrl);
    const code = back.searchParams.get('code');
    expect(code).to.be.a('string');
    await page.close();

    const tokens = await tokenRequest(server.baseUrl, { grant_type: 'authorization_code', code: code!, code_verifier: verifier, redirect_uri: callbackUrl, client_id: clientId, resource });
    expect(tokens.status).to.equal(200);
    const claims = decodeJwt(tokens.body.access_token as string);
    expect(claims.sub).to.equal(chosen);
    expect(String(claims.scope).split(' ').sort()).to.deep.equal(['agent:payments:write', 'agent:read']);
    const res = await server.request('GET', '/v1/agent/self', { headers: { authorization: `Bearer ${tokens.body.access_token as string}` } });
    expect(res.status).to.equal(200);
    expect(res.text).to.include(chosen);
  });
});
