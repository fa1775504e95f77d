// /skill.md and /llms.txt: rendered from the document (every error code with its advice, the terminal statuses, the
// rate classes, the MCP tools of the agent routes), served as text, and linked from /llms.txt.
import { expect } from 'chai';
import { renderSkill, mcpToolNames } from '../../src/docs/skill.js';
import { loadDocument } from '../../src/http/operations.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const document = loadDocument();
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** `METHOD path` of every /v1/agent operation that takes a credential, read straight from the document. */
function agentRoutes(): string[] {
  const routes: string[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, { security?: unknown[] }>>)) {
    if (!path.startsWith('/v1/agent/')) continue;
    for (const m of METHODS) if (item[m] && (item[m].security ?? document.security ?? []).length > 0) routes.push(`${m.toUpperCase()} ${path}`);
  }
  return routes.sort();
}

/** The rows of the Markdown table under `## heading`. */
function tableRows(markdown: string, heading: string): string[][] {
  const section = markdown.split(`\n## ${heading}\n`)[1]!.split('\n## ')[0]!;
  return section
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('|---'))
    .slice(1)
    .map((l) => l.slice(2, -2).split(' | '));
}

describe('getSkill', () => {
  const skill = renderSkill(document);

  it('gives every ErrorCode a row with its HTTP status and the advice of x-agent-actions', () => {
    const codes = document.components.schemas.ErrorCode.enum as string[];
    const actions = document.components.schemas.ErrorCode['x-agent-actions'] as Record<string, { status: number; action: string }>;
    const rows = tableRows(skill, 'Errors');
    expect(rows.map((r) => r[0])).to.deep.equal(codes.map((c) => `\`${c}\``));
    for (const [code, status, advice] of rows) {
      const entry = actions[code!.slice(1, -1)]!;
      expect(Number(status), code).to.equal(entry.status);
      expect(advice, code).to.equal(entry.action);
    }
  });

  it('lists one MCP tool per agent route of the document, with unique names', () => {
    const rows = tableRows(skill, 'MCP tools');
    expect(rows.map((r) => r[1]!.slice(1, -1)).sort()).to.deep.equal(agentRoutes());
    const names = rows.map((r) => r[0]);
    expect(new Set(names).size).to.equal(names.length);
  });

  it('derives tool names from the route and the method', () => {
    const byRoute = new Map(mcpToolNames(document).map((t) => [`${t.method} ${t.path}`, t.name]));
    expect(byRoute.get('GET /v1/agent/balances/cash')).to.equal('agent_balances_cash_list');
    expect(byRoute.get('POST /v1/agent/borrow/collateral/add')).to.equal('agent_borrow_collateral_add_create');
    expect(byRoute.get('GET /v1/agent/account')).to.equal('agent_account_get');
    expect(byRoute.get('GET /v1/agent/operations/{id}')).to.equal('agent_operations_get');
    expect(byRoute.get('PATCH /v1/agent/webhooks/{id}')).to.equal('agent_webhooks_update');
    expect(byRoute.get('DELETE /v1/agent/trusted-destinations/{id}')).to.equal('agent_trusted_destinations_delete');
    expect(byRoute.has('GET /v1/agent/openapi.json'), 'a public document is no tool').to.equal(false);
  });

  it('states the terminal statuses, the rate classes, the idempotency header and money as decimal strings', () => {
    const status = document.components.schemas.OperationStatus;
    expect(skill).to.include(`Terminal (stop polling): ${(status['x-terminal'] as string[]).map((s) => `\`${s}\``).join(', ')}.`);
    const classes = tableRows(skill, 'Rate limits').map((r) => r[0]);
    expect(classes).to.have.members(['read', 'write', 'simulate', 'webhook_management']);
    expect(skill).to.include('- `POST /v1/agent/payments` (createPayment)');
    expect(skill).to.include('Money is a decimal string in asset units');
    expect(skill).to.include(`Pattern \`${document.components.schemas.Decimal.pattern}\``);
    for (const scheme of ['x-agent-id', 'x-api-key', 'Authorization: Bearer']) expect(skill).to.include(scheme);
  });

  it('refuses a document whose error code has no advice', () => {
    const broken = structuredClone(document);
    delete broken.components.schemas.ErrorCode['x-agent-actions'].price_stale;
    expect(() => renderSkill(broken)).to.throw('ErrorCode price_stale has no x-agent-actions entry');
  });
});

describe('getSkill, getLlmsTxt and the Redoc bundle over HTTP', () => {
  let srv: TestServer;
  before(async () => {
    srv = await startTestServer();
  });
  after(async () => {
    await srv?.close();
  });

  it('serves /skill.md as Markdown without credentials', async () => {
    const res = await srv.request('GET', '/skill.md');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/markdown/);
    expect(res.text).to.equal(renderSkill(document));
  });

  it('links /skill.md, /docs and the OpenAPI document from /llms.txt', async () => {
    const res = await srv.request('GET', '/llms.txt');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    expect(res.text.startsWith('# Agent API\n')).to.equal(true);
    for (const link of ['](/skill.md)', '](/docs)', '](/v1/agent/openapi.json)']) expect(res.text).to.include(link);
  });

  it('serves the docs page and the Redoc bundle from this service', async () => {
    const page = await srv.request('GET', '/docs');
    expect(page.status).to.equal(200);
    expect(page.text).to.include('<script src="/docs/redoc.standalone.js"></script>');
    expect(page.text).to.not.match(/https?:\/\//);
    const bundle = await srv.request('GET', '/docs/redoc.standalone.js');
    expect(bundle.status).to.equal(200);
    expect(bundle.headers.get('content-type')).to.match(/javascript/);
    expect(bundle.text.length).to.be.greaterThan(100_000);
  });
});
