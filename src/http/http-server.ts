// The node:http server the app runs on: header limits, the answer to requests Node cannot parse, and the
// /v1/agent requests handed to the API's own app before the rest of the site's routes are walked.
//
// Node's parser refuses request heads over `maxHeaderSize` (16 KB by default) with a bare 431 before
// Express sees the request: no envelope, no X-Request-Id. The parser limit is raised to
// MAX_HEAD_BYTES so ordinary over-long URLs and headers reach the pipeline, which refuses them with
// the envelope and, once the caller is authenticated, the rate-limit headers (src/http/limits.ts).
// Only a head over MAX_HEAD_BYTES is answered here, enveloped, with a fresh X-Request-Id.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';

/**
 * node:http through `process.getBuiltinModule`, not an ESM `import` (the start-up footprint, issue 12 P4): the ESM
 * facade of a built-in reads every export, and node:http's lazy WebSocket, CloseEvent and MessageEvent load Node's
 * bundled undici (~1.7 MB of heap) that nothing of the server uses. src/observability/metrics.ts does the same.
 */
const { createServer, STATUS_CODES } = process.getBuiltinModule('node:http');

/** Node's parser limit for a request head (request line + headers). */
export const MAX_HEAD_BYTES = 64 * 1024;

interface ClientError extends Error {
  code?: string;
}

function answerUnparsable(err: ClientError, socket: Duplex, log?: Logger): void {
  if (err.code === 'ECONNRESET' || !socket.writable) return;
  const requestId = randomUUID();
  const overflow = err.code === 'HPE_HEADER_OVERFLOW';
  const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const status = overflow ? 431 : timeout ? 408 : 400;
  const body = JSON.stringify(
    timeout
      ? errorBody('validation_failed', 'The request was not received in time.', { errors: [{ location: 'header', path: 'request', message: 'timed out' }] })
      : overflow
        ? errorBody('validation_failed', `The request line and headers exceed ${MAX_HEAD_BYTES} bytes.`, { errors: [{ location: 'header', path: 'request', message: 'too large' }] })
        : errorBody('validation_failed', 'The request could not be parsed as HTTP.', { errors: [{ location: 'header', path: 'request', message: 'malformed' }] }),
  );
  log?.info({ requestId, status, error: err.code ?? err.message }, 'request');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** The HTTP server for the app (`server.on('request', built.listener)`). */
export function createHttpServer(opts: { log?: Logger } = {}): Server {
  const server = createServer({ maxHeaderSize: MAX_HEAD_BYTES });
  server.on('clientError', (err: ClientError, socket: Duplex) => answerUnparsable(err, socket, opts.log));
  return server;
}

const AGENT_MOUNT = '/v1/agent';

/** Public documents the site serves under the mount, ahead of the API (which would ask for credentials): src/docs/docs.ts. */
const SITE_PATHS_UNDER_MOUNT = new Set([`${AGENT_MOUNT}/skill.md`]);

/** The exact spellings `/v1/agent`, `/v1/agent/...` and `/v1/agent?...`; any other (case, `//`) is the site's. */
export const isAgentApiUrl = (url: string): boolean =>
  (url === AGENT_MOUNT || url.startsWith(`${AGENT_MOUNT}/`) || url.startsWith(`${AGENT_MOUNT}?`)) && !SITE_PATHS_UNDER_MOUNT.has(url.split('?')[0]!);

/**
 * The request listener: /v1/agent goes to `agentApi` (an app holding only the edge middleware and the API's entry),
 * everything else to `site`. The API's requests then skip the walk over the site's routes and mounts (issue 12, P1:
 * Express's router was ~7 % of a `/self` profile). Both are ordinary Express apps used as listeners, so metrics and
 * tracing, when on, run in `agentApi` too: a production server takes the path the benchmark measures.
 */
export function apiFirst(agentApi: RequestListener, site: RequestListener): RequestListener {
  return function apiFirstListener(req: IncomingMessage, res: ServerResponse) {
    if (isAgentApiUrl(req.url ?? '')) agentApi(req, res);
    else site(req, res);
  };
}
