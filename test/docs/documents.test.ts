// The three public documents (issue 29 item 1): /v1/agent/openapi.json is the agent's surface only (its paths, the
// components they reference, their security schemes), /v1/owner/openapi.json the owner API's, /v1/admin/openapi.json
// the whole document; /docs renders the agent's and links the others.
import { expect } from 'chai';
import { loadDocument, type OpenApiDocument } from '../../src/http/operations.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Every `$ref` under `value`, with where it was found. */
function refsOf(value: unknown, at = '#', into: [string, string][] = []): [string, string][] {
  if (Array.isArray(value)) value.forEach((v, i) => refsOf(v, `${at}/${i}`, into));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) k === '$ref' && typeof v === 'string' ? into.push([at, v]) : refsOf(v, `${at}/${k}`, into);
  return into;
}

const resolve = (doc: OpenApiDocument, ref: string): unknown =>
  ref.startsWith('#/')
    ? ref
        .slice(2)
        .split('/')
        .reduce((o: OpenApiDocument | undefined, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc)
    : undefined;

/** The security scheme names the operations of `doc` require. */
function schemesUsed(doc: OpenApiDocument): Set<string> {
  const used = new Set<string>();
  for (const item of Object.values(doc.paths as Record<string, OpenApiDocument>))
    for (const op of Object.values(item)) for (const req of (op?.security ?? []) as object[]) for (const k of Object.keys(req)) used.add(k);
  return used;
}

describe('the public OpenAPI documents', function () {
  this.timeout(60_000);
  let srv: TestServer;
  const full = loadDocument();
  before(async () => {
    srv = await startTestServer();
  });
  after(async () => srv?.close());

  for (const [surface, other] of [
    ['/v1/agent', /^\/v1\/(owner|admin)\//],
    ['/v1/owner', /^\/v1\/(agent|admin)\//],
  ] as const) {
    describe(`GET ${surface}/openapi.json`, () => {
      let doc: OpenApiDocument;
      before(async () => {
        const res = await srv.request('GET', `${surface}/openapi.json`);
        expect(res.status, res.text).to.equal(200);
        doc = res.body as OpenApiDocument;
      });

      it(`has no path outside ${surface}, and every ${surface} path of the whole document`, () => {
        const paths = Object.keys(doc.paths);
        expect(paths.filter((p) => !p.startsWith(`${surface}/`))).to.deep.equal([]);
        expect(paths.sort()).to.deep.equal(
          Object.keys(full.paths)
            .filter((p) => p.startsWith(`${surface}/`))
            .sort(),
        );
        expect(JSON.stringify(doc.paths)).to.not.match(other);
      });

      it('resolves every $ref inside itself', () => {
        const refs = refsOf(doc);
        expect(refs.length).to.be.greaterThan(50);
        expect(refs.filter(([, ref]) => resolve(doc, ref) === undefined).map(([at, ref]) => `${at}: ${ref}`)).to.deep.equal([]);
      });

      it('keeps only the components its paths reference and the security schemes they name', () => {
        const referenced = new Set(refsOf(doc).map(([, ref]) => ref));
        const unreferenced: string[] = [];
        for (const [section, entries] of Object.entries(doc.components as Record<string, object>)) {
          if (section === 'securitySchemes') continue;
          for (const name of Object.keys(entries)) if (!referenced.has(`#/components/${section}/${name}`)) unreferenced.push(`${section}/${name}`);
        }
        expect(unreferenced).to.deep.equal([]);
        expect(Object.keys(doc.components.securitySchemes).sort()).to.deep.equal([...schemesUsed(doc)].sort());
        expect(Object.keys(doc.components.schemas).length).to.be.lessThan(Object.keys(full.components.schemas).length);
      });
    });
  }

  it('keeps the agent surface apart from the owner and operator credentials', async () => {
    const agent = (await srv.request('GET', '/v1/agent/openapi.json')).body as OpenApiDocument;
    expect(Object.keys(agent.components.securitySchemes).sort()).to.deep.equal(['agentId', 'apiKey', 'oauth2']);
    expect(agent.components.schemas).to.include.keys('PaymentRequest', 'ErrorCode', 'EventEnvelope');
    expect(agent.webhooks).to.have.key('agentEvent');
    const owner = (await srv.request('GET', '/v1/owner/openapi.json')).body as OpenApiDocument;
    expect(Object.keys(owner.components.securitySchemes).sort()).to.deep.equal(['adminToken', 'ownerSession', 'ownerToken']);
    expect(owner.webhooks).to.equal(undefined);
  });

  it('serves the whole document at /v1/admin/openapi.json, with an ETag and 304 on revalidation', async () => {
    const res = await srv.request('GET', '/v1/admin/openapi.json');
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal(full);
    const etag = res.headers.get('etag')!;
    expect((await srv.request('GET', '/v1/admin/openapi.json', { headers: { 'if-none-match': etag } })).status).to.equal(304);
    const owner = await srv.request('GET', '/v1/owner/openapi.json');
    expect(owner.headers.get('etag')).to.not.equal(etag);
    expect((await srv.request('GET', '/v1/owner/openapi.json', { headers: { 'if-none-match': owner.headers.get('etag')! } })).status).to.equal(304);
  });

  it('renders the agent document on /docs and links the owner and whole documents', async () => {
    const page = await srv.request('GET', '/docs');
    expect(page.text).to.include('<redoc spec-url="/v1/agent/openapi.json"');
    for (const link of ['href="/v1/agent/openapi.json"', 'href="/v1/owner/openapi.json"', 'href="/v1/admin/openapi.json"']) expect(page.text).to.include(link);
  });

  it('serves a Redoc bundle that loads nothing from another host (no CDN logo)', async () => {
    const bundle = await srv.request('GET', '/docs/redoc.standalone.js');
    expect(bundle.status).to.equal(200);
    expect(bundle.text).to.not.include('cdn.redoc.ly');
    // Addresses the browser would fetch: an element's src, a CSS url(), a fetch or import of an absolute URL.
    expect(bundle.text.match(/(src\s*[:=]\s*|url\(\s*|fetch\(\s*|import\(\s*)["'`]?https?:\/\//g) ?? []).to.deep.equal([]);
    const etag = bundle.headers.get('etag')!;
    expect((await srv.request('GET', '/docs/redoc.standalone.js', { headers: { 'if-none-match': etag } })).status).to.equal(304);
  });
});
