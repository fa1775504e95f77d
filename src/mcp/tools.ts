// MCP tools generated from the contract: one per /v1/agent operation, named from its route (names.ts), with JSON Schema input and output.
import { isAcceptableKey, MAX_KEY_LENGTH } from '../idempotency/idempotency.js';
import { ApiError } from '../lib/errors.js';
import type { OpenApiDocument, OperationMeta } from '../http/operations.js';
import { listedResourcesOf, successSchemaOf, toolNamesOf } from './names.js';
import { portableSchema } from './portable-schema.js';

/** Operations that are not offered as tools: the document itself is not an agent action. */
export const EXCLUDED_OPERATIONS = new Set(['getOpenApi']);

export const IDEMPOTENCY_ARGUMENT = 'idempotency_key';

const API_PREFIX = '/v1/agent';
/** Scopes that grant no change of state: every tool whose route needs only one of them is read-only. */
export const READ_ONLY_SCOPES: ReadonlySet<string> = new Set(['agent:read', 'agent:simulate']);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type JsonSchema = Record<string, any>;

export interface ToolParameter {
  name: string;
  in: 'path' | 'query';
}

export interface ToolDefinition {
  name: string;
  title?: string;
  description: string;
  inputSchema: JsonSchema & { type: 'object' };
  /** The route's 200/201 body schema, self-contained; a successful call's structuredContent matches it. */
  outputSchema: JsonSchema & { type: 'object' };
  annotations: { title?: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  _meta: Record<string, unknown>;
}

export interface McpTool {
  name: string;
  /** The name before route-derived names (operationId-derived): still callable, not listed. */
  legacyName: string | null;
  op: OperationMeta;
  definition: ToolDefinition;
  parameters: ToolParameter[];
  /** Top-level property names of the JSON request body; null when the operation takes no body. */
  bodyFields: Set<string> | null;
  bodyRequired: boolean;
}

/** An HTTP-shaped request for the internal router, built from a tool call's arguments. */
export interface DispatchRequest {
  method: string;
  /** The route's path with the arguments in it: what request validation reads the path parameters from. */
  path: string;
  params: Record<string, string>;
  query: Record<string, string | string[]>;
  headers: Record<string, string>;
  body: unknown;
  idempotencyKey: string | null;
}

/** The operation's own text without the error list (the tool result carries the error envelope). */
function describe(op: OperationMeta, operation: JsonSchema): string {
  // The document's own "Rate class ...; scope ...; Idempotency-Key ..." line speaks HTTP; the lines below restate it for tools.
  const text = String(operation.description ?? '')
    .split(/\n\s*Errors:/)[0]!
    .split(/\n\s*\n/)
    .filter((paragraph) => !/^\s*Rate class/.test(paragraph))
    .join('\n\n')
    .trim();
  const lines = [operation.summary ? `${String(operation.summary).trim()}.` : '', text, `Mirrors ${op.method.toUpperCase()} ${op.path}.`];
  if (op.scope) lines.push(`Requires the OAuth scope ${op.scope}${op.altScopes.length ? ` (or ${op.altScopes.join(', ')})` : ''}.`);
  if (op.idempotency === 'required') {
    lines.push(`Pass a unique ${IDEMPOTENCY_ARGUMENT} per logical action; repeating it with the same arguments replays the first result.`);
  }
  lines.push('The result is the JSON response body; errors carry the API error envelope { ok: false, error: { code, message, details } }.');
  return lines.filter((l) => l !== '').join('\n\n');
}

/**
 * Expands every internal `$ref` of a node, so a tool's input schema is self-contained (an MCP client
 * never sees the document). Sibling keys of a `$ref` win over the target's; a cyclic reference
 * becomes `{}` (any value) rather than an endless schema.
 */
export function inlineRefs(document: OpenApiDocument, node: unknown): unknown {
  const resolve = (pointer: string): unknown =>
    pointer
      .slice(2)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], document);
  const expand = (value: unknown, stack: string[]): unknown => {
    if (Array.isArray(value)) return value.map((item) => expand(item, stack));
    if (value === null || typeof value !== 'object') return value;
    const { $ref, ...rest } = value as Record<string, unknown>;
    let base: Record<string, unknown> = {};
    if (typeof $ref === 'string') {
      if (!$ref.startsWith('#/')) throw new Error(`external $ref not bundled: ${$ref}`);
      if (!stack.includes($ref)) base = expand(resolve($ref), [...stack, $ref]) as Record<string, unknown>;
    }
    const out: Record<string, unknown> = { ...base };
    for (const [key, child] of Object.entries(rest)) out[key] = expand(child, stack);
    return out;
  };
  return expand(node, []);
}

