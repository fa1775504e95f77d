// One outbound HTTPS request over got to a checked target (webhook deliveries, x402 sellers): the
// connection goes through a pinned agent (url-safety), one AbortSignal bounds DNS, connect, TLS,
// headers and body, redirects are never followed, nothing is retried or decompressed, and at most
// `maxBytes` of the body are read.
import type { ClientRequest, IncomingHttpHeaders } from 'node:http';
import type https from 'node:https';
import got from 'got';
import type { SafeTarget } from './url-safety.js';

export interface OutboundRequest {
  target: SafeTarget;
  method: 'GET' | 'POST';
  /** A header set to undefined is not sent (got's own User-Agent, for one). */
  headers: Record<string, string | undefined>;
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

  /** The underlying error's code (ECONNREFUSED, a certificate code, ETIMEDOUT, ERR_ABORTED...). */
  get code(): string {
    return String((this.cause as { code?: unknown })?.code ?? '');
  }
}

// Defaults merged once, not per request.
const client = got.extend({
  followRedirect: false,
  retry: { limit: 0 },
  throwHttpErrors: false,
  decompress: false,
  http2: false,
  cache: false,
});

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
    const stream = client.stream(target.url, {
      method: input.method,
      headers: { 'user-agent': undefined, ...input.headers, 'accept-encoding': 'identity' },
      body: input.body,
      agent: { https: input.agent },
      signal,
    });
    // Belt and braces: the socket must be connected to an address we validated.
    stream.on('request', (req: ClientRequest) => {
      req.on('socket', (socket) => {
        const check = () => {
          const remote = socket.remoteAddress;
          if (remote && !allowed.has(remote)) stream.destroy(Object.assign(new Error(`connected to unvalidated address ${remote}`), { code: 'EPINNED' }));
        };
        if (socket.remoteAddress) check();
        else socket.once('connect', check);
      });
    });
    stream.on('response', (res: { statusCode: number; headers: IncomingHttpHeaders }) => {
      status = res.statusCode;
      headers = res.headers;
    });
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      const room = input.maxBytes - size;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      size += Math.min(chunk.length, room);
      if (chunk.length > room) {
        // Stop reading at the cap: never buffer (or inflate) more than it.
        succeed(true);
        stream.destroy();
      }
    });
    stream.on('end', () => succeed(false));
    stream.on('error', fail);
    stream.on('close', () => fail(signal.aborted ? signal.reason : Object.assign(new Error('connection closed while reading the body'), { code: 'ECONNRESET' })));
  });
}
