// Issue 26: an agent written against Hightop's Agent API docs runs here unchanged. Each `describe` names the Hightop
// page (https://www.hightop.com/docs/<page>) whose request examples it replays, in our own paraphrase, against a live
// server (responses validated against the OpenAPI document), and checks the fields and codes that page documents.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { AgentApiError, getAgentApiError, getAgentApiErrorByCode, isAgentErrorCode } from '../../sdk/src/index.js';
import { repoRoot } from '../helpers/process.js';
import { ChainUnavailableError } from '../../src/chain/port.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createSimulationService } from '../../src/services/simulate-onchain.service.js';
import { createX402Service } from '../../src/services/x402/service.js';
import { newKey } from '../helpers/server.js';
import { checksumTables, startLedgerServer, type LedgerServer } from '../ledger/http-server.js';
import { SELLER_PAY_TO, startSeller, type Seller } from '../x402/seller.js';

describe('Hightop compatibility (issue 26)', function () {
  this.timeout(60_000);
  let s: LedgerServer;
  let seller: Seller;

  before(async () => {
    s = await startLedgerServer({ UNSAFE_ALLOW_LOOPBACK_TARGETS: '1' });
    // The seller's facilitator checks validBefore against real time.
    s.clock.set(new Date());
    seller = await startSeller();
    (s.services as { x402: unknown }).x402 = createX402Service({ config: s.config, sealer: createSealer(s.config.masterKey), clock: s.clock, ledger: s.ledger, ca: seller.ca });
  });
  after(async () => {
    await seller?.close();
    await s?.close();
  });

  const usdcBalance = (walletId: string) => s.ledger.ledger.balance(s.db, walletId, 'USDC');

  describe('page api-and-integrations/recipes/pay-with-x402 and api-and-integrations/x402', () => {
    it('quote: a GET of a paid URL reports supported, x402_required and the price (base units beside the USDC figure)', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/quote', { agent, body: { url: seller.url('/v2/paid-api'), method: 'GET' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ ok: true, supported: true, x402_required: true });
      expect(res.body.price).to.include({ amount: '1.5', amount_base_units: '1500000', asset_symbol: 'USDC' });
    });

    it('sign: amount "1000000" is 1 USDC in base units; the answer carries payment_header, payment_header_name and payment_headers', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/sign', {
        agent,
        idempotencyKey: `x402-${newKey()}`,
        body: { target_url: 'https://example.com/paid-api', pay_to: SELLER_PAY_TO, amount: '1000000' },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.payment_header).to.be.a('string').and.not.equal('');
      expect(res.body.payment_headers).to.deep.equal({ [res.body.payment_header_name]: res.body.payment_header });
      expect(res.body.amount).to.equal('1000000');
      // One USDC held, not a million (nor refused as insufficient funds).
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 4_000_000n, held: 1_000_000n });
    });

    it('sign: a decimal amount is validation_failed', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/sign', { agent, idempotencyKey: newKey(), body: { pay_to: SELLER_PAY_TO, amount: '1.5' } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    });

    it('purchase: max_amount "1000000" (1 USDC) against a seller asking 1.5 USDC is refused before signing and moves nothing', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const paidBefore = seller.requests.filter((r) => r.headers['payment-signature'] || r.headers['x-payment']).length;
      const settlementsBefore = seller.settlements.length;
      const before = await checksumTables(s.db);
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: `x402-${newKey()}`, body: { url: seller.url('/v2/paid-api'), max_amount: '1000000', method: 'GET' } });
      expect(res.status, res.text).to.equal(403);
      expect(res.body.error.code).to.equal('limit_exceeded');
      expect(res.body.error.details).to.include({ limit: 'max_amount', price: '1500000', max_amount: '1000000' });
      expect(seller.requests.filter((r) => r.headers['payment-signature'] || r.headers['x-payment'])).to.have.length(paidBefore);
      expect(seller.settlements).to.have.length(settlementsBefore);
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 5_000_000n, held: 0n });
      const after = await checksumTables(s.db);
      // Nothing written but the idempotency record of the refused request.
      delete before.idempotency_keys;
      delete after.idempotency_keys;
      expect(after).to.deep.equal(before);
    });

    it('purchase: max_amount "2000000" pays the 1.5 USDC seller and answers operation_id, paid, seller_accepted, settled and the upstream response', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: `x402-${newKey()}`, body: { url: seller.url('/v2/paid-api'), max_amount: '2000000', method: 'GET' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ paid: true, seller_accepted: true, status: 200 });
      expect(res.body.operation_id).to.be.a('string');
      expect(res.body.settled).to.be.a('boolean');
      expect(res.body.body).to.deep.equal({ result: 'paid content' });
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 3_500_000n, held: 0n });
    });

    it('purchase: a decimal max_amount is validation_failed and never reaches the seller', async () => {
      const agent = await s.agent({ fund: { USDC: '5' } });
      const seen = seller.requests.length;
      const res = await s.request('POST', '/v1/agent/x402/purchase', { agent, idempotencyKey: newKey(), body: { url: seller.url('/v2/paid-api'), max_amount: '1.5' } });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(seller.requests).to.have.length(seen);
    });
  });

  describe('page api-reference/get-self', () => {
    it('GET /self answers agent.wallet_address, agent.active_window, permissions, limits per class, cannot and current_usage beside our fields', async () => {
      const agent = await s.agent();
      const res = await s.request('GET', '/v1/agent/self', { agent });
      expect(res.status, res.text).to.equal(200);
      const a = res.body.agent;
      expect(a).to.include({ id: agent.agentId, enabled: true });
      expect(a.wallet_address).to.equal(res.body.wallet.address);
      expect(a.active_window).to.deep.equal({ starts_at: a.starts_at, expires_at: a.ends_at });
      expect(res.body.permissions.operation_types).to.include.members(['payment', 'conversion', 'earn.deposit']);
      expect(res.body.permissions.webhook_event_types).to.include('payment.executed');
      expect(res.body.limits.read).to.have.all.keys('limit', 'burst', 'windowSeconds');
      expect(res.body.limits.read.windowSeconds).to.equal(60);
      expect(res.body.cannot).to.deep.equal([]);
      expect(res.body.current_usage).to.deep.equal({});
    });
  });

  describe('page api-reference/get-self-limits', () => {
    it('GET /self/limits answers spend_limits, swap_limits, permissions (always lists) and current_usage; null is no cap', async () => {
      const agent = await s.agent({
        policy: { operation_types: ['payment', 'conversion'], per_tx_usd: '100', per_period_usd: '500', period: 'day', max_slippage_bps: 50, allowed_recipients: 'all' },
        fund: { USDC: '50' },
      });
      const pay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '5' } });
      expect(pay.status, pay.text).to.equal(200);
      const res = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.spend_limits).to.deep.equal({ per_tx_usd: '100', per_period_usd: '500', lifetime_usd: null, max_txs_per_period: null, tx_cooldown_blocks: null, fail_on_zero_price: false });
      expect(res.body.swap_limits).to.deep.equal({ max_slippage_bps: 50, max_swaps_per_period: null });
      expect(res.body.permissions.operation_types).to.deep.equal(['payment', 'conversion']);
      expect(res.body.permissions.cannot).to.include('earn.deposit').and.not.include('payment');
      expect(res.body.current_usage).to.deep.equal({ txs_in_period: 1, spent_in_period_usd: '5', swaps_in_period: 0, total_txs: 1, total_spent_usd: '5' });
      // Our own view stays as it was.
      expect(res.body.limits).to.include({ per_tx_usd: '100', period: 'day' });
      expect(res.body.usage).to.include({ period_txs: 1, period_usd: '5' });
    });

    it('an allow-all policy lists every operation type in permissions.operation_types, never the string "all"', async () => {
      const agent = await s.agent({ policy: 'all' });
      const res = await s.request('GET', '/v1/agent/self/limits', { agent });
      expect(res.body.limits.operation_types).to.equal('all');
      expect(res.body.permissions.operation_types).to.be.an('array').that.includes.members(['payment', 'conversion', 'x402.purchase']);
      expect(res.body.permissions.cannot).to.deep.equal([]);
    });
  });

  describe('page api-reference/get-balances', () => {
    it('GET /balances items carry asset_symbol, asset_display_name, amount, amount_usd and category', async () => {
      const agent = await s.agent({ fund: { USDC: '12.5' } });
      const res = await s.request('GET', '/v1/agent/balances', { agent });
      expect(res.status, res.text).to.equal(200);
      const usdc = res.body.items.find((i: { asset_symbol: string }) => i.asset_symbol === 'USDC');
      expect(usdc).to.include({ asset_symbol: 'USDC', amount: '12.5', amount_usd: '12.5', category: 'cash', total: '12.5', value_usd: '12.5' });
      expect(usdc.asset_display_name).to.be.a('string').and.not.equal('');
      const cash = await s.request('GET', '/v1/agent/balances/cash', { agent });
      expect(cash.body.items.every((i: { category: string; amount: string }) => i.category === 'cash' && typeof i.amount === 'string')).to.equal(true);
    });
  });

  describe('page api-and-integrations/reference/capabilities', () => {
    for (const path of ['/v1/agent/capabilities', '/v1/agent/capabilities.json']) {
      it(`GET ${path} answers agent_api_contract_version, base_path, Hightop's endpoint fields and both event lists`, async () => {
        const agent = await s.agent();
        const res = await s.request('GET', path, { agent });
        expect(res.status, res.text).to.equal(200);
        expect(res.body.agent_api_contract_version).to.be.a('string').and.not.equal('');
        expect(res.body.base_path).to.equal('/v1/agent');
        const quote = res.body.endpoints.find((e: { method: string; path: string }) => e.method === 'POST' && e.path === '/v1/agent/conversions/quote');
        expect(quote).to.include({ rate_limit_class: 'simulate', idempotency_required: true, request_schema: 'ConversionQuoteRequest' });
        expect(quote.description).to.be.a('string').and.not.equal('');
        expect(quote.response_schema).to.be.a('string');
        expect(res.body.webhook_event_types).to.include.members(res.body.subscribable_webhook_event_types);
        expect(res.body.subscribable_webhook_event_types).to.include('payment.executed');
        expect(res.body.operation_types).to.include('payment');
      });
    }
  });

  describe('page api-reference/post-conversions-quote and api-and-integrations/recipes/convert-with-quote', () => {
    it('POST /conversions/quote answers legs with protocol_id and protocol_name and the route intermediate_assets; the quote executes once', async () => {
      const agent = await s.agent({ fund: { USDC: '1000' } });
      const res = await s.request('POST', '/v1/agent/conversions/quote', { agent, idempotencyKey: newKey(), body: { from_asset: 'USDC', to_asset: 'WETH', amount: '100', slippage_percent: 0.5 } });
      expect(res.status, res.text).to.equal(200);
      const q = res.body.quote;
      expect(q).to.include.keys('quote_id', 'from_asset', 'to_asset', 'from_amount', 'expected_out', 'min_amount_out', 'slippage_percent', 'human_rate', 'route', 'expires_at', 'expires_in_seconds');
      expect(q.expires_in_seconds).to.equal(60);
      expect(q.route.intermediate_assets).to.deep.equal([]);
      for (const leg of q.route.legs) {
        expect(leg.protocol_id).to.equal(leg.protocol);
        expect(leg.protocol_name).to.be.a('string').and.not.equal('');
        expect(leg).to.include.keys('pool_address', 'from_asset', 'to_asset', 'expected_out', 'fee_bps');
      }
      const exec = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: q.quote_id } });
      expect(exec.status, exec.text).to.equal(200);
      const again = await s.request('POST', '/v1/agent/conversions', { agent, idempotencyKey: newKey(), body: { quote_id: q.quote_id } });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('quote_already_consumed');
    });
  });

  describe('page api-reference/post-simulate', () => {
    const quoteBody = { from_asset: 'USDC', to_asset: 'ETH', amount: '1', slippage_percent: 1 };

    it('depth defaults to policy: would_succeed with execution_path naming the route, body and policy stages', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/conversions/quote', body: quoteBody } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ would_succeed: true, depth: 'policy' });
      expect(res.body.execution_path).to.deep.equal(['validate_route', 'validate_request_body', 'validate_static_contract', 'evaluate_policy_permission', 'evaluate_policy_limits']);
      expect(res.body.stages).to.be.an('array');
    });

    it('a policy refusal stops at evaluate_policy_permission with permission_not_granted', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/conversions/quote', body: quoteBody, depth: 'policy' } });
      expect(res.body).to.include({ would_succeed: false });
      expect(res.body.error.code).to.equal('permission_not_granted');
      expect(res.body.execution_path).to.deep.equal(['validate_route', 'validate_request_body', 'validate_static_contract', 'evaluate_policy_permission']);
    });

    it('depth static checks only the shape: the same refused request would pass, and no policy stage appears', async () => {
      const agent = await s.agent({ policy: { operation_types: ['payment'] }, fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/conversions/quote', body: quoteBody, depth: 'static' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ would_succeed: true, depth: 'static' });
      expect(res.body.execution_path).to.deep.equal(['validate_route', 'validate_request_body', 'validate_static_contract']);
      const bad = await s.request('POST', '/v1/agent/simulate', { agent, body: { method: 'POST', path: '/v1/agent/conversions/quote', body: { ...quoteBody, amount: 'one' }, depth: 'static' } });
      expect(bad.body).to.include({ would_succeed: false });
      expect(bad.body.error.code).to.equal('validation_failed');
    });

    it('depth onchain on the simulated chain reports simulate_onchain_not_run', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/simulate', {
        agent,
        body: { method: 'POST', path: '/v1/agent/payments', body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '1' }, depth: 'onchain' },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ would_succeed: true, depth: 'onchain' });
      expect(res.body.execution_path).to.include('simulate_onchain_not_run');
    });

    it('depth onchain answers 503 agent_api_chain_unavailable when the chain node does not answer', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const services = s.services as { simulation: unknown };
      const real = services.simulation;
      const down = async () => {
        throw new ChainUnavailableError(new Error('connect ECONNREFUSED'));
      };
      services.simulation = createSimulationService({ chain: { mode: 'evm', head: down, callTransfer: down }, ledger: s.services.ledger.ledger });
      try {
        const res = await s.request('POST', '/v1/agent/simulate', {
          agent,
          body: { method: 'POST', path: '/v1/agent/payments', body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '1' }, depth: 'onchain' },
        });
        expect(res.status, res.text).to.equal(503);
        expect(res.body.error.code).to.equal('agent_api_chain_unavailable');
      } finally {
        services.simulation = real;
      }
    });
  });

  describe('page api-reference/post-recipients-resolve and api-and-integrations/recipes/pay-a-vendor', () => {
    it('resolve with action send_payment answers recipient{id, type, display_name, nickname, asset_symbols, status, agent_actions, blocked_actions}; paying recipient.id works', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      await s.services.ledger.payments.addRecipient(s.db, agent.agentId, { kind: 'recurring', name: 'Compute vendor', address: '0x3333333333333333333333333333333333333333' });
      const res = await s.request('POST', '/v1/agent/recipients/resolve', { agent, body: { to: 'Compute vendor', asset: 'USDC', action: 'send_payment' } });
      expect(res.status, res.text).to.equal(200);
      const r = res.body.recipient;
      expect(r).to.include({ type: 'recurring_payment', display_name: 'Compute vendor', nickname: 'Compute vendor', status: 'active' });
      expect(r.asset_symbols).to.deep.equal(['USDC']);
      expect(r.agent_actions).to.deep.equal(['send_payment']);
      expect(r.blocked_actions).to.deep.equal({});
      expect(res.body.resolution).to.include({ allowed: true });
      const pay = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: `vendor-payment-${newKey()}`, body: { to: r.id, asset: 'USDC', amount: '1', prefer: 'auto' } });
      expect(pay.status, pay.text).to.equal(200);
      expect(pay.body).to.include.keys('ok', 'operation_id', 'status', 'resource', 'fee_usd', 'human_message');
      const op = await s.request('GET', `/v1/agent/operations/${pay.body.operation_id}`, { agent });
      expect(op.status).to.equal(200);
    });

    it('a refused action is listed in blocked_actions with its code', async () => {
      const agent = await s.agent({ policy: { operation_types: ['conversion'] } });
      const res = await s.request('POST', '/v1/agent/recipients/resolve', { agent, body: { to: SELLER_PAY_TO, asset: 'USDC', action: 'send_payment' } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.recipient.agent_actions).to.deep.equal([]);
      expect(res.body.recipient.blocked_actions).to.deep.equal({ send_payment: 'permission_not_granted' });
    });
  });

  describe('page api-and-integrations/reference/errors', () => {
    // Hightop's vocabulary by status (paraphrased from the page's tables).
    const HIGHTOP_CODES: Record<number, string[]> = {
      400: ['validation_failed', 'signature_expired', 'signature_invalid_s'],
      401: ['authentication_failed', 'agent_disabled', 'agent_not_yet_active', 'agent_expired', 'invalid_token'],
      403: [
        'owner_only_action',
        'identity_gated_action',
        'permission_not_granted',
        'asset_not_allowed',
        'recipient_not_allowed',
        'protocol_not_allowed',
        'limit_exceeded',
        'ltv_too_high',
        'insufficient_scope',
        'operation_feature_disabled',
        'cooldown_active',
      ],
      404: ['not_found', 'cheque_not_found'],
      409: [
        'quote_expired',
        'quote_already_consumed',
        'idempotency_key_reuse_mismatch',
        'idempotency_request_in_progress',
        'operation_not_cancellable',
        'operation_not_supported_for_wrapper_version',
        'ltv_target_unreachable',
        'signature_invalid_nonce',
        'time_delay_not_reached',
        'cheque_replaced',
        'loot_not_available',
        'starter_agent_not_removable',
        'owner_changed_pending_state',
        'one_off_payment_already_paid',
        'one_off_payment_not_active',
        'one_off_payment_replaced',
        'one_off_payment_stale',
        'pending_one_off_payment_settings_exists',
        'pending_one_off_payment_settings_missing',
        'pending_time_lock_exists',
        'migration_blocked_pending_one_off_payment_settings',
        'migration_blocked_pending_time_lock',
        'timelock_not_elapsed',
        'rule_changed_during_execution',
      ],
      422: ['insufficient_funds', 'slippage_exceeded', 'price_stale', 'invalid_pull_one_off_payment_flags'],
      429: ['rate_limited'],
      500: ['internal_error'],
      502: ['execution_failed', 'execution_timeout', 'batch_step_failed'],
      503: ['agent_api_cutover_in_progress', 'agent_api_chain_unavailable'],
    };

    it("the served document declares every Hightop code with Hightop's status, the unreachable ones as reserved", async () => {
      const agent = await s.agent();
      const doc = (await s.request('GET', '/v1/agent/openapi.json', { agent })).body;
      const errorCode = doc.components.schemas.ErrorCode;
      for (const [status, codes] of Object.entries(HIGHTOP_CODES)) {
        for (const code of codes) {
          expect(errorCode.enum, code).to.include(code);
          expect(errorCode['x-agent-actions'][code].status, code).to.equal(Number(status));
        }
      }
      expect(errorCode['x-reserved-codes']).to.include('cheque_not_found').and.not.include('cooldown_active').and.not.include('agent_api_chain_unavailable');
    });

    it('the envelope is {ok:false, error{code, message, details?}}', async () => {
      const res = await s.request('GET', '/v1/agent/self', { headers: { 'x-agent-id': '00000000-0000-4000-8000-000000000000', 'x-api-key': 'wrong' } });
      expect(res.status).to.equal(401);
      expect(res.body.ok).to.equal(false);
      expect(res.body.error).to.include({ code: 'authentication_failed' });
      expect(res.body.error.message).to.be.a('string');
    });
  });

  describe('page api-and-integrations/reference/sdk-and-openapi', () => {
    it('the SDK offers getAgentApiError, getAgentApiErrorByCode and isAgentErrorCode', () => {
      const e = new AgentApiError({ code: 'limit_exceeded', message: 'over the cap', status: 403 });
      expect(getAgentApiError(e)).to.equal(e);
      expect(getAgentApiError(new Error('x'))).to.equal(undefined);
      expect(getAgentApiErrorByCode(e, 'limit_exceeded')).to.equal(e);
      expect(getAgentApiErrorByCode(e, 'insufficient_funds')).to.equal(undefined);
      expect(isAgentErrorCode('cooldown_active')).to.equal(true);
      expect(isAgentErrorCode('agent_api_chain_unavailable')).to.equal(true);
      expect(isAgentErrorCode('no_such_code')).to.equal(false);
    });
  });

  describe('page api-and-integrations/cli', () => {
    it('a write without --idempotency-key prints the key it generated on stderr, and a retry with it replays', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const env = { ...process.env, AGENT_API_BASE_URL: s.baseUrl, AGENT_API_AGENT_ID: agent.agentId, AGENT_API_KEY: agent.apiKey };
      const args = ['tsx', 'sdk/src/cli.ts', 'payments', 'create', '--to', SELLER_PAY_TO, '--asset', 'USDC', '--amount', '1'];
      // Asynchronously: the server answering the CLI runs in this process.
      const cli = (extra: string[]) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn('npx', ['--no-install', ...args, ...extra], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.on('close', (status) => resolve({ status, stdout, stderr }));
        });
      const first = await cli([]);
      expect(first.status, first.stderr).to.equal(0);
      const key = /idempotency-key: (\S+)/.exec(first.stderr)?.[1];
      expect(key, first.stderr).to.match(/^cli_[0-9a-f]{32}$/);
      const again = await cli(['--idempotency-key', key!]);
      expect(again.status, again.stderr).to.equal(0);
      expect(again.stderr).to.not.contain('idempotency-key:');
      expect(JSON.parse(again.stdout).operation_id).to.equal(JSON.parse(first.stdout).operation_id);
    });
  });

  describe('page api-and-integrations/reference/endpoints', () => {
    it('GET /v1/agent/skill.md serves the Markdown briefing, like /skill.md, without credentials', async () => {
      const res = await s.request('GET', '/v1/agent/skill.md');
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/text\/markdown/);
      expect(res.text).to.equal((await s.request('GET', '/skill.md')).text);
    });
  });

  describe('page api-reference/post-payments', () => {
    it("the page's body (deliver_as and prefer auto, note null, slippage_percent 1) creates a payment", async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/payments', {
        agent,
        idempotencyKey: newKey(),
        body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '1', deliver_as: 'auto', prefer: 'auto', note: null, slippage_percent: 1 },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ ok: true, fee_usd: '0' });
      expect(res.body.resource.type).to.equal('payment');
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 9_000_000n, held: 1_000_000n });
    });

    it('deliver_as names a rail: trusted_destination to an address that is none is refused, nothing held', async () => {
      const agent = await s.agent({ fund: { USDC: '10' } });
      const res = await s.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: SELLER_PAY_TO, asset: 'USDC', amount: '1', deliver_as: 'trusted_destination' } });
      expect(res.status, res.text).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(await usdcBalance(agent.walletId)).to.deep.equal({ available: 10_000_000n, held: 0n });
    });
  });
});
