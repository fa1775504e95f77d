// One outbound HTTPS request to a checked target (webhook deliveries, x402 sellers): the connection
// goes through a pinned agent (url-safety), one AbortSignal bounds DNS, connect, TLS, headers and
// body, redirects are never followed, nothing is retried or decompressed (identity encoding), and at
// most `maxBytes` of the body are read. node:https rather than got: got cost more than the 10 % of
// delivery throughput allowed for it (docs/ARCHITECTURE.md, "Outbound HTTP").
import type { IncomingHttpHeaders } from 'node:http';
import type https from 'node:https';
import { request } from 'node:https';
import type { SafeTarget } from './url-safety.js';

export interface OutboundRequest {
  target: SafeTarget;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string | Buffer;
  /** A pinned agent (createPinnedAgent) for the target's validated addresses. */
  agent: https.Agent;
  signal: AbortSignal;
  maxBytes: number;
}

export interface OutboundResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body was longer than `maxBytes`; the rest was not read. */
  truncated: boolean;
}

/** The request failed; `status` is set when it failed after the response headers arrived. */
export class OutboundError extends Error {
  constructor(
    override readonly cause: unknown,
    readonly status: number | null,
    readonly headers: IncomingHttpHeaders,
    readonly body: Buffer,
  ) {
    super((cause as Error)?.message ?? String(cause), { cause });
    this.name = 'OutboundError';
  }

  /** The underlying error's code (ECONNREFUSED, a certificate code, ABORT_ERR...). */
  get code(): string {
    return String((this.cause as { code?: unknown })?.code ?? '');
  }
}

/** What node:http's `signal` option destroys a request with (an AbortError whose cause is the signal's reason). */
const abortError = (signal: AbortSignal): Error => Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' });

/** Sends the request and reads the body up to the cap; rejects with OutboundError. */
export function sendOutbound(input: OutboundRequest): Promise<OutboundResponse> {
  const { target, signal } = input;
  const allowed = new Set(target.addresses.map((a) => a.address));
  return new Promise((resolve, reject) => {
    let settled = false;
    let status: number | null = null;
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    // The deadline destroys the request as node:http's `signal` option would; that option also watches the request's
    // end with five stream listeners, which cost more than the rest of this function: the listener goes when settled.
    const onAbort = () => req.destroy(abortError(signal));
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      reject(new OutboundError(err, status, headers, Buffer.concat(chunks)));
    };
    const succeed = (truncated: boolean) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      resolve({ status: status!, headers, body: Buffer.concat(chunks), truncated });
    };
    const sent: Record<string, string> = { ...input.headers, 'Accept-Encoding': 'identity' };
    if (input.body !== undefined) sent['Content-Length'] = String(Buffer.byteLength(input.body));
    const req = request({ host: target.hostname, port: target.port, path: `${target.url.pathname}${target.url.search}`, method: input.method, agent: input.agent, headers: sent });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    // Belt and braces: the socket must be connected to an address we validated.
    req.on('socket', (socket) => {
      const check = () => {
        const remote = socket.remoteAddress;
        if (remote && !allowed.has(remote)) req.destroy(Object.assign(new Error(`connected to unvalidated address ${remote}`), { code: 'EPINNED' }));
      };
      if (socket.remoteAddress) check();
      else socket.once('connect', check);
    });
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      headers = res.headers;
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        const room = input.maxBytes - size;
        chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
        size += Math.min(chunk.length, room);
        if (chunk.length > room) {
          // Stop reading at the cap: never buffer (or inflate) more than it.
          succeed(true);
          res.destroy();
        }
      });
      res.on('end', () => succeed(false));
      res.on('error', fail);
      // 'close' follows every response; only one not settled by then failed (an Error costs its stack trace: ~10 us).
      res.on('close', () => {
        if (!settled) fail(signal.aborted ? signal.reason : Object.assign(new Error('connection closed while reading the body'), { code: 'ECONNRESET' }));
      });
    });
    req.on('error', fail);
    req.end(input.body);
  });
}
