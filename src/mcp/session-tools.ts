// Tools that mirror no route: agent_operations_wait_for_status (polls an operation) and mcp_subscribe / mcp_unsubscribe (events on the session's stream).
import type { Principal } from '../auth/principal.js';
import { EVENT_TYPES, OPERATION_STATUSES, SUBSCRIBABLE_EVENT_TYPES } from '../../generated/vocabulary.js';
import type { OpenApiDocument, OperationMeta } from '../http/operations.js';
import type { HandlerResult } from '../lib/contract.js';
import { ApiError } from '../lib/errors.js';
import { isUuid } from '../lib/ids.js';
import { EVENT_NOTIFICATION, type EventRelay } from './event-relay.js';
import { successSchemaOf } from './names.js';
import { portableSchema } from './portable-schema.js';
import type { McpSession } from './sessions.js';
import { inlineRefs, toolMeta, type ToolDefinition } from './tools.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type JsonSchema = Record<string, any>;

/** What a session tool may use for one call. */
export interface SessionToolCall {
  principal: Principal;
  /** Null on a stateless request (no Mcp-Session-Id). */
  session: McpSession | null;
  /** GET /v1/agent/operations/{id} through the router (validation, handler), not charged again. */
  readOperation(id: string): Promise<HandlerResult>;
  relay: EventRelay;
  signal?: AbortSignal;
}

export interface SessionTool {
  name: string;
  /** Scope and rate class, as a route's; `operationId` names the tool in logs. */
  op: OperationMeta;
  definition: ToolDefinition;
  run(call: SessionToolCall, args: Record<string, unknown>): Promise<HandlerResult>;
}

export const WAIT_DEFAULT_SECONDS = 30;
export const WAIT_MAX_SECONDS = 120;
const DEFAULT_TERMINAL = ['executed', 'execution_failed', 'policy_rejected', 'cancelled'];

const metaOf = (operationId: string): OperationMeta => ({
  operationId,
  method: 'post',
  path: '/mcp',
  tag: 'mcp',
  rateClass: 'read',
  scope: 'agent:read',
  altScopes: [],
  idempotency: 'none',
  isPublic: false,
});

const invalid = (path: string, message: string) => new ApiError('validation_failed', `Invalid tool arguments: ${path} ${message}.`, { errors: [{ location: 'body', path: `/${path}`, message }] });

function refuseUnknown(args: Record<string, unknown>, known: string[]): void {
  const extra = Object.keys(args).find((k) => !known.includes(k));
  if (extra !== undefined) throw invalid(extra, 'is not a known argument');
}

