// Every GET route of /v1/agent in the served document makes at most 3 Postgres round trips (issue 12, P1): the key
// check and at most two statements of its own, for an agent holding five assets, an earn position and a loan, with
// an item in every list. The routes come from the router's table (the document), so a new GET route is counted
// without touching this file; a route with a path parameter reads its id from the list route above it.
//
// Counted at the pg driver: every statement a pg Client sends (BEGIN and COMMIT included) while one request is in
// flight. Requests run one at a time and no worker loop runs, so nothing else talks to Postgres meanwhile.
import { expect } from 'chai';
import { addr } from '../ledger/factory.js';
import { newKey, type TestAgent } from '../helpers/server.js';
import { startDefiServer, type DefiServer } from '../defi/http-helpers.js';
import { statementsOf } from '../support/statements.js';

const MAX_ROUND_TRIPS = 3;
const FIVE_ASSETS = { USDC: '20000', EURC: '500', ETH: '2', WETH: '3', CBBTC: '0.05' };

describe('read round trips', function () {
  this.timeout(60_000);
  let s: DefiServer;
  let agent: TestAgent;

  before(async () => {
    s = await startDefiServer();
    agent = await s.agent({ funds: FIVE_ASSETS });
    const post = async (path: string, body: Record<string, unknown>) => {
      const res = await s.request('POST', `/v1/agent${path}`, { agent, body, idempotencyKey: newKey() });
      expect(res.status, `${path}: ${res.text}`).to.equal(200);
      return res.body;
    };
    // An earn position and a loan (WETH collateral, USDC debt).
    await post('/earn/deposit', { asset: 'USDC', vault_id: '6f1d2a10-0000-4000-8000-000000000001', amount: '1000' });
    await post('/borrow/collateral/add', { asset: 'WETH', amount: '2' });
    await post('/borrow', { asset: 'USDC', amount_usd: '1000', max_ltv_after: 0.6 });
    // Something in every list: a payment, a one-off payment, a conversion, withdrawals, recipients, a recurring
    // payment, a trusted destination, a withdrawal method, a webhook with a delivery.
    await post('/webhooks', { url: 'https://hooks.example.com/round-trips', event_types: ['payment.executed'] });
    await post('/payments', { to: addr(0x31), asset: 'USDC', amount: '1.25' });
    await post('/one-off-payments', { to: addr(0x32), asset: 'USDC', amount: '1', expires_in_seconds: 600 });
    const quote = await post('/conversions/quote', { from_asset: 'USDC', to_asset: 'WETH', amount: '10' });
    await post('/conversions', { quote_id: quote.quote.quote_id });
    const { ledger } = s.services;
    const { recipient_id } = await ledger.payments.addRecipient(s.db, agent.agentId, { kind: 'recurring', name: 'Rent', address: addr(0x33) });
    await ledger.payments.addRecurring(s.db, agent.agentId, { recipientId: recipient_id, asset: 'USDC', amount: '3', interval: 'week' });
    const { destination_id } = await ledger.destinations.add(s.db, agent.agentId, { kind: 'crypto', chain: 'base', address: addr(0x34), label: 'Cold', timelockSeconds: 60 });
    s.clock.advance(60_000);
    await post(`/trusted-destinations/${destination_id}/confirm`, {});
    await post('/withdrawals/to-crypto', { destination_id, asset: 'USDC', amount: '1' });
    const { method_id } = await ledger.withdrawals.addMethod(s.db, agent.ownerId, { kind: 'bank', label: 'Checking', last4: '1234' });
    await post('/withdrawals/to-bank', { method_id, asset: 'USDC', amount: '2' });
    await s.settle();
  });
  after(async () => {
    await s?.close();
  });

  /** The statements one request sends, and its answer. */
  async function counted(path: string) {
    const { result: res, statements } = await statementsOf(() => s.request('GET', path, { agent }));
    return { res, statements };
  }

  /** A concrete path: query parameters a route requires, and each `{param}` from the first item of the list route above it. */
  async function concrete(path: string): Promise<string> {
    let out = path;
    for (let m = /\/\{[^}]+\}/.exec(out); m; m = /\/\{[^}]+\}/.exec(out)) {
      const list = out.slice(0, m.index);
      const res = await s.request('GET', list, { agent });
      const id = res.body?.items?.[0]?.id;
      if (typeof id !== 'string') throw new Error(`no item in ${list} to fill ${path} (${res.status} ${res.text.slice(0, 200)}): add a fixture for it`);
      out = `${list}/${encodeURIComponent(id)}${out.slice(m.index + m[0].length)}`;
    }
    return out === '/v1/agent/deposit-address' ? `${out}?asset=USDC&chain=base` : out;
  }

  it(`makes at most ${MAX_ROUND_TRIPS} database round trips on every GET route of /v1/agent`, async () => {
    const reads = s.built.router.ops.filter((op) => op.method === 'get' && op.path.startsWith('/v1/agent/'));
    expect(reads.length).to.be.at.least(40);
    const over: string[] = [];
    const notOk: string[] = [];
    for (const op of reads) {
      const path = await concrete(op.path);
      const { res, statements: sent } = await counted(path);
      if (res.status !== 200 && res.status !== 304) notOk.push(`${op.operationId} ${path} -> ${res.status} ${res.text.slice(0, 200)}`);
      if (sent.length > MAX_ROUND_TRIPS) over.push(`${op.operationId} (${sent.length}):\n    ${sent.map((q) => q.replace(/\s+/g, ' ').slice(0, 160)).join('\n    ')}`);
    }
    expect(notOk, notOk.join('\n')).to.deep.equal([]);
    expect(over, `over ${MAX_ROUND_TRIPS} round trips:\n${over.join('\n')}`).to.deep.equal([]);
  });

  it('counts every statement, BEGIN and COMMIT included (the counter can fail)', async () => {
    const { statements } = await statementsOf(() => s.db.transaction(async (trx) => trx.raw('SELECT 1')));
    expect(statements.map((q) => q.replace(/;$/, '').trim().toUpperCase())).to.deep.equal(['BEGIN', 'SELECT 1', 'COMMIT']);
  });
});
