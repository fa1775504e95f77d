// The tool table derived from the contract: names, input and output schemas, and how arguments become the route's request.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { loadDocument, readOperations } from '../../src/http/operations.js';
import { ApiError } from '../../src/lib/errors.js';
import { listedResourcesOf, toolNamesOf } from '../../src/mcp/names.js';
import { toolCatalog } from '../../src/mcp/catalog.js';
import { buildTools, toDispatchRequest, type McpTool } from '../../src/mcp/tools.js';

describe('MCP tools', () => {
  const document = loadDocument();
  const ops = readOperations(document);
  const tools = buildTools(document, ops);
  const byName = new Map(tools.map((t) => [t.name, t]));
  const tool = (name: string): McpTool => {
    const found = byName.get(name);
    if (!found) throw new Error(`no tool ${name}`);
    return found;
  };
  const refusal = (fn: () => unknown): ApiError => {
    try {
      fn();
    } catch (err) {
      expect(err).to.be.instanceOf(ApiError);
      return err as ApiError;
    }
    throw new Error('expected a refusal');
  };

  const listed = listedResourcesOf(ops.map((op) => op.operationId));

  describe('toolNamesOf: the route-derived name', () => {
    // The three examples, then the rule's corners: singletons, items, nested collections, hyphens and dots.
    for (const [method, path, name] of [
      ['get', '/v1/agent/balances/cash', 'agent_balances_cash_list'],
      ['post', '/v1/agent/borrow/collateral/add', 'agent_borrow_collateral_add_create'],
      ['get', '/v1/agent/account', 'agent_account_get'],
      ['get', '/v1/agent/borrow', 'agent_borrow_get'],
      ['get', '/v1/agent/earn', 'agent_earn_list'],
      ['get', '/v1/agent/earn/{id}', 'agent_earn_get'],
      ['get', '/v1/agent/webhooks/{id}/deliveries', 'agent_webhooks_deliveries_list'],
      ['patch', '/v1/agent/webhooks/{id}', 'agent_webhooks_update'],
      ['delete', '/v1/agent/trusted-destinations/{id}', 'agent_trusted_destinations_delete'],
      ['post', '/v1/agent/withdrawals/to-bank', 'agent_withdrawals_to_bank_create'],
      ['get', '/v1/agent/capabilities.json', 'agent_capabilities_json_get'],
      ['get', '/v1/agent/deposit-address', 'agent_deposit_address_get'],
    ] as const) {
      it(`names ${method.toUpperCase()} ${path} ${name}`, () => {
        const op = ops.find((o) => o.method === method && o.path === path);
        expect(op, path).to.not.equal(undefined);
        expect(toolNamesOf(document, op!, listed).name).to.equal(name);
      });
    }

    it('lists a GET only on a collection without a trailing path parameter', () => {
      // A document whose two GETs both answer a list page.
      const page = { content: { 'application/json': { schema: { type: 'object', properties: { items: { type: 'array' }, has_more: { type: 'boolean' } } } } } };
      const things = { paths: { '/v1/agent/things': { get: { responses: { 200: page } } }, '/v1/agent/things/{id}': { get: { responses: { 200: page } }, put: { responses: {} } } } };
      const nameOf = (method: string, path: string) => toolNamesOf(things, { operationId: `${method}Things`, method, path }, new Set()).name;
      expect(nameOf('get', '/v1/agent/things')).to.equal('agent_things_list');
      expect(nameOf('get', '/v1/agent/things/{id}')).to.equal('agent_things_get');
      expect(nameOf('put', '/v1/agent/things/{id}')).to.equal('agent_things_update');
    });
  });

  describe('toolNamesOf: the earlier name (before route-derived ones, still callable)', () => {
    for (const [operationId, name] of [
      ['listCashBalances', 'agent_cash_balances_list'],
      ['createPayment', 'agent_payments_create'],
      ['resolveRecipient', 'agent_recipients_resolve'],
      ['rotateWebhookSecret', 'agent_webhooks_secret_rotate'],
      ['listWebhookDeliveries', 'agent_webhook_deliveries_list'],
    ] as const) {
      it(`named ${operationId} ${name}`, () => {
        const op = ops.find((o) => o.operationId === operationId);
        expect(op, operationId).to.not.equal(undefined);
        expect(toolNamesOf(document, op!, listed).earlier).to.equal(name);
      });
    }

    it('keeps an old name as an alias only where it differs and names no other tool', () => {
      const names = new Set(tools.map((t) => t.name));
      expect(tool('agent_balances_cash_list').legacyName).to.equal('agent_cash_balances_list');
      expect(tool('agent_payments_create').legacyName).to.equal(null);
      for (const t of tools) if (t.legacyName) expect(names.has(t.legacyName), t.legacyName).to.equal(false);
    });
  });

  describe('buildTools', () => {
    it('offers one uniquely named tool per authenticated /v1/agent operation, without getOpenApi', () => {
      const agentOps = ops.filter((op) => op.path.startsWith('/v1/agent') && !op.isPublic);
      expect(tools).to.have.length(agentOps.length);
      expect(tools.map((t) => t.op.operationId)).not.to.include('getOpenApi');
      expect(tools.map((t) => t.op.operationId)).not.to.include('getHealth');
      expect(new Set(tools.map((t) => t.name)).size).to.equal(tools.length);
      for (const t of tools) expect(t.name).to.match(/^agent_[a-z0-9]+(_[a-z0-9]+)*_(get|list|create|update|delete)$/);
    });

    it('requires idempotency_key exactly on the tools whose route requires a key', () => {
      for (const t of tools) {
        const required = (t.definition.inputSchema.required ?? []) as string[];
        expect(required.includes('idempotency_key'), t.name).to.equal(t.op.idempotency === 'required');
        expect('idempotency_key' in t.definition.inputSchema.properties, t.name).to.equal(t.op.idempotency !== 'none');
      }
      expect(tool('agent_simulate_create').definition.inputSchema.properties).to.have.property('idempotency_key');
    });

    it('merges path, query and body arguments and keeps the body combinators', () => {
      const update = tool('agent_webhooks_update').definition.inputSchema;
      expect(update.properties).to.have.keys(['id', 'url', 'description', 'event_types', 'enabled', 'idempotency_key']);
      expect(update.required).to.deep.equal(['id', 'idempotency_key']);
      // The body needs one field; the merged object also carries id and idempotency_key.
      expect(update.minProperties).to.equal(3);
      // Exactly one of amount and amount_usd: the document's two shapes, each forbidding the other field.
      const [byAmount, byAmountUsd] = tool('agent_payments_create').definition.inputSchema.oneOf;
      expect(byAmount).to.deep.include({ required: ['amount'] });
      expect(byAmount.properties.amount_usd).to.include.keys(['not']);
      expect(byAmountUsd).to.deep.include({ required: ['amount_usd'] });
      expect(byAmountUsd.properties.amount).to.include.keys(['not']);
      const deliveries = tool('agent_webhooks_deliveries_list').definition.inputSchema;
      expect(deliveries.properties).to.include.keys(['id', 'cursor', 'limit', 'status', 'event_id']);
      expect(deliveries.properties.limit).to.include({ type: 'integer', maximum: 100 });
    });

    it('marks reads read-only and carries the route scope', () => {
      expect(tool('agent_balances_list').definition.annotations).to.include({ readOnlyHint: true, destructiveHint: false, idempotentHint: true });
      expect(tool('agent_trusted_destinations_delete').definition.annotations).to.include({ readOnlyHint: false, destructiveHint: true });
      expect(tool('agent_payments_create').definition._meta['agent-api/required_scope']).to.equal('agent:payments:write');
      expect(tool('agent_payments_create').definition.description).to.include('agent:payments:write');
    });

    it('carries scope, rate class and whether idempotency_key is required in _meta', () => {
      expect(tool('agent_payments_create').definition._meta).to.include({
        'agent-api/rate_limit_class': 'write',
        'agent-api/idempotency_key_required': true,
        'agent-api/route': 'POST /v1/agent/payments',
      });
      expect(tool('agent_simulate_create').definition._meta).to.include({ 'agent-api/required_scope': 'agent:simulate', 'agent-api/idempotency_key_required': false });
      expect(tool('agent_webhooks_get').definition._meta['agent-api/alternative_scopes']).to.deep.equal(['agent:webhooks:manage']);
    });

    it('gives every tool the self-contained object schema of its 200/201 answer as outputSchema', () => {
      for (const t of tools) {
        const output = t.definition.outputSchema;
        expect(output.type, t.name).to.equal('object');
        expect(JSON.stringify(output), t.name).not.to.include('$ref');
      }
      expect(tool('agent_account_get').definition.outputSchema.required).to.include('ok');
      expect(tool('agent_assets_list').definition.outputSchema.properties).to.include.keys(['items', 'has_more', 'next_cursor']);
    });
  });

  describe('toDispatchRequest', () => {
    it('puts path parameters in the path, query parameters in the query and the key in its header', () => {
      const req = toDispatchRequest(tool('agent_webhooks_deliveries_list'), { id: 'a b', limit: 5, status: 'failed' });
      expect(req).to.deep.include({ method: 'get', path: '/v1/agent/webhooks/a%20b/deliveries', query: { limit: '5', status: 'failed' }, body: undefined, idempotencyKey: null });

      const update = toDispatchRequest(tool('agent_webhooks_update'), { id: 'w1', description: 'x', idempotency_key: 'k1' });
      expect(update).to.deep.include({ method: 'patch', path: '/v1/agent/webhooks/w1', body: { description: 'x' }, idempotencyKey: 'k1' });
      expect(update.headers).to.deep.equal({ 'content-type': 'application/json', 'idempotency-key': 'k1' });
    });

    it('sends an empty body to a route whose body is required, so the route names the missing fields', () => {
      expect(toDispatchRequest(tool('agent_webhooks_create'), { idempotency_key: 'k' }).body).to.deep.equal({});
      expect(toDispatchRequest(tool('agent_earn_rewards_claim_create'), { idempotency_key: 'k' }).body).to.equal(undefined);
    });

    it('refuses a missing or blank idempotency_key on a mutating tool', () => {
      for (const key of [undefined, '', '   ', 'x'.repeat(201), 42]) {
        const err = refusal(() => toDispatchRequest(tool('agent_payments_create'), { to: 'x', asset: 'USDC', amount: '1', ...(key === undefined ? {} : { idempotency_key: key }) }));
        expect(err.code).to.equal('validation_failed');
        expect(JSON.stringify(err.details)).to.include('/idempotency_key');
      }
      expect(toDispatchRequest(tool('agent_simulate_create'), { method: 'GET', path: '/v1/agent/self' }).idempotencyKey).to.equal(null);
    });

    it('refuses a missing path parameter and unknown arguments of a body-less tool', () => {
      expect(refusal(() => toDispatchRequest(tool('agent_operations_get'), {})).code).to.equal('validation_failed');
      expect(refusal(() => toDispatchRequest(tool('agent_self_get'), { extra: true })).code).to.equal('validation_failed');
    });
  });

  describe('src/mcp/README.md', () => {
    it('lists every tool with its route, scope, class and earlier name, as the catalog derives them', () => {
      const readme = readFileSync(new URL('../../src/mcp/README.md', import.meta.url), 'utf8');
      const rows = readme.split('\n').filter((line) => /^\| `(agent|mcp)_/.test(line));
      const code = (text: string | null) => (text ? `\`${text}\`` : '');
      const expected = toolCatalog(document).map(
        (t) =>
          `| \`${t.name}\` | ${t.route ? code(t.route) : '(session tool)'} | ${[t.scope, ...t.alternativeScopes].join(' or ')} | ${t.rateClass} | ${t.idempotencyKey === 'none' ? '' : t.idempotencyKey} | ${code(t.earlierName)} |`,
      );
      expect(rows).to.deep.equal(expected);
      expect(toolCatalog(document).map((t) => t.name)).to.deep.equal([...tools.map((t) => t.name), 'agent_operations_wait_for_status', 'mcp_subscribe', 'mcp_unsubscribe']);
    });
  });
});