/**
 * Builds the tool table from the bundled document.
 * The input schema merges path parameters, query parameters and the body's top-level properties;
 * the body's own combinators (oneOf/allOf/dependentRequired) still apply, since every body field
 * stays a top-level argument. The router validates the real request, so this schema is the
 * caller's guide, not the gate.
 */
export function buildTools(document: OpenApiDocument, ops: OperationMeta[]): McpTool[] {
  const agentOps = ops.filter((op) => op.path.startsWith(API_PREFIX) && !op.isPublic && !EXCLUDED_OPERATIONS.has(op.operationId));
  const listed = listedResourcesOf(agentOps.map((op) => op.operationId));
  const tools: McpTool[] = [];
  const names = new Set<string>();

  for (const op of agentOps) {
    const item = inlineRefs(document, { parameters: document.paths[op.path].parameters }) as JsonSchema;
    const operation = inlineRefs(document, document.paths[op.path][op.method]) as JsonSchema;
    const { name, earlier } = toolNamesOf(document, op, listed);
    if (names.has(name)) throw new Error(`MCP tool name ${name} is derived from two operations`);
    names.add(name);
    const outputSchema = inlineRefs(document, successSchemaOf(document, op) ?? { type: 'object' }) as JsonSchema;
    if (outputSchema.type !== 'object') throw new Error(`${op.operationId}: the success response is not an object schema (MCP outputSchema must be one)`);

    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    const parameters: ToolParameter[] = [];
    let keySchema: JsonSchema = { type: 'string', minLength: 1, maxLength: 200 };
    const claim = (field: string) => {
      if (field in properties) throw new Error(`${op.operationId}: argument ${field} is both a parameter and a body field`);
    };

    for (const p of [...((item.parameters ?? []) as JsonSchema[]), ...((operation.parameters ?? []) as JsonSchema[])]) {
      if (p.in === 'header' && String(p.name).toLowerCase() === 'idempotency-key') {
        keySchema = { ...(p.schema ?? keySchema) };
        continue;
      }
      if (p.in !== 'path' && p.in !== 'query') continue;
      claim(p.name);
      properties[p.name] = { ...(p.schema ?? { type: 'string' }), ...(p.description ? { description: p.description } : {}) };
      if (p.required || p.in === 'path') required.push(p.name);
      parameters.push({ name: p.name, in: p.in });
    }

    let bodyFields: Set<string> | null = null;
    let bodyRequired = false;
    const extra: JsonSchema = {};
    const bodySchema = operation.requestBody?.content?.['application/json']?.schema as JsonSchema | undefined;
    if (bodySchema) {
      if (bodySchema.type !== 'object' || !bodySchema.properties) throw new Error(`${op.operationId}: the request body is not an object schema`);
      bodyRequired = Boolean(operation.requestBody.required);
      bodyFields = new Set(Object.keys(bodySchema.properties));
      for (const [field, schema] of Object.entries(bodySchema.properties as Record<string, JsonSchema>)) {
        claim(field);
        properties[field] = schema;
      }
      required.push(...((bodySchema.required ?? []) as string[]));
      for (const keyword of ['oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else', 'dependentRequired', 'dependentSchemas']) {
        if (bodySchema[keyword] !== undefined) extra[keyword] = bodySchema[keyword];
      }
    }

    if (op.idempotency !== 'none') {
      claim(IDEMPOTENCY_ARGUMENT);
      const description =
        op.idempotency === 'required'
          ? 'Required. A unique string per logical action (at most 200 characters). The same key with the same arguments within 24 h replays the first result; with other arguments it is refused with idempotency_key_reuse_mismatch.'
          : 'Optional. When given, the same key with the same arguments within 24 h replays the first result.';
      const { examples: _examples, ...keyRule } = keySchema;
      properties[IDEMPOTENCY_ARGUMENT] = { ...keyRule, description };
      if (op.idempotency === 'required') required.push(IDEMPOTENCY_ARGUMENT);
    }

    // minProperties counts body fields only; the merged object also carries the required non-body arguments.
    if (typeof bodySchema?.minProperties === 'number') {
      extra.minProperties = bodySchema.minProperties + required.filter((r) => !bodyFields!.has(r)).length;
    }

    // A route that needs only a read or simulate scope changes nothing, whatever its method (a POST that resolves,
    // quotes or dry-runs): clients may call it without asking the user, as they would a GET.
    const isRead = op.method === 'get' || (op.scope !== null && READ_ONLY_SCOPES.has(op.scope));
    const title = operation.summary ? String(operation.summary) : undefined;
    tools.push({
      name,
      legacyName: earlier,
      op,
      parameters,
      bodyFields,
      bodyRequired,
      definition: {
        name,
        ...(title ? { title } : {}),
        description: describe(op, operation),
        inputSchema: portableSchema({ type: 'object', properties, ...(required.length ? { required: [...new Set(required)] } : {}), additionalProperties: false, ...extra }) as JsonSchema & {
          type: 'object';
        },
        outputSchema: portableSchema(outputSchema) as JsonSchema & { type: 'object' },
        annotations: {
          ...(title ? { title } : {}),
          readOnlyHint: isRead,
          // Deleting, and anything that moves money, cannot be undone by another call.
          destructiveHint: !isRead && (op.method === 'delete' || op.rateClass === 'write' || op.rateClass === 'bulk_write'),
          // Reads, and writes under an idempotency key, have no further effect when repeated with the same arguments.
          idempotentHint: isRead || op.idempotency === 'required',
          openWorldHint: op.tag === 'x402',
        },
        _meta: toolMeta(op),
      },
    });
  }
  // An old name stays callable only where it names no other tool.
  for (const tool of tools) if (tool.legacyName === tool.name || (tool.legacyName && names.has(tool.legacyName))) tool.legacyName = null;
  return tools;
}

