// Every MCP tool in the order tools/list gives them, for docs (docs/skill.md, src/mcp/README.md) and scripts: no server needed.
import { loadDocument, readOperations, type OpenApiDocument } from '../http/operations.js';
import { buildSessionTools } from './session-tools.js';
import { buildTools } from './tools.js';

export interface ToolCatalogEntry {
  name: string;
  /** `GET /v1/agent/account`; null for the session tools, which mirror no route. */
  route: string | null;
  operationId: string | null;
  scope: string | null;
  alternativeScopes: string[];
  rateClass: string;
  idempotencyKey: 'required' | 'optional' | 'none';
  readOnly: boolean;
  /** The operationId-derived name this server used before route-derived names; still callable. */
  earlierName: string | null;
  title: string | null;
}

export function toolCatalog(document: OpenApiDocument = loadDocument()): ToolCatalogEntry[] {
  const routeTools = buildTools(document, readOperations(document)).map((t) => ({
    name: t.name,
    route: `${t.op.method.toUpperCase()} ${t.op.path}`,
    operationId: t.op.operationId,
    scope: t.op.scope,
    alternativeScopes: t.op.altScopes,
    rateClass: t.op.rateClass,
    idempotencyKey: t.op.idempotency,
    readOnly: t.definition.annotations.readOnlyHint,
    earlierName: t.legacyName,
    title: t.definition.title ?? null,
  }));
  const sessionTools = buildSessionTools(document).map((t) => ({
    name: t.name,
    route: null,
    operationId: null,
    scope: t.op.scope,
    alternativeScopes: t.op.altScopes,
    rateClass: t.op.rateClass,
    idempotencyKey: t.op.idempotency,
    readOnly: t.definition.annotations.readOnlyHint,
    earlierName: null,
    title: t.definition.title ?? null,
  }));
  return [...routeTools, ...sessionTools];
}
