// The owner console at /console: the built single-page application (console/dist, from `npm run
// build:console`) and its sign-in, the same e-mail one-time code as /connect, which opens a session
// cookie. Everything else the console does goes through the owner API (/v1/owner) with that cookie.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import express, { type Express, type Request, type Response } from 'express';
import type { Knex } from 'knex';
import type { Config } from '../config.js';
import { clientAddress, header } from '../http/request.js';
import { errorBody } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { isPlausibleEmail } from '../oauth/oauth.service.js';
import type { Services } from '../services/registry.js';
import { SESSION_TTL_MS } from '../services/owner.service.js';
import { CONSOLE_LOGIN_COOKIE, cookieHeader, OWNER_SESSION_COOKIE, readCookie } from './cookies.js';

export const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist/', import.meta.url));
const ADDRESS_THROTTLE = { limit: 30, windowMs: 10 * 60 * 1000 };

export function mountConsole(app: Express, deps: { config: Readonly<Config>; db: Knex; services: Services; log: Logger }): void {
  const { config, db, services } = deps;
  const secure = config.nodeEnv !== 'development';
  const json = express.json({ limit: '4kb' });
  const loginUid = (id: string) => `console:${id}`;
  const fail = (res: Response, status: number, code: Parameters<typeof errorBody>[0], message: string) => res.status(status).json(errorBody(code, message));

  app.post('/console/auth/code', json, async (req: Request, res: Response) => {
    const email = typeof req.body?.email === 'string' ? req.body.email.trim() : '';
    if (!isPlausibleEmail(email)) return fail(res, 400, 'validation_failed', 'Enter a valid e-mail address.');
    const byAddress = await services.oauth.throttle(db, `console-code:${clientAddress(req)}`, ADDRESS_THROTTLE);
    if (!byAddress.allowed) return fail(res.setHeader('Retry-After', String(byAddress.retryAfterSeconds)), 429, 'rate_limited', 'Too many codes were requested; try again later.');
    const id = randomUUID();
    const { throttled } = await services.oauth.requestLoginCode(db, { interactionUid: loginUid(id), email, clientName: 'the Agent API console' });
    if (throttled) return fail(res, 429, 'rate_limited', 'Too many codes were requested for this address. Try again in a few minutes.');
    res.setHeader('Set-Cookie', cookieHeader(CONSOLE_LOGIN_COOKIE, id, { secure, maxAgeSeconds: 600, path: '/console/auth' }));
    // The same answer whether or not the address has an account.
    res.json({ ok: true });
  });

  app.post('/console/auth/verify', json, async (req: Request, res: Response) => {
    const id = readCookie(req, CONSOLE_LOGIN_COOKIE);
    const code = typeof req.body?.code === 'string' ? req.body.code : '';
    if (!id) return fail(res, 400, 'validation_failed', 'Ask for a code first.');
    const check = await services.oauth.verifyLoginCode(db, { interactionUid: loginUid(id), code });
    if (!check.ok) {
      const message = check.reason === 'invalid' ? `That code is not right (${check.attemptsLeft} attempts left).` : 'That code can no longer be used; ask for a new one.';
      return fail(res, 401, 'authentication_failed', message);
    }
    const session = await services.owner.createSession(db, check.ownerId);
    await services.owner.audit(db, {
      ownerId: check.ownerId,
      actor: { kind: 'owner', ownerId: check.ownerId, tokenId: null, clientAddress: clientAddress(req), requestId: String(res.getHeader('X-Request-Id') ?? '') },
      action: 'console.sign_in',
    });
    res.setHeader('Set-Cookie', [
      cookieHeader(OWNER_SESSION_COOKIE, session.token, { secure, maxAgeSeconds: SESSION_TTL_MS / 1000 }),
      cookieHeader(CONSOLE_LOGIN_COOKIE, '', { secure, maxAgeSeconds: 0, path: '/console/auth' }),
    ]);
    res.json({ ok: true, owner_id: check.ownerId, csrf_token: session.csrfToken });
  });

  // Passkey sign-in (issue 27): the same owner session as the e-mailed code, from an assertion of a discoverable
  // passkey over a single-use challenge of 5 minutes. The code stays the fallback and the first sign-in.
  app.post('/console/auth/passkey/options', json, async (req: Request, res: Response) => {
    const byAddress = await services.oauth.throttle(db, `console-passkey:${clientAddress(req)}`, ADDRESS_THROTTLE);
    if (!byAddress.allowed) return fail(res.setHeader('Retry-After', String(byAddress.retryAfterSeconds)), 429, 'rate_limited', 'Too many sign-in attempts; try again later.');
    res.setHeader('Cache-Control', 'no-store');
    res.json({ ok: true, ...(await services.passkeys.assertionOptions(db, { purpose: 'sign_in' })) });
  });

  app.post('/console/auth/passkey/verify', express.json({ limit: '16kb' }), async (req: Request, res: Response) => {
    let proof;
    try {
      proof = await services.passkeys.verifyAssertion(db, req.body?.response, { purpose: 'sign_in' });
    } catch (err) {
      return fail(res, 401, 'authentication_failed', err instanceof Error ? err.message : 'The passkey was refused.');
    }
    const session = await services.owner.createSession(db, proof.ownerId);
    await services.owner.audit(db, {
      ownerId: proof.ownerId,
      actor: { kind: 'owner', ownerId: proof.ownerId, tokenId: null, clientAddress: clientAddress(req), requestId: String(res.getHeader('X-Request-Id') ?? '') },
      action: 'console.sign_in',
      details: { method: 'passkey', passkey_id: proof.passkeyId },
    });
    res.setHeader('Set-Cookie', cookieHeader(OWNER_SESSION_COOKIE, session.token, { secure, maxAgeSeconds: SESSION_TTL_MS / 1000 }));
    res.json({ ok: true, owner_id: proof.ownerId, csrf_token: session.csrfToken });
  });

  app.get('/console/auth/session', async (req: Request, res: Response) => {
    const token = readCookie(req, OWNER_SESSION_COOKIE);
    const session = token ? await services.owner.authenticateSession(db, token) : undefined;
    if (!session) return fail(res, 401, 'authentication_failed', 'Not signed in.');
    res.setHeader('Cache-Control', 'no-store');
    res.json({ ok: true, owner_id: session.ownerId, email: session.email, csrf_token: session.csrfToken });
  });

  app.post('/console/auth/logout', async (req: Request, res: Response) => {
    const token = readCookie(req, OWNER_SESSION_COOKIE);
    const session = token ? await services.owner.authenticateSession(db, token) : undefined;
    if (session && header(req, 'x-csrf-token') !== session.csrfToken) return fail(res, 401, 'authentication_failed', 'Signing out needs the X-CSRF-Token header of the session.');
    if (session) await services.owner.endSession(db, session.sessionId);
    res.setHeader('Set-Cookie', cookieHeader(OWNER_SESSION_COOKIE, '', { secure, maxAgeSeconds: 0 }));
    res.json({ ok: true });
  });

  // The application itself: hashed assets under /console/assets, index.html for every other page.
  const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
  app.use('/console', (_req, res, next) => {
    res.setHeader('Content-Security-Policy', csp);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  app.use('/console', express.static(CONSOLE_DIST, { index: false, fallthrough: true, maxAge: '1h' }));
  app.get(['/console', '/console/{*rest}'], (_req, res) => {
    const index = `${CONSOLE_DIST}index.html`;
    if (!existsSync(index)) return fail(res, 503, 'service_unavailable', 'The console is not built: run npm run build:console.');
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
}
