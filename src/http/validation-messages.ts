// Ajv's request-validation errors in words for people (issue 29): each problem names its field and says what is
// expected, read from the schema that failed (`x-expected` on a pattern or a value-shaped oneOf, the branches'
// `required` of an either-or, the enum's values), never a regular expression. Pure: an Ajv error (verbose, so it
// carries its `parentSchema`) in, a problem out.
import type { ValidationProblem } from '../lib/errors.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;
export interface AjvIssue {
  keyword?: string;
  instancePath?: string;
  schemaPath?: string;
  message?: string;
  params?: Json;
  /** The schema holding the failed keyword (Ajv's `verbose` option). */
  parentSchema?: Json;
}

export interface WordedProblem extends ValidationProblem {
  /** The field as a caller names it: `amount`, `recipient.address`, `limit`, `Idempotency-Key`. */
  field: string;
  /** Every field the problem is about, when it is a choice between several (`amount`, `amount_usd`). */
  fields?: string[];
}

// openapi-backend validates `{ path, query, header, cookie }` and `{ requestBody }` objects.
const LOCATIONS: Record<string, ValidationProblem['location']> = { requestBody: 'body', query: 'query', params: 'path', path: 'path', header: 'header', headers: 'header' };

/** `idempotency-key` -> `Idempotency-Key`: headers are named as the documentation spells them. */
const headerName = (name: string): string => name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());

const TYPE_WORDS: Record<string, string> = { string: 'a string', integer: 'a whole number', number: 'a number', boolean: 'true or false', object: 'a JSON object', array: 'a list', null: 'null' };
const FORMAT_WORDS: Record<string, string> = {
  uuid: 'a UUID such as 0b9f3c52-6f7e-4b8e-9d1a-3c2f1e0d4a5b',
  'date-time': 'an ISO 8601 date and time such as 2026-01-31T12:00:00.000Z',
  date: 'a date such as 2026-01-31',
  uri: 'an absolute URL',
  email: 'an e-mail address',
};

