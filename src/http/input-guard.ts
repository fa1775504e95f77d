// Edge checks every /v1/agent request passes before validation: no U+0000 in any string the request carries.
//
// Postgres text cannot hold U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), so a NUL that
// reaches a query fails as a 500. Refusing it here, once, names the field for every route instead of
// relying on each schema to carry a pattern.
import { validationFailed, type ValidationProblem } from '../lib/errors.js';

const NUL = '\u0000';

/** JSON pointer segment escaping (RFC 6901). */
const pointerSegment = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** Shows a key with its NUL visible, for a message. */
const visible = (s: string): string => s.replace(/\u0000/g, '\\u0000');

function walkBody(node: unknown, pointer: string, out: ValidationProblem[]): void {
  if (typeof node === 'string') {
    if (node.includes(NUL)) out.push({ location: 'body', path: pointer || '/', message: 'must not contain the NUL character (U+0000)' });
    return;
  }
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    node.forEach((item, i) => walkBody(item, `${pointer}/${i}`, out));
    return;
  }
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    const at = `${pointer}/${pointerSegment(key)}`;
    if (key.includes(NUL)) out.push({ location: 'body', path: at, message: `field name "${visible(key)}" must not contain the NUL character (U+0000)` });
    walkBody(value, at, out);
  }
}

function walkParams(location: 'query' | 'path', params: Record<string, unknown>, out: ValidationProblem[]): void {
  for (const [name, value] of Object.entries(params)) {
    const values = Array.isArray(value) ? value : [value];
    const bad = name.includes(NUL) || values.some((v) => (typeof v === 'string' ? v.includes(NUL) : v !== null && typeof v === 'object' && JSON.stringify(v).includes('\\u0000')));
    if (bad) out.push({ location, path: visible(name), message: 'must not contain the NUL character (U+0000)' });
  }
}

/** Every place a request carries U+0000: body fields (JSON pointer), query and path parameters (by name). */
export function findNulCharacters(input: { body?: unknown; query?: Record<string, unknown>; pathParams?: Record<string, string> }): ValidationProblem[] {
  const out: ValidationProblem[] = [];
  walkParams('path', input.pathParams ?? {}, out);
  walkParams('query', input.query ?? {}, out);
  walkBody(input.body, '', out);
  return out;
}

/** Throws 400 validation_failed naming each field that carries U+0000. */
export function assertNoNulCharacters(input: Parameters<typeof findNulCharacters>[0]): void {
  const problems = findNulCharacters(input);
  if (problems.length === 0) return;
  throw validationFailed(`Strings must not contain the NUL character (U+0000): ${problems.map((p) => `${p.location} ${p.path}`).join(', ')}.`, problems);
}
