// validation_failed in words (issue 29 item 3): a sweep of every schema of the document with a `pattern`, a `oneOf`
// or an `enum` checks the message a failing value gets (what is expected, in words; never the regular expression),
// then the router's answers name the field in `details.field`.
import { expect } from 'chai';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { createRouter } from '../../src/http/router.js';
import type { Router } from '../../src/http/types.js';
import { alternativesOf, expectationOf, type AjvIssue } from '../../src/http/validation-messages.js';

const document = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));
type AjvCtor = new (opts: object) => { addSchema(s: object, key: string): void; compile(s: object): ((v: unknown) => boolean) & { errors?: AjvIssue[] } };
const Ajv2020 = ((Ajv2020Module as unknown as { default?: AjvCtor }).default ?? Ajv2020Module) as unknown as AjvCtor;
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: unknown) => unknown;

const pointer = (parts: string[]) => `#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

/** Every schema object of the document holding `key`, with its JSON pointer. */
function schemasWith(key: string): [string, Record<string, unknown>][] {
  const found: [string, Record<string, unknown>][] = [];
  const walk = (v: unknown, at: string[]) => {
    if (Array.isArray(v)) return v.forEach((x, i) => walk(x, [...at, String(i)]));
    if (!v || typeof v !== 'object') return;
    const o = v as Record<string, unknown>;
    // `enum` and `pattern` as keywords, not as property names inside `properties`.
    if (
      key in o &&
      at[at.length - 1] !== 'properties' &&
      (key !== 'enum' || Array.isArray(o.enum)) &&
      (key !== 'pattern' || typeof o.pattern === 'string') &&
      (key !== 'oneOf' || Array.isArray(o.oneOf))
    )
      found.push([pointer(at), o]);
    for (const [k, x] of Object.entries(o)) walk(x, [...at, k]);
  };
  walk(document.paths, ['paths']);
  walk(document.components, ['components']);
  walk(document.webhooks, ['webhooks']);
  return found;
}

const ajv = new Ajv2020({ strict: false, allErrors: true, verbose: true });
addFormats(ajv);
ajv.addSchema(document, 'doc');
const resolve = (ref: string) =>
  ref
    .slice(2)
    .split('/')
    .reduce((o: Record<string, unknown> | undefined, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')] as Record<string, unknown> | undefined, document);
const errorsOf = (at: string, value: unknown): AjvIssue[] => {
  const validate = ajv.compile({ $ref: `doc${at}` });
  return validate(value) ? [] : (validate.errors ?? []);
};

describe('validation messages in words', () => {
  const patterns = schemasWith('pattern');
  it(`gives every one of the ${patterns.length} patterns of the document words (x-expected), and the message uses them, never the pattern`, () => {
    expect(patterns.length).to.be.greaterThan(30);
    const problems: string[] = [];
    for (const [at, schema] of patterns) {
      if (typeof schema['x-expected'] !== 'string') {
        problems.push(`${at}: no x-expected`);
        continue;
      }
      const issue = ['', ' ', '\u0007', 'zz'].flatMap((v) => errorsOf(at, v)).find((e) => e.keyword === 'pattern');
      if (!issue) {
        problems.push(`${at}: no value failed the pattern`);
        continue;
      }
      const message = expectationOf(issue);
      if (message !== `must be ${schema['x-expected'] as string}`) problems.push(`${at}: ${message}`);
      if (message.includes(String(schema.pattern))) problems.push(`${at}: quotes its pattern`);
    }
    expect(problems).to.deep.equal([]);
  });

  const oneOfs = schemasWith('oneOf');
  it(`says what each of the ${oneOfs.length} oneOf schemas expects: the either-or's fields, or x-expected`, () => {
    expect(oneOfs.length).to.be.greaterThan(15);
    const problems: string[] = [];
    for (const [at, schema] of oneOfs) {
      const alternatives = alternativesOf(schema, resolve);
      if (!alternatives && typeof schema['x-expected'] !== 'string') {
        problems.push(`${at}: neither an either-or of required fields nor x-expected`);
        continue;
      }
      const issue = errorsOf(at, alternatives ? {} : 12345).find((e) => e.keyword === 'oneOf' && e.instancePath === '');
      if (!issue) {
        problems.push(`${at}: no value failed the oneOf`);
        continue;
      }
      const message = expectationOf(issue, resolve);
      const want = alternatives
        ? `give exactly one of ${alternatives.words.length === 2 ? alternatives.words.join(' or ') : `${alternatives.words.slice(0, -1).join(', ')} or ${alternatives.words.at(-1)}`}`
        : `must be ${schema['x-expected'] as string}`;
      if (message !== want) problems.push(`${at}: ${message}`);
      if (/schema|oneOf/.test(message)) problems.push(`${at}: speaks of schemas: ${message}`);
    }
    expect(problems).to.deep.equal([]);
  });

  const enums = schemasWith('enum');
  it(`lists the allowed values of each of the ${enums.length} enums`, () => {
    expect(enums.length).to.be.greaterThan(50);
    const problems: string[] = [];
    for (const [at, schema] of enums) {
      const values = schema.enum as unknown[];
      const issue = ['__not_a_value__', 12345].flatMap((v) => errorsOf(at, v)).find((e) => e.keyword === 'enum');
      if (!issue) {
        problems.push(`${at}: no value failed the enum`);
        continue;
      }
      const message = expectationOf(issue);
      for (const value of values) if (!message.includes(typeof value === 'string' ? value : JSON.stringify(value))) problems.push(`${at}: ${message} misses ${String(value)}`);
      if (message.includes('allowed values')) problems.push(`${at}: ${message}`);
    }
    expect(problems).to.deep.equal([]);
  });
});

