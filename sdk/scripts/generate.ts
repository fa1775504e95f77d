// Generates sdk/src/generated/ from the agent's document (GET /v1/agent/openapi.json: the agent's surface of
// generated/openapi.json, src/lib/document-surface.ts): its openapi-typescript types (default options, as the server's
// generated/api.d.ts), the runtime operation table with one method name per operation, and the CLI's flag metadata.
// `--check` compares instead of writing and exits 1 on drift (run by scripts/gen.sh's caller, CI and test/sdk).
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { surfaceDocument } from '../../src/lib/document-surface.js';

type Json = Record<string, unknown>;
const sdkRoot = fileURLToPath(new URL('../', import.meta.url));
const docPath = fileURLToPath(new URL('../../generated/openapi.json', import.meta.url));
const outDir = `${sdkRoot}src/generated/`;
const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const;
const AGENT_PREFIX = '/v1/agent/';
/** Members of the client class a group name must not shadow. */
const RESERVED = new Set(['request', 'paginate', 'waitForOperation', 'options', 'constructor']);

const doc = surfaceDocument(JSON.parse(readFileSync(docPath, 'utf8')) as Json, '/v1/agent') as Json & { paths: Record<string, Json>; components: Json };

function deref<T = Json>(value: unknown): T {
  let v = value as Json;
  for (let i = 0; v && typeof v.$ref === 'string'; i++) {
    if (i > 20) throw new Error(`$ref loop at ${String(v.$ref)}`);
    const parts = (v.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    v = parts.reduce<Json>((o, p) => o[p] as Json, doc);
  }
  return v as T;
}

const words = (id: string) => id.replace(/([a-z0-9])([A-Z])/g, '$1 $2').split(' ');
const camel = (s: string) => s.replace(/[-_.]([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

/** `createOneOffPayment` on `/v1/agent/one-off-payments` -> `create`; the words naming the resource are dropped. */
function methodName(operationId: string, segment: string): string {
  const resource = segment
    .replace(/\.json$/, '')
    .replace(/[-_]/g, '')
    .toLowerCase();
  const candidates = new Set([resource, resource.replace(/s$/, ''), resource.replace(/ies$/, 'y'), `${resource}s`]);
  const [verb, ...rest] = words(operationId);
  for (let i = 0; i < rest.length; i++) {
    for (let j = rest.length; j > i; j--) {
      if (candidates.has(rest.slice(i, j).join('').toLowerCase())) return lowerFirst([verb!, ...rest.slice(0, i), ...rest.slice(j)].join(''));
    }
  }
  if (candidates.has(verb!.toLowerCase()) && rest.length) return lowerFirst(rest.join(''));
  return lowerFirst([verb!, ...rest].join(''));
}

interface FieldSpec {
  name: string;
  type: string;
  required: boolean;
  description?: string;
  enum?: unknown[];
  items?: string;
  default?: unknown;
}

/**
 * Every property a schema can carry, through $ref, allOf, oneOf and anyOf. Required when the schema (or an allOf
 * part) requires it, or when every oneOf/anyOf branch does (`to` in each of two payment shapes; not `amount`).
 */
function collectFields(schemaRef: unknown): FieldSpec[] {
  return [...fieldsOf(schemaRef as Json).values()];
}

function fieldsOf(ref: Json): Map<string, FieldSpec> {
  const schema = deref(ref);
  const out = new Map<string, FieldSpec>();
  const merge = (f: FieldSpec) => {
    const prior = out.get(f.name);
    out.set(f.name, prior ? { ...prior, required: prior.required || f.required } : f);
  };
  const required = new Set((schema.required as string[] | undefined) ?? []);
  for (const [name, raw] of Object.entries((schema.properties as Record<string, Json> | undefined) ?? {})) {
    const prop = flatten(raw);
    const description = (raw as Json).description ?? prop.description;
    merge({
      name,
      type: typeName(prop),
      required: required.has(name),
      ...(description ? { description: String(description) } : {}),
      ...(Array.isArray(prop.enum) ? { enum: prop.enum as unknown[] } : {}),
      ...(prop.default !== undefined ? { default: prop.default } : {}),
      ...(typeName(prop) === 'array' && prop.items ? { items: typeName(flatten(prop.items as Json)) } : {}),
    });
  }
  for (const part of (schema.allOf as Json[] | undefined) ?? []) for (const f of fieldsOf(part).values()) merge(f);
  for (const key of ['oneOf', 'anyOf'] as const) {
    const branches = ((schema[key] as Json[] | undefined) ?? []).map((b) => fieldsOf(b));
    for (const branch of branches) for (const f of branch.values()) merge({ ...f, required: branches.every((b) => b.get(f.name)?.required === true) });
  }
  for (const name of required) {
    const f = out.get(name);
    if (f) out.set(name, { ...f, required: true });
  }
  return out;
}

/** A property schema with its $ref and single-branch allOf resolved, its description kept. */
function flatten(raw: Json): Json {
  let s = deref(raw);
  if (Array.isArray(s.allOf) && s.allOf.length === 1) s = { ...deref(s.allOf[0]), ...s, allOf: undefined };
  if (!s.type && Array.isArray(s.oneOf)) {
    const types = new Set((s.oneOf as Json[]).map((b) => typeName(deref(b))));
    if (types.size === 1) s = { ...s, type: [...types][0] };
  }
  return s;
}

function typeName(s: Json): string {
  const t = Array.isArray(s.type) ? (s.type as string[]).find((x) => x !== 'null') : (s.type as string | undefined);
  if (t) return t;
  if (s.properties) return 'object';
  if (s.const !== undefined) return typeof s.const;
  return 'string';
}

interface OperationRow {
  key: string;
  group: string;
  command: string;
  name: string;
  method: string;
  path: string;
  operationId: string;
  summary: string;
  idempotency: 'required' | 'optional' | 'none';
  pathParams: string[];
  queryParams: string[];
  body: boolean;
  paginated: boolean;
  writesOperation: boolean;
  flags: FieldSpec[];
  bodyDescription?: string;
}

const rows: OperationRow[] = [];
for (const [path, item] of Object.entries(doc.paths)) {
  if (!path.startsWith(AGENT_PREFIX)) continue;
  for (const method of METHODS) {
    const op = item[method] as Json | undefined;
    if (!op) continue;
    const operationId = String(op.operationId);
    const segment = path.slice(AGENT_PREFIX.length).split('/')[0]!;
    const params = [...((item.parameters as Json[] | undefined) ?? []), ...((op.parameters as Json[] | undefined) ?? [])].map((p) => deref(p));
    const pathParams = params.filter((p) => p.in === 'path');
    const queryParams = params.filter((p) => p.in === 'query');
    const bodySchema = (deref(op.requestBody ?? {}).content as Json | undefined)?.['application/json'] as Json | undefined;
    const bodyFields = bodySchema ? collectFields(bodySchema.schema) : [];
    const ok = deref(((op.responses as Json)['200'] ?? (op.responses as Json)['201']) as Json);
    const okSchema = deref((((ok?.content as Json | undefined)?.['application/json'] as Json | undefined)?.schema ?? {}) as Json);
    const okFields = new Set(collectFields(okSchema).map((f) => f.name));
    const param = (p: Json): FieldSpec => {
      const s = flatten((p.schema ?? {}) as Json);
      return {
        name: String(p.name),
        type: typeName(s),
        required: p.required === true,
        ...(p.description ? { description: String(p.description) } : {}),
        ...(Array.isArray(s.enum) ? { enum: s.enum as unknown[] } : {}),
        ...(s.default !== undefined ? { default: s.default } : {}),
      };
    };
    const names = new Set<string>();
    for (const f of [...pathParams.map(param), ...queryParams.map(param), ...bodyFields]) {
      if (names.has(f.name)) throw new Error(`${operationId}: '${f.name}' is both a parameter and a body field; the flat input cannot tell them apart`);
      names.add(f.name);
    }
    const name = methodName(operationId, segment);
    rows.push({
      key: `${method.toUpperCase()} ${path}`,
      group: camel(segment.replace(/\.json$/, '')),
      command: segment.replace(/\.json$/, ''),
      name,
      method: method.toUpperCase(),
      path,
      operationId,
      summary: String(op.summary ?? ''),
      idempotency: (op['x-idempotency'] as OperationRow['idempotency'] | undefined) ?? 'none',
      pathParams: pathParams.map((p) => String(p.name)),
      queryParams: queryParams.map((p) => String(p.name)),
      body: Boolean(bodySchema),
      paginated: okFields.has('items') && okFields.has('next_cursor') && queryParams.some((p) => p.name === 'cursor'),
      writesOperation: okFields.has('operation_id'),
      flags: [...pathParams.map(param), ...queryParams.map(param), ...bodyFields],
      ...(bodySchema && deref(bodySchema.schema).description ? { bodyDescription: String(deref(bodySchema.schema).description) } : {}),
    });
  }
}

const seen = new Map<string, string>();
for (const r of rows) {
  const id = `${r.group}.${r.name}`;
  if (seen.has(id)) throw new Error(`method name collision: ${id} for ${seen.get(id)} and ${r.operationId}`);
  if (RESERVED.has(r.group)) throw new Error(`group name ${r.group} shadows a client member`);
  seen.set(id, r.operationId);
}

const kebab = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
const header = (what: string) => `// Generated by sdk/scripts/generate.ts from the agent's document (GET /v1/agent/openapi.json) (${what}). Do not edit; run \`npm run gen\`.\n`;
const enumOf = (schema: string) => (deref(doc.components.schemas as Json)[schema] as Json | undefined)?.enum as string[];

const operationsTs = [
  header('the runtime operation table'),
  '/** Every /v1/agent operation by route key: what the client needs to build a request. */',
  `export const OPERATIONS = ${JSON.stringify(
    Object.fromEntries(
      rows.map((r) => [
        r.key,
        { operationId: r.operationId, method: r.method, path: r.path, idempotency: r.idempotency, pathParams: r.pathParams, queryParams: r.queryParams, body: r.body, paginated: r.paginated },
      ]),
    ),
    null,
    2,
  )} as const;`,
  '',
  '/** One method per operation, grouped by the first path segment after /v1/agent: `client.payments.create`. */',
  `export const GROUPS = ${JSON.stringify(
    rows.reduce<Record<string, Record<string, string>>>((acc, r) => (((acc[r.group] ??= {})[r.name] = r.key), acc), {}),
    null,
    2,
  )} as const;`,
  '',
  '/** `#/components/schemas/ErrorCode`: the closed set of error codes. */',
  `export const ERROR_CODES = ${JSON.stringify(enumOf('ErrorCode'))} as const;`,
  '',
  '/** `#/components/schemas/OperationStatus`. */',
  `export const OPERATION_STATUSES = ${JSON.stringify(enumOf('OperationStatus'))} as const;`,
  '',
].join('\n');

const cliTs = [
  header('the CLI commands and flags'),
  'export interface FlagSpec { name: string; type: string; required: boolean; description?: string; enum?: readonly unknown[]; items?: string; default?: unknown }',
  'export interface CommandSpec { group: string; command: string; key: string; summary: string; positional: readonly string[]; idempotency: string; paginated: boolean; writesOperation: boolean; flags: readonly FlagSpec[]; bodyDescription?: string }',
  '',
  '/** `agent-api <group> <command>`: kebab-case of the SDK method, flags named by the document (snake_case becomes kebab-case). */',
  `export const COMMANDS: readonly CommandSpec[] = ${JSON.stringify(
    rows.map((r) => ({
      group: r.command,
      command: kebab(r.name),
      key: r.key,
      summary: r.summary,
      positional: r.pathParams,
      idempotency: r.idempotency,
      paginated: r.paginated,
      writesOperation: r.writesOperation,
      flags: r.flags,
      ...(r.bodyDescription ? { bodyDescription: r.bodyDescription } : {}),
    })),
    null,
    2,
  )};`,
  '',
].join('\n');

// openapi-typescript with its default options, as scripts/gen.sh runs it for the server; a .ts file so tsc emits its declarations.
const apiTs = `${header('the openapi-typescript types')}${astToString(await openapiTS(doc as never))}`;

const outputs: Record<string, string> = { 'api.ts': apiTs, 'operations.ts': operationsTs, 'cli-spec.ts': cliTs };
if (process.argv.includes('--check')) {
  const drifted = Object.entries(outputs).filter(([file, text]) => {
    try {
      return readFileSync(outDir + file, 'utf8') !== text;
    } catch {
      return true;
    }
  });
  if (drifted.length) {
    process.stderr.write(`sdk/src/generated is out of date (${drifted.map(([f]) => f).join(', ')}): run \`npm run gen\`\n`);
    process.exit(1);
  }
  process.stdout.write(`sdk/src/generated is up to date (${rows.length} operations)\n`);
} else {
  mkdirSync(outDir, { recursive: true });
  for (const [file, text] of Object.entries(outputs)) writeFileSync(outDir + file, text);
  process.stdout.write(`sdk/src/generated: ${rows.length} operations in ${new Set(rows.map((r) => r.group)).size} groups\n`);
}
