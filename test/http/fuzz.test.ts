// Fuzz of every operation of the document (issue 10 acceptance): malformed types, NUL and control
// characters, huge strings, bad numbers, bad path and query values. No answer may be a 5xx, and
// under /v1/agent every error is the envelope with X-Request-Id. Each parameter and body field gets
// a fixed sweep of hostile values; random cases come from fast-check with a fixed seed (FUZZ_SEED=<n> explores others; FUZZ_RUNS=<n> random cases per operation, 5 by default).
import { expect } from 'chai';
import fc from 'fast-check';
import { loadDocument, type OpenApiDocument } from '../../src/http/operations.js';
import { ALL_SCOPES } from '../../src/auth/principal.js';
import { MAX_BODY_DEPTH } from '../../src/http/input-guard.js';
import { createDemoAgent, newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { mintAccessToken } from '../mcp/helpers.js';

const ADMIN = 'fuzz-admin-token-0123456789abcdef0123456789';
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.FUZZ_RUNS ?? 5);
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const RAW = '__raw_json__:';

// ---- hostile values ------------------------------------------------------------------------

const controlChars = fc.string({ unit: fc.integer({ min: 0, max: 31 }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 8 });
const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('a\u0000b', '\u0000', 'USDC\u0000', '0x1111111111111111111111111111111111111111\u0000') },
  { weight: 2, arbitrary: fc.string({ maxLength: 20 }).map((s) => `x${s}\u0000${s}`) },
  { weight: 2, arbitrary: controlChars },
  { weight: 3, arbitrary: fc.constantFrom('%00', '\ud800', '\udfff\ud800', '\u202e\u0041', ' ', '', '../../etc/passwd', "' OR 1=1 --", '{{7*7}}', 'NaN', '-1', '1e309', '0x10', 'null', 'true') },
  { weight: 2, arbitrary: fc.constantFrom(300, 2_000, 9_000, 40_000).map((n) => 'x'.repeat(n)) },
  { weight: 1, arbitrary: fc.constantFrom(100, 1_000, 5_000).map((n) => '\u{1F600}'.repeat(n)) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
);
/** Numbers JSON can carry that JavaScript and Postgres handle badly (sent as raw JSON text). */
const badNumber = fc.constantFrom('1e400', '-1e400', '1e-400', '123456789012345678901234567890', '-0', '9007199254740993', '0.30000000000000004', '-2147483649', '4294967296', '1.5');
const leaf = fc.oneof(
  { weight: 6, arbitrary: hostileString },
  { weight: 2, arbitrary: badNumber.map((n) => `${RAW}${n}`) },
  { weight: 1, arbitrary: fc.oneof(fc.boolean(), fc.constant(null), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })) },
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  { weight: 1, arbitrary: fc.array(leaf, { maxLength: 4 }) },
  {
    weight: 1,
    arbitrary: fc.dictionary(
      hostileString.map((k) => k.slice(0, 40)),
      leaf,
      { maxKeys: 3 },
    ),
  },
  { weight: 1, arbitrary: fc.constant(nest(60)) },
);

/** JSON text nested `depth` levels (objects and arrays in turn), written as text: JSON.stringify itself recurses. */
function nestedText(depth: number): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    open += i % 2 ? '[' : '{"a":';
    close = (i % 2 ? ']' : '}') + close;
  }
  return `${open}"deep"${close}`;
}

