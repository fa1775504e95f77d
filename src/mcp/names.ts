// MCP tool names: `toolNamesOf` names a route's tool from its path (agent_<path>_<get|list|create|update|delete>, the
// names of the original Agent API's MCP server) and gives the operationId-derived name this server used before.
import type { OpenApiDocument, OperationMeta } from '../http/operations.js';

const API_PREFIX = '/v1/';

/** Where the MCP endpoint is mounted. */
export const MCP_PATH = '/mcp';

export type ToolVerb = 'get' | 'list' | 'create' | 'update' | 'delete';

/**
 * The verb of a route: GET on a collection is `list`, GET on an item (a trailing path parameter)
 * or a singleton (`/account`, `/borrow`) is `get`; POST `create`, PATCH/PUT `update`, DELETE `delete`.
 */
function verbOf(method: string, path: string, isCollection: boolean): ToolVerb {
  switch (method.toLowerCase()) {
    case 'get':
      return isCollection && !/\/\{[^}]+\}$/.test(path) ? 'list' : 'get';
    case 'post':
      return 'create';
    case 'patch':
    case 'put':
      return 'update';
    case 'delete':
      return 'delete';
    default:
      throw new Error(`no tool verb for ${method} ${path}`);
  }
}

/**
 * The tool name of a route: the path after `/v1/` without its parameters, segments joined by `_`
 * (hyphens and dots become `_`), then the verb. `GET /v1/agent/balances/cash` (a list page) ->
 * `agent_balances_cash_list`; `POST /v1/agent/borrow/collateral/add` -> `agent_borrow_collateral_add_create`;
 * `GET /v1/agent/account` -> `agent_account_get`; `GET /v1/agent/webhooks/{id}/deliveries` -> `agent_webhooks_deliveries_list`.
 */
function routeToolName(method: string, path: string, isCollection: boolean): string {
  if (!path.startsWith(API_PREFIX)) throw new Error(`${path} is not under ${API_PREFIX}`);
  const segments = path
    .slice(API_PREFIX.length)
    .split('/')
    .filter((s) => s !== '' && !/^\{[^}]+\}$/.test(s))
    .map((s) =>
      s
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '_')
        .replace(/^_+|_+$/g, ''),
    );
  return [...segments, verbOf(method, path, isCollection)].join('_');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Node = Record<string, any>;

/** Follows `#/...` references until a node that is not one. */
export function deref(document: OpenApiDocument, node: unknown): Node | undefined {
  let at = node as Node | undefined;
  for (let hops = 0; at && typeof at.$ref === 'string' && hops < 16; hops += 1) {
    at = (at.$ref as string)
      .slice(2)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<Node | undefined>((n, key) => n?.[key], document as Node);
  }
  return at;
}

/** The JSON schema of an operation's success answer (200, else 201), references unresolved. */
export function successSchemaOf(document: OpenApiDocument, op: Pick<OperationMeta, 'method' | 'path'>): Node | undefined {
  const operation = document.paths[op.path]?.[op.method] as Node | undefined;
  const response = deref(document, operation?.responses?.['200'] ?? operation?.responses?.['201']);
  return response?.content?.['application/json']?.schema as Node | undefined;
}

/** A collection answers the document's list page: `{ ok, items: [...], next_cursor, has_more }`. */
export function isCollectionOperation(document: OpenApiDocument, op: Pick<OperationMeta, 'method' | 'path'>): boolean {
  const schema = deref(document, successSchemaOf(document, op));
  const items = deref(document, schema?.properties?.items);
  return items?.type === 'array' && schema?.properties?.has_more !== undefined;
}

/**
 * The one naming rule of route tools: `name` from the route (above), and `earlier`, the operationId-derived name
 * (below) that stays callable as an alias where it differs and names no other tool (`buildTools`). `listed`: the
 * resources of the document's list operations (`listedResourcesOf`).
 */
export function toolNamesOf(document: OpenApiDocument, op: Pick<OperationMeta, 'operationId' | 'method' | 'path'>, listed: ReadonlySet<string>): { name: string; earlier: string } {
  return { name: routeToolName(op.method, op.path, op.method === 'get' && isCollectionOperation(document, op)), earlier: operationIdToolName(op.operationId, listed) };
}

const words = (operationId: string): string[] => (operationId.match(/[A-Z][a-z0-9]*|[a-z0-9]+/g) ?? []).map((w) => w.toLowerCase());

/**
 * The tool name this server gave an operation before names came from the route (kept callable as an alias):
 * `agent_<resource>_<verb>`, where the verb is the operationId's first
 * word and the resource the rest, in snake case. A singular resource takes the plural form when the
 * document lists that plural (`listPayments` exists, so `createPayment` -> `agent_payments_create`,
 * `getOperation` -> `agent_operations_get`); the longest such prefix wins, so `rotateWebhookSecret`
 * -> `agent_webhooks_secret_rotate` and `createConversionQuote` -> `agent_conversions_quote_create`.
 * `list*` operations name their resource as-is (`listBalances` -> `agent_balances_list`).
 * The full table is in src/mcp/README.md.
 */
function operationIdToolName(operationId: string, listedResources: ReadonlySet<string>): string {
  const [verb, ...resource] = words(operationId);
  if (!verb || resource.length === 0) throw new Error(`operationId ${operationId} has no resource part`);
  if (verb !== 'list') {
    for (let k = resource.length; k >= 1; k -= 1) {
      const candidate = [...resource.slice(0, k - 1), `${resource[k - 1]}s`];
      if (listedResources.has(candidate.join('_'))) {
        resource.splice(0, k, ...candidate);
        break;
      }
    }
  }
  return `agent_${resource.join('_')}_${verb}`;
}

/** Resources named by the document's list operations (`listWebhookDeliveries` -> `webhook_deliveries`). */
export function listedResourcesOf(operationIds: Iterable<string>): Set<string> {
  const listed = new Set<string>();
  for (const id of operationIds) {
    const [verb, ...resource] = words(id);
    if (verb === 'list' && resource.length > 0) listed.add(resource.join('_'));
  }
  return listed;
}
