// `@agent-api/sdk/node`: read a request's raw body and verify a webhook with node:http or Express (kept out of the
// main entry so browser bundles never see a node: import).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { verifyWebhookSignature, WebhookVerificationError } from './webhooks.js';
import type { EventEnvelope } from './types.js';

/** The request body as bytes; refuses more than `limitBytes` (default 256 KB, the largest payload the service sends). */
export async function readRawBody(req: IncomingMessage & { body?: unknown }, limitBytes = 256 * 1024): Promise<Uint8Array> {
  // Express with express.raw() (or any parser that kept the bytes) has already consumed the stream.
  if (req.body instanceof Uint8Array) return req.body;
  if (typeof req.body === 'string') return new TextEncoder().encode(req.body);
  if (req.body !== undefined && req.readableEnded) throw new TypeError('readRawBody: the body was already parsed (mount the webhook route before express.json(), or use express.raw())');
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Uint8Array | string>) {
    const bytes = typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk;
    size += bytes.length;
    if (size > limitBytes) throw new RangeError(`readRawBody: body over ${limitBytes} bytes`);
    chunks.push(bytes);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

export interface WebhookHandlerOptions {
  secret: string | readonly string[];
  toleranceSeconds?: number;
  /** Called with the verified event; answer 2xx quickly (throwing answers 500, so the service retries). */
  onEvent: (event: EventEnvelope, req: IncomingMessage) => unknown;
}

/**
 * A `(req, res)` handler for `http.createServer` that is also Express middleware (`app.post('/hooks', handler)`):
 * reads the raw body, verifies it, calls `onEvent`, answers 204; a bad signature answers 400.
 */
export function createWebhookHandler(options: WebhookHandlerOptions): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => Promise<void> {
  return async (req, res, next) => {
    let event: EventEnvelope;
    try {
      const payload = await readRawBody(req);
      event = await verifyWebhookSignature({ payload, headers: req.headers, secret: options.secret, toleranceSeconds: options.toleranceSeconds });
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) return next ? next(err) : void res.writeHead(400).end();
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: err.reason }));
      return;
    }
    try {
      await options.onEvent(event, req);
      res.writeHead(204).end();
    } catch (err) {
      if (next) return next(err);
      res.writeHead(500).end();
    }
  };
}

export { verifyWebhookSignature, WebhookVerificationError };
