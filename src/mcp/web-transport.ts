// Serves an Express request through the SDK's web-standard Streamable HTTP transport, and rebuilds a session's transport from its initialize.
import type { Request, Response } from 'express';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';

/**
 * The web-standard transport (rather than the SDK's Node wrapper) because a session moved to another
 * process must be rebuilt by replaying its `initialize` through the transport's public `handleRequest`,
 * which takes a fetch `Request` and returns a `Response` without a socket. This is the wrapper's own
 * conversion: headers in, the body already parsed; status, headers and the body stream out, the stream
 * cancelled when the client goes away (the transport then forgets the SSE stream).
 */
export async function serveWeb(transport: WebStandardStreamableHTTPServerTransport, req: Request, res: Response, baseUrl: string, authInfo: AuthInfo | undefined): Promise<void> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  const aborted = new AbortController();
  res.on('close', () => aborted.abort());
  const request = new globalThis.Request(new URL(req.originalUrl, baseUrl), { method: req.method, headers, signal: aborted.signal });
  const response = await transport.handleRequest(request, { authInfo, parsedBody: req.method === 'POST' ? req.body : undefined });
  res.status(response.status);
  response.headers.forEach((value, name) => res.setHeader(name, value));
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  res.on('close', () => void reader.cancel().catch(() => undefined));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || res.destroyed) break;
      res.write(value);
    }
  } finally {
    if (!res.writableEnded) res.end();
  }
}

/**
 * Makes a fresh transport (already connected to its server) serve an existing session: its stored
 * `initialize` goes through the transport as the client sent it, so the transport takes the session id
 * (its generator returns it) and the server the client's protocol version and capabilities.
 */
export async function replayInitialize(transport: WebStandardStreamableHTTPServerTransport, initialize: unknown, baseUrl: string, mcpPath: string): Promise<void> {
  const request = new globalThis.Request(new URL(mcpPath, baseUrl), {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
  });
  const response = await transport.handleRequest(request, { parsedBody: initialize });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`rebuilding an MCP session: its initialize answered ${response.status}`);
}
