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
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      reject(new OutboundError(err, status, headers, Buffer.concat(chunks)));
    };
    const succeed = (truncated: boolean) => {
      if (settled) return;
      settled = true;
      resolve({ status: status!, headers, body: Buffer.concat(chunks), truncated });
    };
    const sent: Record<string, string> = { ...input.headers, 'Accept-Encoding': 'identity' };
    if (input.body !== undefined) sent['Content-Length'] = String(Buffer.byteLength(input.body));
    const req = request({ host: target.hostname, port: target.port, path: `${target.url.pathname}${target.url.search}`, method: input.method, agent: input.agent, signal, headers: sent });
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
      res.on('close', () => fail(signal.aborted ? signal.reason : Object.assign(new Error('connection closed while reading the body'), { code: 'ECONNRESET' })));
    });
    req.on('error', fail);
    req.end(input.body);
  });
}
