// GET /skill.md: a Markdown briefing for AI agents, rendered from the OpenAPI document on its first request
// (src/docs/docs.ts). The prose comes from the document's own sections (info.description), the tables from its
// structure: security schemes, x-idempotency, x-rate-limit-class, OperationStatus's x-terminal, ErrorCode's
// x-agent-actions, and the MCP tools of /v1/agent.
import { readOperations } from '../http/operations.js';
import { toolCatalog } from '../mcp/catalog.js';
import type { OpenApiDocument, OperationMeta } from '../lib/contract.js';

const AGENT_PREFIX = '/v1/agent/';

/** The sections of info.description the briefing quotes, by their `## ` heading. */
const SECTIONS = ['Authentication', 'Order of checks', 'Idempotency', 'Rate limits', 'Money and numbers', 'Errors', 'Owner approvals'] as const;

export interface McpToolName {
  name: string;
  method: string;
  path: string;
  operationId: string;
  summary: string;
}

function resolve(doc: OpenApiDocument, node: OpenApiDocument | undefined): OpenApiDocument | undefined {
  let n = node;
  for (let i = 0; n?.$ref && i < 10; i++)
    n = (n.$ref as string)
      .slice(2)
      .split('/')
      .reduce((acc: OpenApiDocument | undefined, k: string) => acc?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  return n;
}

/** The 200 schema of an operation, references resolved. */
function okSchema(doc: OpenApiDocument, op: OperationMeta): OpenApiDocument | undefined {
  const operation = doc.paths[op.path][op.method];
  const ok = resolve(doc, operation.responses?.['200']);
  return ok?.content?.['application/json']?.schema;
}

/** The agent operations an MCP client sees: /v1/agent routes that need a credential (public ones are documents). */
export function agentOperations(document: OpenApiDocument): OperationMeta[] {
  return readOperations(document).filter((op) => op.path.startsWith(AGENT_PREFIX) && !op.isPublic);
}

/**
 * The MCP tools that mirror a route, as /mcp lists them (src/mcp/names.ts derives the names from the route:
 * `GET /v1/agent/balances/cash` -> `agent_balances_cash_list`).
 */
export function mcpToolNames(document: OpenApiDocument): McpToolName[] {
  return toolCatalog(document).flatMap((t) => {
    if (!t.route || !t.operationId) return [];
    const [method, path] = t.route.split(' ') as [string, string];
    const summary = String(document.paths[path][method.toLowerCase()].summary ?? '');
    return [{ name: t.name, method, path, operationId: t.operationId, summary }];
  });
}

/** The session tools, which mirror no route (waiting on an operation, event subscriptions). */
function sessionTools(document: OpenApiDocument): { name: string; title: string }[] {
  return toolCatalog(document).flatMap((t) => (t.route ? [] : [{ name: t.name, title: t.title ?? '' }]));
}

/** `## Heading` sections of info.description, by heading. */
function descriptionSections(document: OpenApiDocument): Map<string, string> {
  const sections = new Map<string, string>();
  for (const part of String(document.info?.description ?? '')
    .split(/^## /m)
    .slice(1)) {
    const [heading, ...body] = part.split('\n');
    sections.set(heading!.trim(), body.join('\n').trim());
  }
  return sections;
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const route = (op: { method: string; path: string }) => `\`${op.method.toUpperCase()} ${op.path}\``;

export function renderSkill(document: OpenApiDocument): string {
  const schemas = document.components?.schemas ?? {};
  const sections = descriptionSections(document);
  const section = (name: (typeof SECTIONS)[number]) => {
    const text = sections.get(name);
    if (!text) throw new Error(`the document's info.description has no "## ${name}" section for /skill.md`);
    return text;
  };
  SECTIONS.forEach(section);
  const ops = agentOperations(document);
  const out: string[] = [];
  const push = (...lines: string[]) => out.push(...lines);

  push(`# ${document.info.title}: briefing for agents`, '', `> ${document.info.summary ?? ''}`, '');
  push(
    `Generated from the OpenAPI document (version ${document.info.version}) that the server validates requests with: ` +
      '`GET /v1/agent/openapi.json`. A reference page for people: `GET /docs`. Every `/v1/agent` route below needs a credential.',
    '',
  );

  push('## Authentication', '', section('Authentication'), '', '| scheme | how to send it | what it is |', '|---|---|---|');
  const used = new Set(ops.flatMap((op) => (document.paths[op.path][op.method].security ?? document.security ?? []).flatMap((s: Record<string, unknown>) => Object.keys(s))));
  for (const [name, scheme] of Object.entries(document.components?.securitySchemes ?? {}) as [string, OpenApiDocument][]) {
    if (!used.has(name)) continue;
    const how =
      scheme.type === 'apiKey'
        ? `\`${scheme.name}\` ${scheme.in}`
        : scheme.type === 'http'
          ? `\`Authorization: ${scheme.scheme === 'bearer' ? 'Bearer' : scheme.scheme} …\``
          : scheme.type === 'oauth2'
            ? '`Authorization: Bearer <access token>`'
            : scheme.type;
    push(`| ${name} | ${how} | ${cell(String(scheme.description ?? ''))} |`);
  }
  push('', '### Order of checks', '', section('Order of checks'), '');

  push('## Idempotency', '', section('Idempotency'), '');
  for (const mode of ['required', 'optional'] as const) {
    const listed = ops.filter((op) => op.idempotency === mode);
    push(`Routes where the \`Idempotency-Key\` header is ${mode} (${listed.length}):`, '', ...listed.map((op) => `- ${route(op)} (${op.operationId})`), '');
  }

  push('## Rate limits', '', section('Rate limits'), '', '| class | routes |', '|---|---|');
  const classes = new Map<string, OperationMeta[]>();
  for (const op of ops) classes.set(op.rateClass, [...(classes.get(op.rateClass) ?? []), op]);
  for (const [rateClass, members] of classes) push(`| ${rateClass} | ${members.map((op) => op.operationId).join(', ')} |`);
  push('');

  push('## Money', '', section('Money and numbers'), '');
  for (const name of ['Decimal', 'UsdDecimal']) if (schemas[name]) push(`- \`${name}\`: ${cell(String(schemas[name].description ?? ''))} Pattern \`${schemas[name].pattern}\`.`);
  push('');

  const status = schemas.OperationStatus ?? {};
  const terminal = (status['x-terminal'] ?? []) as string[];
  if (!terminal.length) throw new Error('OperationStatus has no x-terminal list for /skill.md');
  const writes = ops.filter((op) => op.method !== 'get' && okSchema(document, op)?.$ref?.endsWith('/WriteResponse'));
  push(
    '## Polling operations',
    '',
    'Writes that move money answer HTTP 200 with `WriteResponse` (`operation_id`, `status`, `resource`, `fee_usd`, `human_message`) ' +
      'before settlement. Read the outcome with `GET /v1/agent/operations/{id}` (a `read`-class route) until `status` is terminal, ' +
      'waiting longer between reads (1 s, 2 s, 4 s … up to 30 s), or subscribe to webhook events instead.',
    '',
    `- Statuses: ${((status.enum ?? []) as string[]).map((s) => `\`${s}\``).join(', ')}. ${cell(String(status.description ?? ''))}`,
    `- Terminal (stop polling): ${terminal.map((s) => `\`${s}\``).join(', ')}.`,
    `- Routes answering \`WriteResponse\` (${writes.length}): ${writes.map((op) => op.operationId).join(', ')}.`,
    '',
  );
  push('## Owner approvals', '', section('Owner approvals'), '');

  const codes = (schemas.ErrorCode?.enum ?? []) as string[];
  const actions = (schemas.ErrorCode?.['x-agent-actions'] ?? {}) as Record<string, { status: number; action: string }>;
  push('## Errors', '', section('Errors'), '', '| code | HTTP | what to do |', '|---|---|---|');
  for (const code of codes) {
    const advice = actions[code];
    if (!advice) throw new Error(`ErrorCode ${code} has no x-agent-actions entry for /skill.md`);
    push(`| \`${code}\` | ${advice.status} | ${cell(advice.action)} |`);
  }
  push('');

  const tools = mcpToolNames(document);
  push(
    '## MCP tools',
    '',
    'The same operations are MCP tools at `/mcp` (Streamable HTTP; an OAuth bearer token issued for the resource `<base>/mcp`, ' +
      "see `/.well-known/oauth-protected-resource/mcp`). Arguments are the route's path and query parameters and body fields, " +
      'plus `idempotency_key` where the route takes an `Idempotency-Key`; errors come back as tool errors with the same codes.',
    '',
    '| tool | route | summary |',
    '|---|---|---|',
    ...tools.map((t) => `| \`${t.name}\` | ${route(t)} | ${cell(t.summary)} |`),
    '',
    'Session tools (they mirror no route):',
    '',
    ...sessionTools(document).map((t) => `- \`${t.name}\`: ${cell(t.title)}`),
    '',
  );
  return out.join('\n');
}
