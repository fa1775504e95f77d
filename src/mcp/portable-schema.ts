// The document's JSON Schemas rewritten in the spelling MCP clients map best (what the MCP Inspector's portability check asks for), same meaning.

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type JsonSchema = Record<string, any>;

/** Keywords that describe rather than constrain: they stay on the outer schema when a node is split by type. */
const ANNOTATIONS = new Set(['title', 'description', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly', '$comment']);

/** Keywords whose value is one subschema, a list of them, or a map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems'];
const MANY = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', 'dependentSchemas', '$defs'];

/** "Any JSON value", spelled as an explicit union (a schema without keywords reads as a forgotten constraint). */
const ANY_JSON = [{ type: 'object', additionalProperties: true }, { type: 'array' }, { type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }];

const isConstraining = (key: string) => !ANNOTATIONS.has(key);

/**
 * Rewrites, recursively:
 * - `type: [T, "null"]` (and any type list) as `anyOf` of one-type branches, each carrying the
 *   node's constraints (a branch's type makes the other types' keywords inert, as before);
 * - a schema with no constraining keyword ("any value") as the explicit union of the JSON types.
 * Annotations stay on the outer node. Validation accepts exactly what the original accepted.
 */
export function portableSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(portableSchema);
  if (node === null || typeof node !== 'object') return node;
  const input = node as JsonSchema;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(input)) {
    if (ONE.includes(key) && value !== null && typeof value === 'object') out[key] = portableSchema(value);
    else if (MANY.includes(key) && Array.isArray(value)) out[key] = value.map(portableSchema);
    else if (MAP.includes(key) && value !== null && typeof value === 'object') out[key] = Object.fromEntries(Object.entries(value as JsonSchema).map(([k, v]) => [k, portableSchema(v)]));
    else out[key] = value;
  }

  if (Array.isArray(out.type)) {
    const annotations: JsonSchema = {};
    const constraints: JsonSchema = {};
    for (const [key, value] of Object.entries(out)) if (key !== 'type') (ANNOTATIONS.has(key) ? annotations : constraints)[key] = value;
    const types = out.type as string[];
    if (types.length === 1) return { ...annotations, ...constraints, type: types[0] };
    return { ...annotations, anyOf: types.map((type) => (type === 'null' ? { type } : { type, ...constraints })) };
  }
  if (!Object.keys(out).some(isConstraining)) return { ...out, anyOf: ANY_JSON };
  return out;
}
