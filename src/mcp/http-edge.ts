// The HTTP edge of /mcp: how the endpoint reads the caller off a request, answers refusals (JSON-RPC errors at the
// transport level, the API envelope for authentication and scope), and loads the SDK once on first use.
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { createRequire } from 'node:module';
import type * as SdkServer from '@modelcontextprotocol/sdk/server/index.js';
import type * as SdkTransport from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type * as SdkWebTransport from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type * as SdkTypes from '@modelcontextprotocol/sdk/types.js';
import type { HandlerResult } from '../http/types.js';

export const authed = (req: Request) => req as Request & { auth?: AuthInfo };
export const authOf = (req: Request) => authed(req).auth;
export const requestIdOf = (res: Response): string => (res.locals as { requestId?: string }).requestId ?? randomUUID();

/** Transport-level refusals speak JSON-RPC, as the SDK's own transport does. */
export function sendJsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/** Authentication, scope and session-cap refusals carry the API envelope (and, for the first two, the RFC 6750 challenge). */
export function sendApiAnswer(res: Response, answer: HandlerResult): void {
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name, value);
  res.status(answer.status).json(answer.body);
}

export interface JsonRpcMessage {
  method?: unknown;
  params?: { name?: unknown };
}

/**
 * The SDK's server side, loaded synchronously on first use. Every SDK value this module uses comes from here,
 * so the server, its transport and the McpError it recognises are one copy of the SDK.
 */
export const loadSdk = ((load) => () => ({
  ...(load('@modelcontextprotocol/sdk/server/index.js') as typeof SdkServer),
  ...(load('@modelcontextprotocol/sdk/server/streamableHttp.js') as typeof SdkTransport),
  ...(load('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js') as typeof SdkWebTransport),
  ...(load('@modelcontextprotocol/sdk/types.js') as typeof SdkTypes),
}))(createRequire(import.meta.url));
