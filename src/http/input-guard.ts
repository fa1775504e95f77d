// Edge checks every /v1/agent request passes before validation: JSON nesting within MAX_BODY_DEPTH, no U+0000 in
// any string the request carries.
//
// Postgres text cannot hold U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), so a NUL that
// reaches a query fails as a 500. Refusing it here, once, names the field for every route instead of
// relying on each schema to carry a pattern.
import { ApiError, validationFailed, type ValidationProblem } from '../lib/errors.js';

const NUL = '\u0000';

/**
 * The deepest JSON nesting a request body may have (objects and arrays, counted from the outermost one). No
 * document schema nests past 8; everything after parsing (this file's NUL walk, Ajv, the idempotency
 * fingerprint's canonical JSON, JSON.stringify of a stored response) recurses once per level, and 5,000 levels
 * (30 KB, under the 64 KB cap) overflow the stack as a 500. The depth is counted on the raw text, before
 * JSON.parse and before any walk.
 */
export const MAX_BODY_DEPTH = 64;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * True when JSON text opens more than `limit` objects or arrays inside one another: one pass, no recursion,
 * no allocation. Brackets inside strings are skipped. Works on UTF-8 bytes (the structural characters are ASCII
 * and no byte of a multi-byte UTF-8 sequence is below 0x80) or on decoded text (char codes).
 */
export function isNestedDeeperThan(text: Uint8Array | string, limit = MAX_BODY_DEPTH): boolean {
  const bytes = typeof text !== 'string';
  const length = text.length;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < length; i++) {
    const c = bytes ? (text as Uint8Array)[i]! : (text as string).charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}

/** The 400 validation_failed for a body nested deeper than MAX_BODY_DEPTH. */
export function tooDeepError(): ApiError {
  return new ApiError('validation_failed', `The request body nests objects and arrays more than ${MAX_BODY_DEPTH} levels deep.`, {
    errors: [{ location: 'body', path: '/', message: `nesting deeper than ${MAX_BODY_DEPTH} levels` }],
  });
}

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
