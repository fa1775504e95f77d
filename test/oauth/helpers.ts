// OAuth test helpers: a loopback SMTP sink, a cookie-jar browser over fetch, and the connect-page walk.
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { expect } from 'chai';

export interface MailSink {
  url: string;
  /** Resolves with the 6-digit code of the next mail to `to` (or one already received and not yet taken). */
  nextCode(to: string, timeoutMs?: number): Promise<string>;
  received(to: string): number;
  /** Every mail's text (quoted-printable soft breaks joined), in arrival order. */
  texts(to: string): string[];
  close(): Promise<void>;
}

export async function startMailSink(): Promise<MailSink> {
  const inbox = new Map<string, string[]>();
  const counts = new Map<string, number>();
  const texts = new Map<string, string[]>();
  const waiters = new Map<string, ((code: string) => void)[]>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const code = /one-time code is: (\d{6})/.exec(text)?.[1];
        for (const rcpt of session.envelope.rcptTo) {
          const to = rcpt.address.toLowerCase();
          counts.set(to, (counts.get(to) ?? 0) + 1);
          texts.set(to, [...(texts.get(to) ?? []), text.replace(/=\r?\n/g, '')]);
          if (!code) continue;
          const waiting = waiters.get(to)?.shift();
          if (waiting) waiting(code);
          else inbox.set(to, [...(inbox.get(to) ?? []), code]);
        }
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received: (to) => counts.get(to.toLowerCase()) ?? 0,
    texts: (to) => texts.get(to.toLowerCase()) ?? [],
    nextCode(to, timeoutMs = 5000) {
      const key = to.toLowerCase();
      const queued = inbox.get(key);
      if (queued?.length) return Promise.resolve(queued.shift()!);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no mail to ${to} within ${timeoutMs} ms`)), timeoutMs);
        waiters.set(key, [
          ...(waiters.get(key) ?? []),
          (code) => {
            clearTimeout(timer);
            resolve(code);
          },
        ]);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A minimal browser: a cookie jar (name -> value, paths ignored) and manual redirects. */
export class Browser {
  readonly cookies = new Map<string, string>();

  async fetch(
    url: string,
    init: { method?: string; form?: Record<string, string | string[]>; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; location: string | null; text: string; headers: Headers }> {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (this.cookies.size) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(init.form)) for (const one of ([] as string[]).concat(v)) params.append(k, one);
      body = params.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await fetch(url, { method: init.method ?? (init.form ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=/i.test(a) && new Date(a.split('=')[1]!) < new Date()) || attrs.some((a) => /^\s*max-age=0/i.test(a));
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const location = res.headers.get('location');
    return { status: res.status, location: location ? new URL(location, url).href : null, text: await res.text(), headers: res.headers };
  }
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const csrfOf = (html: string): string => {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error(`no csrf field in page: ${html.slice(0, 300)}`);
  return m[1]!;
};

export interface ConnectChoice {
  email: string;
  agentId: string;
  /** Scopes left ticked; default: all requested. */
  scopes?: string[];
  deny?: boolean;
}

/**
 * Walks /oauth/auth -> /connect/<uid> (e-mail, code, agent, scopes) -> /oauth/auth/<uid> and returns
 * the final redirect to the client (with code or error).
 */
export async function authorizeThroughConnect(browser: Browser, authorizationUrl: string, mail: MailSink, choice: ConnectChoice): Promise<URL> {
  const start = await browser.fetch(authorizationUrl);
  expect(start.status, start.text).to.equal(303);
  expect(start.location).to.match(/\/connect\/[^/]+$/);
  const connectUrl = start.location!;
  const first = await browser.fetch(connectUrl);
  expect(first.status, first.text).to.equal(200);
  expect(first.text).to.include('type="email"');
  const csrf = csrfOf(first.text);

  if (choice.deny) {
    const denied = await browser.fetch(connectUrl, { form: { csrf, action: 'deny' } });
    return followToClient(browser, denied);
  }

  const codePage = await browser.fetch(connectUrl, { form: { csrf, action: 'email', email: choice.email } });
  expect(codePage.status, codePage.text).to.equal(200);
  expect(codePage.text).to.include('name="code"');
  const code = await mail.nextCode(choice.email);
  const consent = await browser.fetch(connectUrl, { form: { csrf, action: 'code', code } });
  expect(consent.status, consent.text).to.equal(200);
  expect(consent.text).to.include(`value="${choice.agentId}"`);
  const ticked = choice.scopes ?? [...consent.text.matchAll(/name="scope" value="([^"]+)"/g)].map((m) => m[1]!);
  const approved = await browser.fetch(connectUrl, { form: { csrf, action: 'approve', agent_id: choice.agentId, scope: ticked } });
  return followToClient(browser, approved);
}

async function followToClient(browser: Browser, res: { status: number; location: string | null; text: string }): Promise<URL> {
  expect(res.status, res.text).to.equal(303);
  let location = res.location!;
  for (let hops = 0; hops < 5 && new URL(location).pathname.startsWith('/oauth/'); hops += 1) {
    const next = await browser.fetch(location);
    expect(next.status, next.text).to.be.oneOf([302, 303]);
    location = next.location!;
  }
  return new URL(location);
}

/** A random documentation-range address, sent as X-Forwarded-For so per-address throttles do not collide between tests. */
export const uniqueAddress = (): string => `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]! | 1}`;

export async function registerClient(baseUrl: string, metadata: Record<string, unknown>, address = uniqueAddress()): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}/oauth/reg`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
    body: JSON.stringify(metadata),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export async function tokenRequest(baseUrl: string, params: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export function authorizationUrl(baseUrl: string, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) query.set(k, v);
  return `${baseUrl}/oauth/auth?${query.toString()}`;
}