function stringList(args: Record<string, unknown>, field: string, allowed: readonly string[], required: boolean): string[] | undefined {
  const value = args[field];
  if (value === undefined && !required) return undefined;
  if (!Array.isArray(value) || value.length === 0) throw invalid(field, 'must be a non-empty array');
  for (const item of value) if (typeof item !== 'string' || !allowed.includes(item)) throw invalid(field, `must hold only ${allowed.join(', ')}`);
  return [...new Set(value as string[])];
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

const definition = (
  name: string,
  title: string,
  description: string,
  op: OperationMeta,
  inputSchema: JsonSchema,
  outputSchema: JsonSchema,
  hints: { readOnlyHint: boolean; idempotentHint: boolean },
): ToolDefinition => ({
  name,
  title,
  description: `${description}\n\nRequires the OAuth scope ${op.scope}.`,
  inputSchema: portableSchema({ type: 'object', additionalProperties: false, ...inputSchema }) as ToolDefinition['inputSchema'],
  outputSchema: portableSchema({ type: 'object', ...outputSchema }) as ToolDefinition['outputSchema'],
  annotations: { title, ...hints, destructiveHint: false, openWorldHint: false },
  _meta: toolMeta(op),
});

export function buildSessionTools(document: OpenApiDocument): SessionTool[] {
  const operationSchema = (inlineRefs(document, successSchemaOf(document, { method: 'get', path: '/v1/agent/operations/{id}' })) as JsonSchema).properties.operation as JsonSchema;
  const subscribable = [...SUBSCRIBABLE_EVENT_TYPES];
  const subscriptionOutput = {
    required: ['ok', 'session_id', 'event_types', 'notification'],
    additionalProperties: false,
    properties: {
      ok: { type: 'boolean', const: true },
      session_id: { type: 'string' },
      event_types: { type: 'array', items: { type: 'string', enum: [...EVENT_TYPES] }, description: 'Every event type the session is subscribed to now.' },
      notification: { type: 'string', const: EVENT_NOTIFICATION },
    },
  };

  const wait = metaOf('mcpWaitForOperationStatus');
  const subscribe = metaOf('mcpSubscribe');
  const unsubscribe = metaOf('mcpUnsubscribe');

  const needSession = (call: SessionToolCall, name: string): McpSession => {
    if (!call.session)
      throw new ApiError('validation_failed', `${name} needs an MCP session: initialize and send its Mcp-Session-Id on every request, and open GET /mcp for the stream.`, {
        errors: [{ location: 'header', path: 'Mcp-Session-Id', message: 'is required for this tool' }],
      });
    return call.session;
  };

  return [
    {
      name: 'agent_operations_wait_for_status',
      op: wait,
      definition: definition(
        'agent_operations_wait_for_status',
        'Wait for an operation status',
        'Returns when the operation reaches one of terminal_statuses (reached: true) or when timeout_seconds pass (timed_out: true), with the operation as last read. Settlement is asynchronous: call this after a write instead of polling agent_operations_get.',
        wait,
        {
          required: ['operation_id'],
          properties: {
            operation_id: { type: 'string', format: 'uuid', description: 'The operation_id a write returned.' },
            terminal_statuses: {
              type: 'array',
              minItems: 1,
              uniqueItems: true,
              items: { type: 'string', enum: [...OPERATION_STATUSES] },
              description: `Statuses to wait for (default ${DEFAULT_TERMINAL.join(', ')}).`,
            },
            timeout_seconds: { type: 'number', minimum: 0, maximum: WAIT_MAX_SECONDS, description: `How long to wait at most (default ${WAIT_DEFAULT_SECONDS}).` },
          },
        },
        {
          required: ['ok', 'reached', 'timed_out', 'waited_ms', 'operation'],
          additionalProperties: false,
          properties: { ok: { type: 'boolean', const: true }, reached: { type: 'boolean' }, timed_out: { type: 'boolean' }, waited_ms: { type: 'integer', minimum: 0 }, operation: operationSchema },
        },
        { readOnlyHint: true, idempotentHint: true },
      ),
      async run(call, args) {
        refuseUnknown(args, ['operation_id', 'terminal_statuses', 'timeout_seconds']);
        const id = args.operation_id;
        if (typeof id !== 'string' || !isUuid(id)) throw invalid('operation_id', 'must be a UUID');
        const terminal = new Set(stringList(args, 'terminal_statuses', OPERATION_STATUSES, false) ?? DEFAULT_TERMINAL);
        const timeout = args.timeout_seconds ?? WAIT_DEFAULT_SECONDS;
        if (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout < 0 || timeout > WAIT_MAX_SECONDS) throw invalid('timeout_seconds', `must be a number from 0 to ${WAIT_MAX_SECONDS}`);
        const started = Date.now();
        const deadline = started + timeout * 1000;
        for (let delay = 100; ; delay = Math.min(delay * 2, 1000)) {
          const read = await call.readOperation(id);
          if (read.status !== 200) return read;
          const operation = (read.body as { operation: { status: string } }).operation;
          const reached = terminal.has(operation.status);
          const left = deadline - Date.now();
          if (reached || left <= 0 || call.signal?.aborted) {
            return { status: 200, body: { ok: true, reached, timed_out: !reached, waited_ms: Date.now() - started, operation } };
          }
          await sleep(Math.min(delay, left), call.signal);
        }
      },
    },
    {
      name: 'mcp_subscribe',
      op: subscribe,
      definition: definition(
        'mcp_subscribe',
        'Subscribe to agent events',
        `Sends the agent's events of these types (the webhook envelope: id, type, created_at, agent_id, wallet_id, operation_id, resource, data) as ${EVENT_NOTIFICATION} notifications on this session's GET /mcp stream, at least once (dedupe by id); reconnect with Last-Event-ID to receive what was sent while disconnected. Needs a session.`,
        subscribe,
        { required: ['event_types'], properties: { event_types: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: subscribable } } } },
        subscriptionOutput,
        { readOnlyHint: false, idempotentHint: true },
      ),
      async run(call, args) {
        refuseUnknown(args, ['event_types']);
        const types = stringList(args, 'event_types', subscribable, true)!;
        const session = needSession(call, 'mcp_subscribe');
        const all = await call.relay.subscribe(session, types);
        return { status: 200, body: { ok: true, session_id: session.id, event_types: all, notification: EVENT_NOTIFICATION } };
      },
    },
    {
      name: 'mcp_unsubscribe',
      op: unsubscribe,
      definition: definition(
        'mcp_unsubscribe',
        'Unsubscribe from agent events',
        'Stops the given event types, or every type when event_types is left out. Needs a session.',
        unsubscribe,
        { properties: { event_types: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: subscribable } } } },
        subscriptionOutput,
        { readOnlyHint: false, idempotentHint: true },
      ),
      async run(call, args) {
        refuseUnknown(args, ['event_types']);
        const types = stringList(args, 'event_types', subscribable, false);
        const session = needSession(call, 'mcp_unsubscribe');
        return { status: 200, body: { ok: true, session_id: session.id, event_types: await call.relay.unsubscribe(session.id, types), notification: EVENT_NOTIFICATION } };
      },
    },
  ];
}
