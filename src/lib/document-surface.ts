// One surface of the OpenAPI document (the agent's, the owner's): its paths, only the components they reference
// (transitively) and only the security schemes they name. What GET /v1/agent/openapi.json and /v1/owner/openapi.json
// serve, and what the client generators' check and the SDK generation read (issue 29: a client generated from the
// agent's document must not get operator methods).
import type { OpenApiDocument } from './contract.js';

export type Surface = '/v1/agent' | '/v1/owner';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** `#/components/schemas/Foo` -> ['schemas', 'Foo'] (JSON pointer escapes undone). */
function componentOf(ref: string): [string, string] | null {
  const m = /^#\/components\/([^/]+)\/([^/]+)$/.exec(ref);
  return m ? [m[1]!, m[2]!.replace(/~1/g, '/').replace(/~0/g, '~')] : null;
}

/** Every internal `$ref` under `value` (and discriminator mappings, which name schemas by reference too). */
function collectRefs(value: unknown, into: string[]): void {
  if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, into);
    return;
  }
  if (!value || typeof value !== 'object') return;
  for (const [key, child] of Object.entries(value)) {
    if (key === '$ref' && typeof child === 'string') into.push(child);
    else if (key === 'mapping' && child && typeof child === 'object') for (const target of Object.values(child)) if (typeof target === 'string') into.push(target);
    collectRefs(child, into);
  }
}

/** The document of one surface: the paths under `prefix`, with everything they reference and nothing else. */
export function surfaceDocument(document: OpenApiDocument, prefix: Surface): OpenApiDocument {
  const paths: Record<string, unknown> = {};
  for (const [path, item] of Object.entries(document.paths ?? {})) if (path.startsWith(`${prefix}/`)) paths[path] = item;
  // Webhook deliveries go to the agent's endpoints: their envelope belongs to the agent's surface.
  const webhooks = prefix === '/v1/agent' ? document.webhooks : undefined;

  const components = (document.components ?? {}) as Record<string, Record<string, unknown>>;
  const kept: Record<string, Record<string, unknown>> = {};
  const pending: string[] = [];
  collectRefs(paths, pending);
  collectRefs(webhooks, pending);
  while (pending.length) {
    const target = componentOf(pending.pop()!);
    if (!target) continue;
    const [section, name] = target;
    if (kept[section]?.[name] !== undefined) continue;
    const value = components[section]?.[name];
    if (value === undefined) continue;
    (kept[section] ??= {})[name] = value;
    collectRefs(value, pending);
  }

  // The security schemes and tags the kept operations name.
  const schemes = new Set<string>();
  const tags = new Set<string>();
  for (const item of Object.values(paths) as OpenApiDocument[]) {
    for (const method of METHODS) {
      const op = item[method] as OpenApiDocument | undefined;
      if (!op) continue;
      for (const requirement of (op.security ?? document.security ?? []) as Record<string, unknown>[]) for (const name of Object.keys(requirement)) schemes.add(name);
      for (const tag of (op.tags ?? []) as string[]) tags.add(tag);
    }
  }
  const allSchemes = (components.securitySchemes ?? {}) as Record<string, unknown>;
  const securitySchemes = Object.fromEntries(Object.entries(allSchemes).filter(([name]) => schemes.has(name)));

  // Sections in the document's own order, each entry in its own order: the same input gives the same bytes (ETag).
  const outComponents: Record<string, unknown> = {};
  for (const section of Object.keys(components)) {
    if (section === 'securitySchemes') {
      if (Object.keys(securitySchemes).length) outComponents.securitySchemes = securitySchemes;
      continue;
    }
    const names = kept[section];
    if (!names) continue;
    outComponents[section] = Object.fromEntries(
      Object.keys(components[section]!)
        .filter((name) => name in names)
        .map((name) => [name, components[section]![name]]),
    );
  }

  const out: OpenApiDocument = {};
  for (const [key, value] of Object.entries(document)) {
    if (key === 'paths') out.paths = paths;
    else if (key === 'components') out.components = outComponents;
    else if (key === 'webhooks') {
      if (webhooks) out.webhooks = webhooks;
    } else if (key === 'tags') out.tags = (value as { name: string }[]).filter((tag) => tags.has(tag.name));
    else out[key] = value;
  }
  return out;
}
