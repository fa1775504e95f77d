// GET /docs in headless Chromium (Debian's /usr/bin/chromium through playwright-core): Redoc, served by this service,
// renders the served document; the payments operation and its error codes are on the page; nothing is fetched from
// another host.
import { expect } from 'chai';
import { chromium, type Browser } from 'playwright-core';
import { loadDocument } from '../../src/http/operations.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'];

describe('getDocs in a browser', function () {
  this.timeout(180_000);
  let srv: TestServer;
  let browser: Browser;
  before(async () => {
    srv = await startTestServer();
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  });
  after(async () => {
    await browser?.close();
    await srv?.close();
  });

  it('renders createPayment with its error codes, loading nothing from another host', async () => {
    const page = await browser.newPage();
    const origin = new URL(srv.baseUrl).origin;
    // Requests to other hosts that left the browser, and those the page's CSP blocked inside Chromium (Redoc's footer
    // logo from its CDN was one until the served bundle dropped its address).
    const elsewhere: string[] = [];
    const blocked: string[] = [];
    const failed: string[] = [];
    const isElsewhere = (url: string) => /^https?:/.test(url) && new URL(url).origin !== origin;
    page.on('requestfinished', (req) => {
      if (isElsewhere(req.url())) elsewhere.push(req.url());
    });
    page.on('requestfailed', (req) => {
      if (!isElsewhere(req.url())) failed.push(`${req.failure()?.errorText} ${req.url()}`);
      else if (/csp/i.test(req.failure()?.errorText ?? '')) blocked.push(req.url());
      else elsewhere.push(`${req.failure()?.errorText} ${req.url()}`);
    });
    page.on('response', (res) => {
      if (res.status() >= 400) failed.push(`${res.status()} ${res.url()}`);
    });

    await page.goto(`${srv.baseUrl}/docs`, { waitUntil: 'load' });
    // Redoc gives each operation the anchor `operation/<operationId>`.
    const operation = page.locator('[id="operation/createPayment"]');
    await operation.waitFor({ state: 'attached', timeout: 120_000 });
    const text = await operation.innerText();
    expect(text).to.include('Create a payment');
    expect(text).to.include('/v1/agent/payments');
    const codes = loadDocument().paths['/v1/agent/payments'].post['x-error-codes'] as string[];
    expect(codes.length).to.be.greaterThan(10);
    for (const code of codes) expect(text, code).to.include(code);
    expect(await page.title()).to.equal('Agent API reference');
    expect(elsewhere, 'requests to other hosts').to.deep.equal([]);
    expect(blocked, 'requests the CSP blocked').to.deep.equal([]);
    expect(failed, 'failed requests').to.deep.equal([]);
    await page.close();
  });
});
