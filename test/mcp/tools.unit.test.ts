// The tool table derived from the contract: names, input schemas, and how arguments become the route's request.
import { expect } from 'chai';
import { loadDocument, readOperations } from '../../src/http/operations.js';
import { ApiError } from '../../src/lib/errors.js';
import { buildTools, listedResourcesOf, toDispatchRequest, toolNameFor, type McpTool } from '../../src/mcp/tools.js';

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

  describe('toolNameFor', () => {
    const listed = listedResourcesOf(ops.map((op) => op.operationId));
    for (const [operationId, name] of [
      ['getSelf', 'agent_self_get'],
      ['listBalances', 'agent_balances_list'],
      ['listCashBalances', 'agent_cash_balances_list'],
      ['createPayment', 'agent_payments_create'],
      ['getOperation', 'agent_operations_get'],
      ['createOneOffPayment', 'agent_one_off_payments_create'],
      ['resolveRecipient', 'agent_recipients_resolve'],
      ['getEarnPosition', 'agent_earn_positions_get'],
      ['claimEarnRewards', 'agent_earn_rewards_claim'],
      ['createConversionQuote', 'agent_conversions_quote_create'],
      ['signX402Payment', 'agent_x402_payment_sign'],
      ['quoteX402', 'agent_x402_quote'],
      ['rotateWebhookSecret', 'agent_webhooks_secret_rotate'],
      ['listWebhookDeliveries', 'agent_webhook_deliveries_list'],
      ['deleteTrustedDestination', 'agent_trusted_destinations_delete'],
    ] as const) {
      it(`names ${operationId} ${name}`, () => {
        expect(toolNameFor(operationId, listed)).to.equal(name);
      });
    }
  });

  describe('buildTools', () => {
    it('offers one uniquely named tool per authenticated /v1/agent operation, without getOpenApi', () => {
      const agentOps = ops.filter((op) => op.path.startsWith('/v1/agent') && !op.isPublic);
      expect(tools).to.have.length(agentOps.length);
      expect(tools.map((t) => t.op.operationId)).not.to.include('getOpenApi');
      expect(tools.map((t) => t.op.operationId)).not.to.include('getHealth');
      expect(new Set(tools.map((t) => t.name)).size).to.equal(tools.length);
      for (const t of tools) expect(t.name).to.match(/^agent_[a-z0-9]+(_[a-z0-9]+)*_[a-z0-9]+$/);
    });

    it('requires idempotency_key exactly on the tools whose route requires a key', () => {
      for (const t of tools) {
        const required = (t.definition.inputSchema.required ?? []) as string[];
        expect(required.includes('idempotency_key'), t.name).to.equal(t.op.idempotency === 'required');
        expect('idempotency_key' in t.definition.inputSchema.properties, t.name).to.equal(t.op.idempotency !== 'none');
      }
      expect(tool('agent_request_simulate').definition.inputSchema.properties).to.have.property('idempotency_key');
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
      const deliveries = tool('agent_webhook_deliveries_list').definition.inputSchema;
      expect(deliveries.properties).to.include.keys(['id', 'cursor', 'limit', 'status', 'event_id']);
      expect(deliveries.properties.limit).to.include({ type: 'integer', maximum: 100 });
    });

    it('marks reads read-only and carries the route scope', () => {
      expect(tool('agent_balances_list').definition.annotations).to.include({ readOnlyHint: true, destructiveHint: false, idempotentHint: true });
      expect(tool('agent_trusted_destinations_delete').definition.annotations).to.include({ readOnlyHint: false, destructiveHint: true });
      expect(tool('agent_payments_create').definition._meta['agent-api/required_scope']).to.equal('agent:payments:write');
      expect(tool('agent_payments_create').definition.description).to.include('agent:payments:write');
    });
  });

  describe('toDispatchRequest', () => {
    it('puts path parameters in the path, query parameters in the query and the key in its header', () => {
      const req = toDispatchRequest(tool('agent_webhook_deliveries_list'), { id: 'a b', limit: 5, status: 'failed' });
      expect(req).to.deep.include({ method: 'get', path: '/v1/agent/webhooks/a%20b/deliveries', query: { limit: '5', status: 'failed' }, body: undefined, idempotencyKey: null });

      const update = toDispatchRequest(tool('agent_webhooks_update'), { id: 'w1', description: 'x', idempotency_key: 'k1' });
      expect(update).to.deep.include({ method: 'patch', path: '/v1/agent/webhooks/w1', body: { description: 'x' }, idempotencyKey: 'k1' });
      expect(update.headers).to.deep.equal({ 'content-type': 'application/json', 'idempotency-key': 'k1' });
    });

    it('sends an empty body to a route whose body is required, so the route names the missing fields', () => {
      expect(toDispatchRequest(tool('agent_webhooks_create'), { idempotency_key: 'k' }).body).to.deep.equal({});
      expect(toDispatchRequest(tool('agent_earn_rewards_claim'), { idempotency_key: 'k' }).body).to.equal(undefined);
    });

    it('refuses a missing or blank idempotency_key on a mutating tool', () => {
      for (const key of [undefined, '', '   ', 'x'.repeat(201), 42]) {
        const err = refusal(() => toDispatchRequest(tool('agent_payments_create'), { to: 'x', asset: 'USDC', amount: '1', ...(key === undefined ? {} : { idempotency_key: key }) }));
        expect(err.code).to.equal('validation_failed');
        expect(JSON.stringify(err.details)).to.include('/idempotency_key');
      }
      expect(toDispatchRequest(tool('agent_request_simulate'), { method: 'GET', path: '/v1/agent/self' }).idempotencyKey).to.equal(null);
    });

    it('refuses a missing path parameter and unknown arguments of a body-less tool', () => {
      expect(refusal(() => toDispatchRequest(tool('agent_operations_get'), {})).code).to.equal('validation_failed');
      expect(refusal(() => toDispatchRequest(tool('agent_self_get'), { extra: true })).code).to.equal('validation_failed');
    });
  });
});
