// Outbound requests to x402 sellers: the webhook URL-safety rules (public HTTPS, every resolved address public, pinned
// connection), one deadline over DNS, connect, TLS, headers and body, no redirects, and a capped body
// (over got, src/webhooks/outbound.ts).
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { sendOutbound, type OutboundError } from '../webhooks/outbound.js';
import { assertPublicHttpsUrl, createPinnedAgent, DnsResolutionError, UrlRejectedError, type Resolver } from '../webhooks/url-safety.js';

/** Most response bytes read from a seller; the rest is dropped and `truncated` set. */
export const MAX_UPSTREAM_BODY_BYTES = 64 * 1024;
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 10_000;
export const USER_AGENT = 'Agent-API-x402/1.0';

export interface UpstreamRequest {
  url: string;
  method: 'GET' | 'POST';
  /** Any JSON, sent with POST. */
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs: number;
}

export interface UpstreamResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
  truncated: boolean;
}

export interface UpstreamOptions {
  allowLoopback: boolean;
  resolver?: Resolver;
  /** Extra trusted CAs (tests); production trusts NODE_EXTRA_CA_CERTS through Node's defaults. */
  ca?: string | Buffer | Array<string | Buffer>;
  maxBodyBytes?: number;
  /** Where a refusal's detail (resolved address, unresolvable name) goes; the caller gets only the reason. */
  log?: Logger;
}

export type UpstreamFetcher = (req: UpstreamRequest) => Promise<UpstreamResponse>;

const upstreamError = (message: string, details: Record<string, unknown> = {}) => new ApiError('upstream_error', message, details);

/** Lower-case names; repeated headers joined with ", ". */
function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}

export function createUpstreamFetcher(options: UpstreamOptions): UpstreamFetcher {
  const maxBytes = options.maxBodyBytes ?? MAX_UPSTREAM_BODY_BYTES;
  return async (req) => {
    const signal = AbortSignal.timeout(req.timeoutMs);
    let target;
    try {
      target = await assertPublicHttpsUrl(req.url, { allowLoopback: options.allowLoopback, resolver: options.resolver, signal });
    } catch (err) {
      if (err instanceof UrlRejectedError || err instanceof DnsResolutionError) options.log?.info({ detail: err.detail }, 'x402 target refused');
      if (err instanceof UrlRejectedError) throw new ApiError('validation_failed', `url is not a public HTTPS URL: ${err.reason}`, { field: 'url', errors: [{ location: 'body', path: '/url', message: err.reason }] });
      if (err instanceof DnsResolutionError) throw upstreamError(err.message, { reason: 'dns_error' });
      throw err;
    }
    const payload = req.method === 'POST' && req.body !== undefined ? Buffer.from(JSON.stringify(req.body), 'utf8') : null;
    const agent = createPinnedAgent({ addresses: target.addresses, ca: options.ca, keepAlive: false });
    try {
      const res = await sendOutbound({
        target,
        method: req.method,
        headers: {
          Accept: 'application/json, */*;q=0.5',
          'User-Agent': USER_AGENT,
          ...(req.headers ?? {}),
          ...(payload ? { 'Content-Type': 'application/json' } : {}),
        },
        body: payload ?? undefined,
        agent,
        signal,
        maxBytes,
      });
      return { status: res.status, headers: flattenHeaders(res.headers), body: res.body, truncated: res.truncated };
    } catch (err) {
      const timedOut = signal.aborted;
      const code = (err as OutboundError).code;
      throw upstreamError(timedOut ? `the target did not answer within ${req.timeoutMs} ms` : `the request to the target failed${code ? ` (${code})` : ''}`, { reason: timedOut ? 'timeout' : 'network_error' });
    } finally {
      agent.destroy();
    }
  };
}

/** The body as JSON when it parses, else as text (binary bytes become U+FFFD). */
export function decodeBody(res: UpstreamResponse): unknown {
  const text = res.body.toString('utf8');
  if (res.truncated) return text;
  const type = res.headers['content-type'] ?? '';
  if (type.includes('json') || /^\s*[[{]/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}