function nest(depth: number): unknown {
  let v: unknown = 'deep';
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

/** JSON text where `__raw_json__:<n>` strings become the raw number `<n>`. */
function toJson(value: unknown): string {
  return JSON.stringify(value).replace(new RegExp(`"${RAW}([^"]*)"`, 'g'), '$1');
}

/** A value as a query or path string (lone surrogates become U+FFFD, as a URL would carry them). */
function asText(value: unknown): string {
  const text = typeof value === 'string' ? (value.startsWith(RAW) ? value.slice(RAW.length) : value) : (JSON.stringify(value) ?? 'undefined');
  return Buffer.from(text, 'utf8').toString('utf8');
}

// ---- the document --------------------------------------------------------------------------

interface FuzzOp {
  operationId: string;
  method: string;
  path: string;
  pathParams: string[];
  queryParams: string[];
  bodyType: 'json' | 'form' | null;
  bodyProps: string[];
  examples: Record<string, unknown>[];
  /** Response statuses the document lists. */
  documented: Set<string>;
}

function readFuzzOps(doc: OpenApiDocument): FuzzOp[] {
  const deref = (node: OpenApiDocument | undefined): OpenApiDocument | undefined => {
    let n = node;
    for (let i = 0; n?.$ref && i < 10; i++)
      n = n.$ref
        .split('/')
        .slice(1)
        .reduce((acc: OpenApiDocument, k: string) => acc?.[k], doc);
    return n;
  };
  const propsOf = (schema: OpenApiDocument | undefined, seen = new Set<unknown>()): string[] => {
    const s = deref(schema);
    if (!s || seen.has(s)) return [];
    seen.add(s);
    const own = Object.keys(s.properties ?? {});
    const nested = [...(s.allOf ?? []), ...(s.oneOf ?? []), ...(s.anyOf ?? [])].flatMap((x: OpenApiDocument) => propsOf(x, seen));
    return [...new Set([...own, ...nested])];
  };
  /** A value the schema would likely accept: its example, enum, const or default, else one built by type. */
  const plausible = (schema: OpenApiDocument | undefined, depth = 0): unknown => {
    const sch = deref(schema);
    if (!sch || depth > 6) return undefined;
    for (const key of ['const', 'default', 'example']) if (sch[key] !== undefined) return sch[key];
    if (Array.isArray(sch.examples) && sch.examples.length) return sch.examples[0];
    if (Array.isArray(sch.enum) && sch.enum.length) return sch.enum[0];
    const alternatives = sch.oneOf ?? sch.anyOf;
    if (Array.isArray(alternatives) && alternatives.length) return plausible(alternatives[0], depth + 1);
    const parts = [sch, ...((sch.allOf ?? []) as OpenApiDocument[]).map((x) => deref(x)!)];
    const type = parts.map((x) => (Array.isArray(x?.type) ? x.type[0] : x?.type)).find(Boolean);
    if (type === 'object' || parts.some((x) => x?.properties)) {
      const out: Record<string, unknown> = {};
      for (const x of parts) for (const name of (x?.required ?? []) as string[]) out[name] = plausible(x?.properties?.[name] ?? parts.map((y) => y?.properties?.[name]).find(Boolean), depth + 1);
      return out;
    }
    if (type === 'array') return sch.items ? [plausible(sch.items, depth + 1)] : [];
    if (type === 'integer' || type === 'number') return sch.minimum ?? 1;
    if (type === 'boolean') return false;
    if (sch.format === 'uuid') return '00000000-0000-4000-8000-000000000000';
    if (sch.format === 'date-time') return new Date().toISOString();
    if (sch.format === 'uri') return 'https://example.com/hook';
    return 'test';
  };
  const ops: FuzzOp[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, OpenApiDocument>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: OpenApiDocument) => deref(p)!);
      const content = deref(op.requestBody)?.content ?? {};
      const json = content['application/json'];
      const form = content['application/x-www-form-urlencoded'];
      const media = json ?? form;
      ops.push({
        operationId: op.operationId,
        method,
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        queryParams: params.filter((p) => p.in === 'query').map((p) => p.name),
        bodyType: json ? 'json' : form ? 'form' : null,
        documented: new Set(Object.keys(op.responses ?? {})),
        bodyProps: propsOf(media?.schema),
        examples: [...Object.values((media?.examples ?? {}) as Record<string, { value?: unknown }>).map((e) => e.value), media?.example, plausible(media?.schema)].filter(
          (v): v is Record<string, unknown> => Boolean(v) && typeof v === 'object' && !Array.isArray(v),
        ),
      });
    }
  }
  return ops;
}

/** One hostile value in an otherwise plausible request, so it gets past the checks before its own. */
type FuzzCase =
  | { target: 'path'; index: number; value: unknown }
  | { target: 'query'; name: string; value: unknown }
  | { target: 'field'; base: number; name: string; value: unknown }
  | { target: 'body'; value: unknown }
  | { target: 'raw'; text: string };

function caseFor(op: FuzzOp): fc.Arbitrary<FuzzCase> {
  const pick = (names: string[], fallback: string) =>
    fc.oneof({ weight: 4, arbitrary: names.length ? fc.constantFrom(...names) : fc.constant(fallback) }, { weight: 1, arbitrary: hostileString.map((s) => s.slice(0, 40)) });
  const targets: Array<fc.Arbitrary<FuzzCase>> = [fc.record({ target: fc.constant('query' as const), name: pick(op.queryParams, 'q'), value: hostileValue })];
  if (op.pathParams.length) targets.push(fc.record({ target: fc.constant('path' as const), index: fc.nat(op.pathParams.length - 1), value: hostileValue }));
  if (op.method !== 'get' && op.method !== 'delete') {
    targets.push(
      fc.record({ target: fc.constant('field' as const), base: fc.nat(), name: pick(op.bodyProps, 'unknown_field'), value: hostileValue }),
      fc.record({ target: fc.constant('field' as const), base: fc.nat(), name: pick(op.bodyProps, 'unknown_field'), value: hostileValue }),
      fc.record({ target: fc.constant('body' as const), value: hostileValue }),
      fc.record({ target: fc.constant('raw' as const), text: fc.constantFrom('{', '{"a":', '[1,2', '{"a":1}}', '\u0000', '{"a":"\\ud800"}', '{"a":"\\u0000"}', 'null', '"x"', '1e400') }),
    );
  }
  return fc.oneof(...targets);
}

