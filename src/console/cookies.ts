// The console's cookies: the owner session (HttpOnly, SameSite=Lax, Secure outside development) and
// the short-lived sign-in cookie that ties a one-time code to the browser that asked for it.
import type { Request } from 'express';

export const OWNER_SESSION_COOKIE = 'owner_session';
export const CONSOLE_LOGIN_COOKIE = 'console_login';

/** One cookie's value from the Cookie header (no dependency: names here are fixed and simple). */
export function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}

export function cookieHeader(name: string, value: string, opts: { secure: boolean; maxAgeSeconds: number; path?: string }): string {
  const parts = [`${name}=${value}`, `Path=${opts.path ?? '/'}`, `Max-Age=${opts.maxAgeSeconds}`, 'HttpOnly', 'SameSite=Lax'];
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}
