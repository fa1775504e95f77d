// Outbound requests to x402 sellers, sent with got: the webhook URL-safety rules (public HTTPS, every resolved address
// public, a connection pinned to them), one deadline over DNS, connect, TLS, headers and body, no redirects, no retries,
// no decompression, and a capped body. (Webhook deliveries stay on node:https, src/webhooks/outbound.ts: got cost more
// than the 10 % of delivery throughput allowed for it; a purchase is one request, where got's cost does not show.)
import type { IncomingHttpHeaders } from 'node:http';
import type https from 'node:https';
import type { Got } from 'got';
import { ApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { assertPublicHttpsUrl, createPinnedAgent, DnsResolutionError, UrlRejectedError, type Resolver, type SafeTarget } from '../webhooks/url-safety.js';

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
    // got (with http2-wrapper, cacheable-request and keyv, ~3 MB of heap) loads at the first purchase, not at start (the
    // start-up footprint, issue 12 P4): before the deadline starts, and outside the try below, so a missing package fails
    // loudly instead of as a network error.
    const { default: got } = await import('got');
    const deadline = Date.now() + req.timeoutMs;
    const signal = AbortSignal.timeout(req.timeoutMs);
    let target;
    try {
      target = await assertPublicHttpsUrl(req.url, { allowLoopback: options.allowLoopback, resolver: options.resolver, signal });
    } catch (err) {
      if (err instanceof UrlRejectedError || err instanceof DnsResolutionError) options.log?.info({ detail: err.detail }, 'x402 target refused');
      if (err instanceof UrlRejectedError)
        throw new ApiError('validation_failed', `url is not a public HTTPS URL: ${err.reason}`, { field: 'url', errors: [{ location: 'body', path: '/url', message: err.reason }] });
      if (err instanceof DnsResolutionError) throw upstreamError(err.message, { reason: 'dns_error' });
      throw err;
    }
    const payload = req.method === 'POST' && req.body !== undefined ? Buffer.from(JSON.stringify(req.body), 'utf8') : null;
    const agent = createPinnedAgent({ addresses: target.addresses, ca: options.ca, keepAlive: false });
    try {
      const headers = { Accept: 'application/json, */*;q=0.5', 'User-Agent': USER_AGENT, ...(req.headers ?? {}), ...(payload ? { 'Content-Type': 'application/json' } : {}) };
      // What is left of the one deadline after DNS bounds connect, TLS, headers and body (got's request timeout).
      return await sendWithGot(got, target, { method: req.method, headers, body: payload, agent, timeoutMs: Math.max(1, deadline - Date.now()), maxBytes });
    } catch (err) {
      const code = String((err as { code?: unknown }).code ?? '');
      const timedOut = signal.aborted || code === 'ETIMEDOUT';
      throw upstreamError(timedOut ? `the target did not answer within ${req.timeoutMs} ms` : `the request to the target failed${code ? ` (${code})` : ''}`, {
        reason: timedOut ? 'timeout' : 'network_error',
      });
    } finally {
      agent.destroy();
    }
  };
}

/**
 * One request through got's stream API, so the body is read only up to `maxBytes` (then the socket is dropped and
 * `truncated` set). The agent pins the connection to the validated addresses; the socket's remote address is checked
 * again once connected (belt and braces).
 */
async function sendWithGot(
  got: Got,
  target: SafeTarget,
  req: { method: 'GET' | 'POST'; headers: Record<string, string>; body: Buffer | null; agent: https.Agent; timeoutMs: number; maxBytes: number },
): Promise<UpstreamResponse> {
  const allowed = new Set(target.addresses.map((a) => a.address));
  const stream = got.stream(target.url, {
    method: req.method,
    headers: { ...req.headers, 'Accept-Encoding': 'identity' },
    ...(req.body ? { body: req.body } : {}),
    agent: { https: req.agent },
    timeout: { request: req.timeoutMs },
    followRedirect: false,
    throwHttpErrors: false,
    decompress: false,
    retry: { limit: 0 },
  });
  stream.on('request', (clientRequest: import('node:http').ClientRequest) => {
    clientRequest.on('socket', (socket) => {
      const check = () => {
        const remote = socket.remoteAddress;
        if (remote && !allowed.has(remote)) stream.destroy(Object.assign(new Error(`connected to unvalidated address ${remote}`), { code: 'EPINNED' }));
      };
      if (socket.remoteAddress) check();
      else socket.once('connect', check);
    });
  });
  let status = 0;
  let headers: IncomingHttpHeaders = {};
  stream.on('response', (res: { statusCode: number; headers: IncomingHttpHeaders }) => {
    status = res.statusCode;
    headers = res.headers;
  });
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    const room = req.maxBytes - size;
    chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
    size += Math.min(chunk.length, room);
    if (chunk.length > room) {
      // Stop reading at the cap: never buffer more than it.
      truncated = true;
      break;
    }
  }
  // Done reading (or at the cap): drop the connection; a late error from it has nobody left to tell.
  stream.on('error', () => {});
  stream.destroy();
  return { status, headers: flattenHeaders(headers), body: Buffer.concat(chunks), truncated };
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