describe('validation_failed from the router', () => {
  let router: Router;
  before(async () => {
    router = await createRouter({ document, handlers: {} });
  });

  async function answer(
    method: string,
    path: string,
    body: unknown,
    query: Record<string, string> = {},
  ): Promise<{ code: string; message: string; details: { field?: string; fields?: string[]; errors: { location: string; path: string; message: string }[] } }> {
    try {
      await router.handle({ method, path, body, query, headers: { 'content-type': 'application/json', 'idempotency-key': 'k' } } as never, { principal: { agentId: 'a' } } as never);
    } catch (e) {
      return e as never;
    }
    throw new Error(`${path} answered without an error`);
  }

  it('names the field and the words of a pattern, with details.field', async () => {
    const err = await answer('post', '/v1/agent/payments', { to: `0x${'1'.repeat(40)}`, asset: 'usdc', amount: '1.x' });
    expect(err.code).to.equal('validation_failed');
    expect(err.details.field).to.equal('asset');
    expect(err.details.errors).to.deep.equal([
      { location: 'body', path: '/asset', message: 'must be an asset symbol: 2 to 12 upper-case letters or digits, such as USDC' },
      { location: 'body', path: '/amount', message: 'must be a decimal string such as "12.5": digits, then optionally a point and up to 36 decimals (no sign, no exponent, no leading zeros)' },
    ]);
    expect(err.message).to.equal(`Request validation failed: asset ${err.details.errors[0]!.message}; amount ${err.details.errors[1]!.message}`);
    expect(err.message).to.not.match(/\^|\[0-9\]|\{0,59\}/);
  });

  it('says "an address: 0x and 40 hex digits" for a malformed address parameter', async () => {
    const err = await answer('put', '/v1/admin/chain/failing-addresses/0x123', undefined);
    expect(err.details.errors).to.deep.include({ location: 'path', path: 'address', message: 'must be an address: 0x and 40 hex digits' });
    expect(err.message).to.include('address must be an address: 0x and 40 hex digits');
  });

  it("lists an enum's values and says what a query parameter must be", async () => {
    const err = await answer('get', '/v1/agent/operations', undefined, { limit: '0', status: 'nope' });
    expect(err.details.errors).to.deep.include({ location: 'query', path: 'limit', message: 'must be at least 1' });
    const status = err.details.errors.find((e) => e.path === 'status')!;
    expect(status.message).to.match(/^must be one of: \S+(, \S+)+$/);
    expect(status.message).to.include('executed');
  });

  it('gives exactly one of vault_id or use_best_available: true for an earn deposit', async () => {
    const err = await answer('post', '/v1/agent/earn/deposit', { asset: 'USDC', amount: '1' });
    expect(err.details).to.deep.include({ field: 'vault_id', fields: ['vault_id', 'use_best_available'] });
    expect(err.details.errors).to.deep.equal([{ location: 'body', path: '/', message: 'give exactly one of vault_id or use_best_available: true' }]);
  });
});
