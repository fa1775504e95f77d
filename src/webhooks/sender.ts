// One webhook HTTP attempt: pinned connection, one deadline for everything, no redirects, 4 KB read cap.
import type https from 'node:https';
import { request } from 'node:https';
import { createPinnedAgent, type SafeTarget } from './url-safety.js';

export const MAX_RESPONSE_BYTES = 4096;
export const MAX_PAYLOAD_BYTES = 256 * 1024;
export const USER_AGENT = 'Service-Webhooks/1.0';

/** Delivery error classes (contract §11). */
export type ErrorClass =
  | 'dns_error'
  | 'connect_error'
  | 'timeout'
  | 'tls_error'
  | 'http_3xx'
  | 'http_4xx'
  | 'http_5xx'
  | 'http_408'
  | 'http_429'
  | 'url_rejected'
  | 'payload_too_large'
  | 'retries_exhausted'
  | 'endpoint_disabled';

const RETRYABLE: ReadonlySet<ErrorClass> = new Set(['dns_error', 'connect_error', 'timeout', 'http_408', 'http_429', 'http_5xx']);

/** Spec 3.2: network errors, timeouts, 408, 429 and 5xx are retried; everything else is terminal. */
export const isRetryable = (errorClass: ErrorClass): boolean => RETRYABLE.has(errorClass);

/** null means delivered (2xx). */
export function classifyStatus(status: number): ErrorClass | null {
  if (status >= 200 && status < 300) return null;
  if (status >= 300 && status < 400) return 'http_3xx';
  if (status === 408) return 'http_408';
  if (status === 429) return 'http_429';
  if (status >= 400 && status < 500) return 'http_4xx';
  return 'http_5xx';
}

const TLS_CODES = /CERT|ALTNAME|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|HOSTNAME_MISMATCH|MD_TOO_WEAK|KEY_TOO_SMALL/;

export function classifyNetworkError(err: unknown, timedOut: boolean): ErrorClass {
  if (timedOut) return 'timeout';
  const code = String((err as { code?: unknown })?.code ?? '');
  const name = String((err as { name?: unknown })?.name ?? '');
  if (name === 'AbortError' || name === 'TimeoutError' || code === 'ABORT_ERR') return 'timeout';
  if (TLS_CODES.test(code)) return 'tls_error';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_error';
  return 'connect_error';
}

export interface SendInput {
  target: SafeTarget;
  body: string;
  headers: Record<string, string>;
  /** The attempt's one deadline (DNS already spent part of it). */
  signal: AbortSignal;
}

export interface SendResult {
  httpStatus: number | null;
  /** Up to 4 KB of the raw response, never decompressed. */
  responseBody: string;
  errorClass: ErrorClass | null;
  retryAfter: string | null;
  message: string | null;
}

export interface SenderOptions {
  /** Extra trusted CAs (tests). Production adds CAs with NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer | Array<string | Buffer>;
  keepAlive?: boolean;
  maxResponseBytes?: number;
}

export interface Sender {
  send(input: SendInput): Promise<SendResult>;
  close(): void;
}

/** Postgres text cannot hold NUL; a binary (e.g. gzip) body is kept as lossy UTF-8. */
const toStoredText = (bytes: Buffer): string => bytes.toString('utf8').replace(/\u0000/g, '\uFFFD');

export function createSender(options: SenderOptions = {}): Sender {
  const maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  // One keep-alive agent per (host, validated address set): a pooled socket stays on a validated IP.
  const agents = new Map<string, https.Agent>();
  const agentFor = (target: SafeTarget): https.Agent => {
    const key = `${target.hostname}|${target.port}|${target.addresses.map((a) => a.address).sort().join(',')}`;
    let agent = agents.get(key);
    if (!agent) {
      if (agents.size >= 256) {
        const [oldestKey, oldest] = agents.entries().next().value as [string, https.Agent];
        oldest.destroy();
        agents.delete(oldestKey);
      }
      agent = createPinnedAgent({ addresses: target.addresses, ca: options.ca, keepAlive: options.keepAlive ?? true });
      agents.set(key, agent);
    }
    return agent;
  };

  return {
    send(input) {
      const { target, signal } = input;
      const allowed = new Set(target.addresses.map((a) => a.address));
      return new Promise<SendResult>((resolve) => {
        let settled = false;
        let status: number | null = null;
        const chunks: Buffer[] = [];
        let size = 0;
        const finish = (errorClass: ErrorClass | null, retryAfter: string | null, message: string | null) => {
          if (settled) return;
          settled = true;
          resolve({ httpStatus: status, responseBody: toStoredText(Buffer.concat(chunks)), errorClass, retryAfter, message });
        };
        if (signal.aborted) return finish('timeout', null, 'deadline reached before connecting');

        const req = request({
          host: target.hostname,
          port: target.port,
          path: `${target.url.pathname}${target.url.search}`,
          method: 'POST',
          agent: agentFor(target),
          signal,
          headers: {
            ...input.headers,
            'Accept-Encoding': 'identity',
            'Content-Length': String(Buffer.byteLength(input.body)),
          },
        });
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
          status = res.statusCode ?? null;
          const errorClass = status === null ? 'connect_error' : classifyStatus(status);
          const retryAfter = typeof res.headers['retry-after'] === 'string' ? res.headers['retry-after'] : null;
          const done = () => finish(errorClass, retryAfter, null);
          res.on('data', (chunk: Buffer) => {
            if (settled) return;
            const room = maxBytes - size;
            chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
            size += Math.min(chunk.length, room);
            if (size >= maxBytes) {
              // Stop reading: never inflate or buffer more than the cap (gzip bombs stay compressed).
              done();
              res.destroy();
            }
          });
          res.on('end', done);
          res.on('error', (err) => finish(signal.aborted ? 'timeout' : classifyNetworkError(err, false), retryAfter, err.message));
          res.on('close', () => {
            if (!settled) finish(signal.aborted ? 'timeout' : errorClass, retryAfter, signal.aborted ? 'deadline reached while reading the body' : null);
          });
        });
        req.on('error', (err) => finish(classifyNetworkError(err, signal.aborted), null, err.message));
        req.end(input.body);
      });
    },
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}
