// The operation table read once from the bundled document: extensions, and a precompiled path matcher.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { OpenApiDocument, OperationMeta } from '../lib/contract.js';

export type { IdempotencyMode, OpenApiDocument, OperationMeta } from '../lib/contract.js';

export type MatchResult = { kind: 'operation'; op: OperationMeta; params: Record<string, string> } | { kind: 'not_found' } | { kind: 'method_not_allowed'; allowed: string[] };

export const DOCUMENT_PATH = fileURLToPath(new URL('../../generated/openapi.json', import.meta.url));

export function loadDocument(path = DOCUMENT_PATH): OpenApiDocument {
  return JSON.parse(readFileSync(path, 'utf8')) as OpenApiDocument;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];

export function readOperations(doc: OpenApiDocument): OperationMeta[] {
  const ops: OperationMeta[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = (item as OpenApiDocument)[method];
      if (!op) continue;
      const security = op.security ?? doc.security ?? [];
      const scope = op['x-required-scope'];
      ops.push({
        operationId: op.operationId,
        method,
        path,
        tag: op.tags?.[0] ?? 'default',
        rateClass: op['x-rate-limit-class'] ?? 'read',
        scope: scope && scope !== 'none' ? scope : null,
        altScopes: op['x-alternative-scopes'] ?? (path.startsWith('/v1/agent/webhooks') && method === 'get' && !path.endsWith('/deliveries') ? ['agent:webhooks:manage'] : []),
        idempotency: op['x-idempotency'] ?? 'none',
        isPublic: Array.isArray(security) && security.length === 0,
      });
    }
  }
  return ops;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

interface CompiledRoute {
  regex: RegExp;
  paramNames: string[];
  literalLength: number;
  byMethod: Map<string, OperationMeta>;
}

/**
 * Precompiled anchored matchers, built once: routing cost stays flat in the number of operations
 * (openapi-backend's own matcher builds a RegExp per operation per request; see stack notes).
 */
export function createMatcher(ops: OperationMeta[]): (method: string, path: string) => MatchResult {
  const exact = new Map<string, Map<string, OperationMeta>>();
  const templated = new Map<string, CompiledRoute>();
  for (const op of ops) {
    if (!op.path.includes('{')) {
      const byMethod = exact.get(op.path) ?? new Map();
      byMethod.set(op.method, op);
      exact.set(op.path, byMethod);
      continue;
    }
    let route = templated.get(op.path);
    if (!route) {
      const paramNames: string[] = [];
      const pattern = op.path
        .split(/(\{[^}]+\})/)
        .map((part) => {
          const m = /^\{([^}]+)\}$/.exec(part);
          if (m) {
            paramNames.push(m[1]!);
            return '([^/]+)';
          }
          return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        })
        .join('');
      route = { regex: new RegExp(`^${pattern}$`), paramNames, literalLength: op.path.replace(/\{[^}]+\}/g, '').length, byMethod: new Map() };
      templated.set(op.path, route);
    }
    route.byMethod.set(op.method, op);
  }
  const routes = [...templated.values()].sort((a, b) => b.literalLength - a.literalLength);

  return (methodRaw, rawPath) => {
    const method = methodRaw.toLowerCase();
    const path = rawPath.length > 1 ? rawPath.replace(/\/+$/, '') : rawPath;
    const staticRoute = exact.get(path);
    if (staticRoute) {
      const op = staticRoute.get(method) ?? (method === 'head' ? staticRoute.get('get') : undefined);
      if (op) return { kind: 'operation', op, params: {} };
    }
    const allowed = new Set(staticRoute ? [...staticRoute.keys()] : []);
    for (const route of routes) {
      const m = route.regex.exec(path);
      if (!m) continue;
      const op = route.byMethod.get(method);
      if (op) {
        const params: Record<string, string> = {};
        route.paramNames.forEach((name, i) => {
          // A malformed escape stays as sent; request validation then refuses it (400, not 500).
          params[name] = safeDecode(m[i + 1]!);
        });
        return { kind: 'operation', op, params };
      }
      for (const key of route.byMethod.keys()) allowed.add(key);
    }
    return allowed.size > 0 ? { kind: 'method_not_allowed', allowed: [...allowed].map((m) => m.toUpperCase()) } : { kind: 'not_found' };
  };
}

/**
 * A copy of the document safe for openapi-backend. Its dereferencer merges a schema `$ref` that has
 * sibling keys into a new object that still shares the target's arrays (`enum`, `examples`), and its
 * `decycle` then turns the second sighting of such an array into `{ $ref }`, which Ajv rejects.
 * Rewriting `{ $ref, ...siblings }` as `{ allOf: [{ $ref }], ...siblings }` keeps every shared object
 * whole (decycle's pointers to whole schemas are fine), at no cost in schema size. Subtrees without such a
 * `$ref` are the document's own objects, not copies (~1 MB of heap less): openapi-backend dereferences a clone of
 * its input and never writes to it.
 */
export function prepareForBackend(doc: OpenApiDocument): OpenApiDocument {
  const walk = (node: unknown): unknown => {
    if (node === null || typeof node !== 'object') return node;
    if (Array.isArray(node)) {
      const items = node.map(walk);
      return items.some((item, i) => item !== node[i]) ? items : node;
    }
    const record = node as Record<string, unknown>;
    let out: Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(record)) {
      const walked = walk(v);
      if (walked !== v) (out ??= { ...record })[k] = walked;
    }
    const result = out ?? record;
    if (typeof result.$ref === 'string' && result.$ref.startsWith('#/components/schemas/') && Object.keys(result).length > 1) {
      const { $ref, ...rest } = result;
      return { allOf: [{ $ref }], ...rest };
    }
    return result;
  };
  return walk(doc) as OpenApiDocument;
}