/** Values every parameter and body field of every operation receives, besides the random cases. */
const SWEEP_VALUES: unknown[] = ['a\u0000b', '\u0001\u001f\u007f', `${RAW}1e400`, 'x'.repeat(3_000)];

/** The systematic part: each path parameter, query parameter and body field gets each sweep value. */
function sweepFor(op: FuzzOp): FuzzCase[] {
  const out: FuzzCase[] = [];
  for (const value of SWEEP_VALUES) {
    op.pathParams.forEach((_name, index) => out.push({ target: 'path', index, value }));
    for (const name of op.queryParams) out.push({ target: 'query', name, value });
    if (op.method !== 'get' && op.method !== 'delete') for (const name of op.bodyProps) out.push({ target: 'field', base: 0, name, value });
  }
  return out;
}

function buildRequest(op: FuzzOp, c: FuzzCase, uuid: string): { path: string; body?: string; contentType?: string } {
  let i = 0;
  let path = op.path.replace(/\{[^}]+\}/g, () => encodeURIComponent(c.target === 'path' && c.index === i++ ? asText(c.value) : uuid));
  if (c.target === 'query') path += `?${new URLSearchParams([[c.name, asText(c.value)]]).toString()}`;
  if (op.method === 'get' || op.method === 'delete') return { path };
  const contentType = op.bodyType === 'form' ? 'application/x-www-form-urlencoded' : 'application/json';
  if (c.target === 'raw') return { path, body: c.text, contentType };
  const base: Record<string, unknown> = op.examples.length ? { ...op.examples[(c.target === 'field' ? c.base : 0) % op.examples.length] } : {};
  // Example URLs (webhook and x402 targets) never reach the internet: `.invalid` does not resolve.
  for (const [k, v] of Object.entries(base)) if (typeof v === 'string' && /^https?:\/\//.test(v)) base[k] = 'https://fuzz.invalid/target';
  if (c.target === 'field') base[c.name] = c.value;
  if (op.bodyType === 'form') {
    const form = new URLSearchParams();
    for (const [k, v] of Object.entries(c.target === 'body' ? { value: c.value } : base)) form.append(k, asText(v));
    return { path, body: form.toString(), contentType };
  }
  return { path, body: toJson(c.target === 'body' ? c.value : base), contentType };
}

// ---- the run -------------------------------------------------------------------------------

