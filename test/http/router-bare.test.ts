// Requests with nothing for openapi-backend to parse or validate (an authenticated call to an operation declaring no
// parameter and no body, without a query string) go straight to the handler (src/http/router.ts). The handler must
// see exactly what openapi-backend would hand it, and answer the same: each such /v1/agent operation is called
// through a router taking that way and through one sending everything to openapi-backend.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { bareOperations, createRouter } from '../../src/http/router.js';
import type { RequestContext, Router } from '../../src/http/types.js';

const document = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));

describe('router: operations with nothing to validate', () => {
  const seen: Record<string, unknown[]> = { direct: [], backend: [] };
  let direct: Router;
  let backend: Router;
  let bare: { operationId: string; method: string; path: string }[];

  before(async () => {
    const ids = bareOperations(document);
    bare = [];
    for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, { operationId?: string }>>)) {
      for (const [method, op] of Object.entries(item))
        if (op?.operationId && ids.has(op.operationId) && method === 'get' && path.startsWith('/v1/agent')) bare.push({ operationId: op.operationId, method, path });
    }
    // Each handler records what it was given and answers with it.
    const recorder = (into: unknown[]) => async (req: unknown, ctx: RequestContext) => {
      into.push(req);
      return { status: 200, body: { req, agent: ctx.principal.agentId } };
    };
    const handlers = (into: unknown[]) => Object.fromEntries(bare.map((op) => [op.operationId, recorder(into)]));
    direct = await createRouter({ document, handlers: handlers(seen.direct!) as never });
    backend = await createRouter({ document, handlers: handlers(seen.backend!) as never, bareDirect: false });
  });

  it('finds the bare operations of /v1/agent: no parameter, or only optional query parameters, and no body', () => {
    expect(bare.map((o) => o.operationId)).to.include.members(['getSelf', 'listBalances', 'listOperations', 'listActivity']);
    for (const kept of ['getOperation', 'getOpenApi'])
      expect(
        bare.map((o) => o.operationId),
        kept,
      ).to.not.include(kept);
    expect(bare.length).to.be.at.least(20);
  });

  it('hands every bare operation the same request and answers alike both ways', async () => {
    const ctx = { principal: { agentId: 'agent-1', scopes: new Set() }, requestId: 'r1', dryRun: false } as unknown as RequestContext;
    for (const op of bare) {
      const req = { method: op.method.toUpperCase(), path: op.path, query: {}, headers: { 'x-agent-id': 'agent-1', accept: 'application/json', 'if-none-match': '"x"' }, body: undefined };
      const a = await direct.handle({ ...req }, ctx);
      const b = await backend.handle({ ...req }, ctx);
      expect(a, op.operationId).to.deep.equal(b);
    }
    expect(seen.direct).to.deep.equal(seen.backend);
    expect(seen.direct).to.have.length(bare.length);
  });

  it('still validates when a query string is sent', async () => {
    const ctx = { principal: { agentId: 'agent-1', scopes: new Set() }, requestId: 'r1' } as unknown as RequestContext;
    const err = await direct.handle({ method: 'GET', path: '/v1/agent/self', query: { foo: '1' }, headers: {}, body: undefined }, ctx).catch((e: unknown) => e);
    expect((err as { code?: string }).code).to.equal('validation_failed');
  });
});
