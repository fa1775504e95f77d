// Integrators generate clients from the served document (issue 13): three generators at their default settings
// compile it, a payment with only its required fields type-checks, and both amount and amount_usd is a type error.
import { expect } from 'chai';
import { checkGenerators } from '../../scripts/check-generators.js';
import { loadDocument, type OpenApiDocument } from '../../src/http/operations.js';

/**
 * Properties of named schemas reachable from a request body that carry `default` themselves: openapi-typescript's
 * default flags make those required. (Schemas written inline in a requestBody are exempt there.)
 */
function requestPropertiesWithDefaults(doc: OpenApiDocument): string[] {
  const resolve = (ref: string) =>
    ref
      .slice(2)
      .split('/')
      .reduce((a: OpenApiDocument | undefined, k) => a?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  const seen = new Set<string>();
  const found: string[] = [];
  const walk = (s: OpenApiDocument | undefined, at: string | null): void => {
    if (!s || typeof s !== 'object') return;
    if (typeof s.$ref === 'string') {
      if (seen.has(s.$ref)) return;
      seen.add(s.$ref);
      return walk(resolve(s.$ref), s.$ref);
    }
    for (const [name, p] of Object.entries((s.properties ?? {}) as Record<string, OpenApiDocument>)) {
      if (at && p && typeof p === 'object' && 'default' in p) found.push(`${at}/properties/${name}`);
      walk(p, at);
    }
    for (const key of ['allOf', 'oneOf', 'anyOf']) for (const x of (s[key] ?? []) as OpenApiDocument[]) walk(x, at);
    if (s.items) walk(s.items, at);
  };
  for (const item of Object.values(doc.paths as Record<string, OpenApiDocument>))
    for (const op of Object.values(item)) {
      const body = typeof op?.requestBody?.$ref === 'string' ? resolve(op.requestBody.$ref) : op?.requestBody;
      for (const media of Object.values((body?.content ?? {}) as Record<string, OpenApiDocument>)) walk(media.schema, null);
    }
  return found;
}

describe('client generators on the served document', function () {
  // Three generators and three tsc runs, offline from node_modules (~25 s on an idle machine).
  this.timeout(300_000);

  it('keeps request defaults on referenced schemas, so default flags leave those fields optional', () => {
    expect(requestPropertiesWithDefaults(loadDocument())).to.deep.equal([]);
  });

  it('openapi-typescript + openapi-fetch, @hey-api/openapi-ts and orval compile it and keep exactly one of amount / amount_usd', async () => {
    const results = await checkGenerators();
    expect(results.map((r) => r.generator)).to.deep.equal(['openapi-typescript + openapi-fetch', '@hey-api/openapi-ts', 'orval']);
    for (const r of results) expect(r.ok, `${r.generator}:\n${r.output}`).to.equal(true);
  });
});