describe('fuzz of every operation', function () {
  this.timeout(120_000);
  let server: TestServer;
  let agent: TestAgent;
  before(async () => {
    server = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
    agent = await createDemoAgent(server);
  });
  after(() => server.close());

  it(`refuses a body nested 5,000 levels deep with 400 on every operation that takes one, on /mcp and on OAuth (limit ${MAX_BODY_DEPTH})`, async function () {
    // One request per operation with a body, each answered before validation; the time goes to authentication under load.
    this.timeout(300_000);
    const deep = nestedText(5_000);
    expect(deep.length).to.be.below(64 * 1024);
    const admin = { authorization: `Bearer ${ADMIN}` };
    // Owner tokens are rate limited per owner (write burst 20): a fresh owner every ten requests.
    let ownerAuth: Record<string, string> = {};
    let ownerCalls = 0;
    const ownerHeaders = async (): Promise<Record<string, string>> => {
      if (ownerCalls++ % 10 === 0) {
        const owner = await server.request('POST', '/v1/admin/owners', { headers: admin, body: { email: `fuzz-${crypto.randomUUID()}@example.com` }, idempotencyKey: newKey() });
        const token = await server.request('POST', `/v1/admin/owners/${owner.body.owner_id}/tokens`, { headers: admin, body: {}, idempotencyKey: newKey() });
        expect(token.status, token.text).to.equal(201);
        ownerAuth = { authorization: `Bearer ${token.body.token}` };
      }
      return ownerAuth;
    };
    const mcpToken = await mintAccessToken(server, agent, { scopes: [...ALL_SCOPES] });
    const ops = readFuzzOps(loadDocument()).filter((op) => op.method !== 'get');
    expect(ops.length).to.be.at.least(60);
    const targets: Array<{ what: string; method: string; path: string; headers: Record<string, string>; body?: string }> = [];
    const wrongAnswers: string[] = [];
    for (const op of ops) {
      const path = op.path.replace(/\{[^}]+\}/g, () => crypto.randomUUID());
      const headers = path.startsWith('/v1/agent') ? agent.headers : path.startsWith('/v1/admin') ? admin : path.startsWith('/v1/owner') ? await ownerHeaders() : {};
      targets.push({ what: op.operationId, method: op.method.toUpperCase(), path, headers });
    }
    targets.push({ what: 'mcp', method: 'POST', path: '/mcp', headers: { authorization: `Bearer ${mcpToken}`, accept: 'application/json, text/event-stream' } });
    for (const t of targets) {
      const res = await fetch(`${server.baseUrl}${t.path}`, { method: t.method, headers: { ...t.headers, 'idempotency-key': newKey(), 'content-type': 'application/json' }, body: deep });
      const text = await res.text();
      if (res.status !== 400) {
        wrongAnswers.push(`${t.what} ${t.method} ${t.path} -> ${res.status} ${text.slice(0, 200)}`);
        continue;
      }
      if (t.path.startsWith('/v1/')) {
        const body = JSON.parse(text) as { error?: { code?: string; details?: { errors?: Array<{ location?: string }> } } };
        if (body.error?.code !== 'validation_failed' || body.error.details?.errors?.[0]?.location !== 'body') wrongAnswers.push(`${t.what} ${t.path} -> ${text.slice(0, 200)}`);
      } else if (t.path.startsWith('/oauth/') && !text.includes(`more than ${MAX_BODY_DEPTH} levels`)) wrongAnswers.push(`${t.what} ${t.path} -> ${text.slice(0, 200)}`);
      else if (t.path === '/mcp' && !text.includes(`more than ${MAX_BODY_DEPTH} levels`)) wrongAnswers.push(`mcp -> ${text.slice(0, 200)}`);
    }
    expect(wrongAnswers, wrongAnswers.join('\n')).to.deep.equal([]);
    // At the limit itself the body is read (and answered by each route's own validation, never a 5xx).
    const atLimit = await fetch(`${server.baseUrl}/v1/agent/recipients/resolve`, {
      method: 'POST',
      headers: { ...agent.headers, 'content-type': 'application/json' },
      body: `{"x":${nestedText(MAX_BODY_DEPTH - 1)}}`,
    });
    expect(atLimit.status).to.equal(400);
    expect(await atLimit.text()).to.not.include('levels deep');
  });

  it('answers no 5xx, and only enveloped errors with X-Request-Id under /v1/agent, to hostile inputs on every operation', async () => {
    const ops = readFuzzOps(loadDocument());
    expect(ops.length).to.be.at.least(70);
    const failures: string[] = [];
    let sent = 0;
    let expected = 0;
    for (const [index, op] of ops.entries()) {
      const cases = [...sweepFor(op), ...fc.sample(caseFor(op), { numRuns: RUNS, seed: SEED + index })];
      expected += cases.length;
      for (const c of cases) {
        const req = buildRequest(op, c, crypto.randomUUID());
        const headers: Record<string, string> = { ...agent.headers, 'idempotency-key': newKey(), accept: 'application/json, text/event-stream' };
        if (req.contentType) headers['content-type'] = req.contentType;
        const res = await fetch(`${server.baseUrl}${req.path}`, { method: op.method.toUpperCase(), headers, body: req.body });
        const text = await res.text();
        sent++;
        const what = `${op.operationId} ${op.method.toUpperCase()} ${req.path.slice(0, 120)} body=${(req.body ?? '').slice(0, 120)}`;
        // An x402 target that cannot be reached is the documented 502 upstream_error, not a fault.
        const upstream = res.status === 502 && op.documented.has('502') && text.includes('"upstream_error"');
        if (res.status >= 500 && !upstream) {
          failures.push(`${what} -> ${res.status} ${text.slice(0, 200)}`);
          continue;
        }
        if (!op.path.startsWith('/v1/agent')) continue;
        if (!res.headers.get('x-request-id')) failures.push(`${what} -> no X-Request-Id`);
        if (res.status >= 400) {
          let body: { ok?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
          try {
            body = JSON.parse(text) as typeof body;
          } catch {
            body = undefined;
          }
          if (body?.ok !== false || typeof body.error?.code !== 'string' || typeof body.error.message !== 'string') failures.push(`${what} -> ${res.status} not enveloped: ${text.slice(0, 200)}`);
        }
      }
    }
    expect(sent)
      .to.equal(expected)
      .and.be.at.least(ops.length * RUNS);
    expect(failures, failures.join('\n')).to.deep.equal([]);
  });
});
