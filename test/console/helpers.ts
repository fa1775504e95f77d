// Shared by the console tests: the service with a mail sink and a TLS webhook receiver, headless
// Chromium (Debian's /usr/bin/chromium through playwright-core), and an axe-core accessibility check.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CONSOLE_DIST } from '../../src/console/console.js';
import type { Clock } from '../../src/lib/clock.js';
import { repoRoot } from '../helpers/process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startMailSink, type MailSink } from '../oauth/helpers.js';
import { createTestPki, startReceiver, type Receiver } from '../webhooks/helpers/receiver.js';

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
export const ADMIN = 'test-admin-token-0123456789abcdef0123456789';
// Evaluated through the DevTools protocol rather than added as a <script>: the console's CSP
// (script-src 'self') rightly refuses inline scripts, and the test must not switch it off.
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface ConsoleEnv {
  srv: TestServer;
  mail: MailSink;
  browser: Browser;
  receiver: Receiver;
  ca: string;
  close: () => Promise<void>;
}

/** `clock`: the server's injected clock (a test that seeds history on past days). */
export async function startConsoleEnv(opts: { clock?: Clock } = {}): Promise<ConsoleEnv> {
  // Built here too (a second or two), so a single-file run never tests a stale bundle; not under `npm test`, whose
  // pretest built it once: its files run in parallel, and a second build would empty console/dist under the first.
  if (process.env.npm_lifecycle_event !== 'test') execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: repoRoot, stdio: 'ignore' });
  expect(existsSync(`${CONSOLE_DIST}index.html`)).to.equal(true);
  const mail = await startMailSink();
  const pki = await createTestPki();
  const receiver = await startReceiver(pki);
  const srv = await startTestServer({ clock: opts.clock, env: { SMTP_URL: mail.url, ADMIN_TOKEN: ADMIN, UNSAFE_ALLOW_LOOPBACK_TARGETS: 'true' } });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  mkdirSync('test-artifacts', { recursive: true });
  return {
    srv,
    mail,
    browser,
    receiver,
    ca: pki.ca,
    close: async () => {
      await browser.close();
      await srv.close();
      await mail.close();
      await receiver.close();
    },
  };
}

/** An admin call that must succeed; returns the body. */
export const adminApi = (srv: TestServer) => async (method: string, path: string, body?: unknown) => {
  const res = await srv.request(method, path, { headers: { authorization: `Bearer ${ADMIN}` }, body, idempotencyKey: method === 'GET' ? undefined : randomUUID() });
  expect(res.status, `${method} ${path}: ${res.text}`).to.be.lessThan(300);
  return res.body;
};

export const shot = (page: Page, name: string) => page.screenshot({ path: `test-artifacts/console-${name}.png`, fullPage: true });

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}
export interface AxeSummary {
  violations: AxeViolation[];
  passes: string[];
}

/** Runs axe-core (WCAG 2.x A and AA rules plus best practices) over the page as it is now. */
export async function runAxe(page: Page): Promise<AxeSummary> {
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.evaluate(AXE_SOURCE);
  // A string, run in the page: this project's TypeScript has no DOM library.
  return page.evaluate<AxeSummary>(`axe.run(document, { resultTypes: ['violations', 'passes'] }).then((res) => ({
    violations: res.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })) })),
    passes: res.passes.map((p) => p.id),
  }))`);
}

const SERIOUS = new Set(['serious', 'critical']);
/** Serious and critical violations, one line per element, ready for an assertion message. */
export const seriousViolations = (summary: AxeSummary): string[] =>
  summary.violations.filter((v) => SERIOUS.has(v.impact ?? '')).flatMap((v) => v.nodes.map((n) => `${v.impact} ${v.id} (${v.help}) at ${n.target.join(' ')}: ${n.failureSummary ?? ''}`));

/** Fails on any serious or critical axe violation on the page; `where` names the page in the message. */
export async function expectAccessible(page: Page, where: string): Promise<AxeSummary> {
  const summary = await runAxe(page);
  const found = seriousViolations(summary);
  expect(found, `axe on ${where} (${page.viewportSize()?.width}px):\n${found.join('\n')}`).to.deep.equal([]);
  // The run really looked at the page: these rules applied and passed.
  expect(summary.passes, `axe on ${where}`).to.include.members(['html-has-lang', 'document-title', 'color-contrast']);
  return summary;
}
