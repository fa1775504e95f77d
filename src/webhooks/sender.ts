// One webhook HTTP attempt (node:https, src/webhooks/outbound.ts): pinned connection, one deadline for
// everything, no redirects, 4 KB read cap.
import type { IncomingHttpHeaders } from 'node:http';
import type https from 'node:https';
import { sendOutbound, type OutboundError } from './outbound.js';
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
  /**
   * Whose keep-alive pool the connection comes from (the endpoint id): endpoints on one host get
   * separate pools, so the sockets held by a slow endpoint cannot queue another endpoint's requests.
   */
  poolKey?: string;
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
/** Keep-alive pools kept open at once (one per endpoint recently delivered to). */
const MAX_AGENTS = 1024;

const toStoredText = (bytes: Buffer): string => bytes.toString('utf8').replace(/\u0000/g, '\uFFFD');
const retryAfterOf = (headers: IncomingHttpHeaders): string | null => (typeof headers['retry-after'] === 'string' ? headers['retry-after'] : null);

export function createSender(options: SenderOptions = {}): Sender {
  const maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  // One keep-alive agent per (pool key, host, validated address set): a pooled socket stays on a
  // validated IP. Least recently used first out, so an agent with attempts in flight is not the one
  // evicted unless over MAX_AGENTS other pools were used since it was.
  const agents = new Map<string, https.Agent>();
  const agentFor = (target: SafeTarget, poolKey: string): https.Agent => {
    const key = `${poolKey}|${target.hostname}|${target.port}|${target.addresses
      .map((a) => a.address)
      .sort()
      .join(',')}`;
    let agent = agents.get(key);
    if (agent) agents.delete(key);
    else {
      if (agents.size >= MAX_AGENTS) {
        const [oldestKey, oldest] = agents.entries().next().value as [string, https.Agent];
        oldest.destroy();
        agents.delete(oldestKey);
      }
      agent = createPinnedAgent({ addresses: target.addresses, ca: options.ca, keepAlive: options.keepAlive ?? true });
    }
    agents.set(key, agent);
    return agent;
  };

  return {
    async send(input) {
      const { target, signal } = input;
      if (signal.aborted) return { httpStatus: null, responseBody: '', errorClass: 'timeout', retryAfter: null, message: 'deadline reached before connecting' };
      try {
        const res = await sendOutbound({ target, method: 'POST', headers: input.headers, body: input.body, agent: agentFor(target, input.poolKey ?? ''), signal, maxBytes });
        return { httpStatus: res.status, responseBody: toStoredText(res.body), errorClass: classifyStatus(res.status), retryAfter: retryAfterOf(res.headers), message: null };
      } catch (err) {
        const failed = err as OutboundError;
        // A deadline reached while reading a body keeps the status the receiver sent.
        const errorClass = signal.aborted ? 'timeout' : classifyNetworkError(failed.cause, false);
        const message = signal.aborted && failed.status !== null ? 'deadline reached while reading the body' : failed.message;
        return { httpStatus: failed.status, responseBody: toStoredText(failed.body), errorClass, retryAfter: retryAfterOf(failed.headers), message };
      }
    },
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}