/** What a client needs to plan a call: the scope, the rate class and whether `idempotency_key` is required. */
export function toolMeta(op: Pick<OperationMeta, 'operationId' | 'scope' | 'altScopes' | 'rateClass' | 'idempotency' | 'method' | 'path'>): Record<string, unknown> {
  return {
    'agent-api/operation_id': op.operationId,
    'agent-api/route': `${op.method.toUpperCase()} ${op.path}`,
    'agent-api/required_scope': op.scope,
    'agent-api/alternative_scopes': op.altScopes,
    'agent-api/rate_limit_class': op.rateClass,
    'agent-api/idempotency_key_required': op.idempotency === 'required',
  };
}

const invalidArgument = (path: string, message: string) => new ApiError('validation_failed', `Invalid tool arguments: ${path.slice(1)} ${message}.`, { errors: [{ location: 'body', path, message }] });

const queryValue = (value: unknown): string | string[] => (Array.isArray(value) ? value.map((v) => String(v)) : String(value));

/**
 * Splits a tool call's arguments into the HTTP request the route would have received: path and
 * query parameters by name, the idempotency key into its header, everything else into the body
 * (where the body schema refuses unknown fields, as it does over HTTP).
 */
export function toDispatchRequest(tool: McpTool, args: Record<string, unknown> | undefined): DispatchRequest {
  const input = { ...(args ?? {}) };
  const { op } = tool;

  let idempotencyKey: string | null = null;
  if (op.idempotency !== 'none') {
    const key = input[IDEMPOTENCY_ARGUMENT];
    delete input[IDEMPOTENCY_ARGUMENT];
    if (key === undefined || key === null) {
      if (op.idempotency === 'required') throw invalidArgument(`/${IDEMPOTENCY_ARGUMENT}`, 'is required for this tool');
    } else if (!isAcceptableKey(key)) {
      throw invalidArgument(`/${IDEMPOTENCY_ARGUMENT}`, `must be a non-blank string of at most ${MAX_KEY_LENGTH} characters`);
    } else {
      idempotencyKey = key;
    }
  }

  let path = op.path;
  const params: Record<string, string> = {};
  const query: Record<string, string | string[]> = {};
  for (const p of tool.parameters) {
    const value = input[p.name];
    delete input[p.name];
    if (p.in === 'path') {
      if ((typeof value !== 'string' && typeof value !== 'number') || String(value) === '') throw invalidArgument(`/${p.name}`, 'is required');
      params[p.name] = String(value);
      path = path.replace(`{${p.name}}`, encodeURIComponent(params[p.name]!));
    } else if (value !== undefined && value !== null) {
      query[p.name] = queryValue(value);
    }
  }

  let body: unknown;
  const rest = Object.keys(input);
  if (tool.bodyFields) {
    body = rest.length > 0 || tool.bodyRequired ? input : undefined;
  } else if (rest.length > 0) {
    throw invalidArgument(`/${rest[0]}`, 'is not a known argument');
  }

  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (idempotencyKey !== null) headers['idempotency-key'] = idempotencyKey;
  return { method: op.method, path, params, query, headers, body, idempotencyKey };
}