const orList = (words: string[]): string => (words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`);
const quoted = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

/** Resolves a `$ref` of the document (Ajv hands openapi-backend's schemas over dereferenced; the raw document is not). */
export type Resolve = (ref: string) => Json | undefined;

/** An either-or `oneOf` whose every branch requires one field: its fields, as a caller gives them (`flag: true`). */
export function alternativesOf(schema: Json | undefined, resolve?: Resolve): { fields: string[]; words: string[] } | null {
  const branches = schema?.oneOf as Json[] | undefined;
  if (!Array.isArray(branches) || branches.length < 2) return null;
  const fields: string[] = [];
  const words: string[] = [];
  for (const raw of branches) {
    const branch: Json = (typeof raw?.$ref === 'string' && resolve ? resolve(raw.$ref as string) : raw) ?? {};
    const required = branch?.required as string[] | undefined;
    if (!Array.isArray(required) || required.length !== 1) return null;
    const field = required[0]!;
    fields.push(field);
    words.push(branch.properties?.[field]?.const === true ? `${field}: true` : field);
  }
  return { fields, words };
}

/** What the failed keyword expects, in words (without the field's name). */
export function expectationOf(issue: AjvIssue, resolve?: Resolve): string {
  const schema = issue.parentSchema ?? {};
  const p = issue.params ?? {};
  const expected = typeof schema['x-expected'] === 'string' ? (schema['x-expected'] as string) : undefined;
  switch (issue.keyword) {
    case 'oneOf': {
      const alternatives = alternativesOf(schema, resolve);
      if (alternatives) return `give exactly one of ${orList(alternatives.words)}`;
      return expected ? `must be ${expected}` : 'must match exactly one of the shapes the document allows';
    }
    case 'anyOf':
      return expected ? `must be ${expected}` : 'must match one of the shapes the document allows';
    case 'pattern':
      return expected ? `must be ${expected}` : 'is not in the expected format';
    case 'enum': {
      const values = (p.allowedValues ?? schema.enum ?? []) as unknown[];
      return values.length === 1 ? `must be ${quoted(values[0])}` : `must be one of: ${values.map(quoted).join(', ')}`;
    }
    case 'const':
      return `must be ${quoted(p.allowedValue ?? schema.const)}`;
    case 'type': {
      const types = String(p.type ?? '').split(',');
      return `must be ${orList(types.map((t) => TYPE_WORDS[t] ?? t))}`;
    }
    case 'format':
      return `must be ${FORMAT_WORDS[String(p.format)] ?? `a valid ${String(p.format)}`}`;
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not a known field';
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${p.limit} characters long`;
    case 'maxLength':
      return `must be at most ${p.limit} characters long`;
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'exclusiveMinimum':
      return `must be greater than ${p.limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${p.limit}`;
    case 'multipleOf':
      return `must be a multiple of ${p.multipleOf}`;
    case 'minItems':
      return `must list at least ${p.limit} item${p.limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `must list at most ${p.limit} items`;
    case 'uniqueItems':
      return 'must not list the same item twice';
    case 'minProperties':
      return `must have at least ${p.limit} field${p.limit === 1 ? '' : 's'}`;
    case 'maxProperties':
      return `must have at most ${p.limit} fields`;
    case 'not':
      return 'must not be given here';
    default:
      // Ajv's own wording for the rare rest; only `pattern` ever quotes a regular expression, and it is handled above.
      return issue.message ?? 'is invalid';
  }
}

/**
 * Ajv's errors of one request as problems in words. The errors inside a failed `oneOf`'s branches (each branch's
 * `required`, the `Absent` markers of ByAmount / ByAmountUsd) are what the `oneOf` problem already says, so they go.
 */
export function describeIssues(issues: AjvIssue[]): WordedProblem[] {
  const oneOfPaths = issues.filter((e) => e.keyword === 'oneOf' && e.schemaPath).map((e) => `${e.schemaPath}/`);
  const inBranch = (e: AjvIssue) => oneOfPaths.some((prefix) => (e.schemaPath ?? '').startsWith(prefix));
  const problems = issues.filter((e) => !inBranch(e)).map(toProblem);
  // The either-or first: it is the one a caller fixes first, and details.field names it.
  return [...problems.filter((p) => p.fields), ...problems.filter((p) => !p.fields)];
}

function toProblem(e: AjvIssue): WordedProblem {
  const segments = (e.instancePath ?? '')
    .split('/')
    .filter(Boolean)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = e.keyword === 'required' && e.params?.missingProperty ? String(e.params.missingProperty) : undefined;
  // A missing top-level part (`requestBody`, a required header) is reported at the root.
  if (segments.length === 0 && missing === 'requestBody') return { location: 'body', path: '/', field: 'body', message: 'a JSON request body is required' };
  const location = LOCATIONS[segments[0] ?? ''] ?? 'body';
  const rest = segments.slice(1);
  if (missing) rest.push(missing);
  if (e.keyword === 'additionalProperties' && e.params?.additionalProperty) rest.push(String(e.params.additionalProperty));
  const message = expectationOf(e);
  if (location === 'header') {
    const path = rest.map(headerName).join('.');
    return { location, path, field: path, message };
  }
  const path = location === 'body' ? `/${rest.join('/')}` : rest.join('.');
  const alternatives = e.keyword === 'oneOf' ? alternativesOf(e.parentSchema) : null;
  if (alternatives) {
    const prefix = rest.length ? `${rest.join('.')}.` : '';
    const fields = alternatives.fields.map((f) => prefix + f);
    return { location, path, field: fields[0]!, fields, message };
  }
  return { location, path, field: rest.length ? rest.join('.') : 'body', message };
}

/** The envelope's message: every problem with the field it is about. */
export function summarize(problems: WordedProblem[]): string {
  const parts = problems.map((p) => (p.fields ? p.message : `${p.field} ${p.message}`));
  return `Request validation failed: ${parts.join('; ')}`;
}
