// The client's retry, deadline and error rules against a scripted fetch (no server): what the live smoke
// (sdk.test.ts) cannot provoke on demand, such as a 503, an answer without an envelope or a deadline shorter than Retry-After.
import { expect } from 'chai';
import { AgentApiError, AgentClient, AgentNetworkError, isAgentApiError, type RetryInfo } from '../../sdk/src/index.js';

type Step = { status: number; body?: unknown; headers?: Record<string, string> } | 'network';

function scripted(steps: Step[]) {
  const seen: { url: string; method: string; headers: Record<string, string>; body?: string }[] = [];
  const fetchFn: typeof fetch = async (input, init) => {
    seen.push({ url: String(input), method: init?.method ?? 'GET', headers: (init?.headers ?? {}) as Record<string, string>, body: init?.body as string | undefined });
    const step = steps.shift();
    if (!step) throw new Error('no more scripted answers');
    if (step === 'network') throw new TypeError('fetch failed');
    const text = typeof step.body === 'string' ? step.body : JSON.stringify(step.body ?? {});
    return new Response(text, { status: step.status, headers: { 'content-type': 'application/json', ...(step.headers ?? {}) } });
  };
  return { fetchFn, seen };
}

const creds = { baseUrl: 'http://api.test/', agentId: 'a', apiKey: 'k' };
const rateLimited = (retryAfter: string) => ({
  status: 429,
  headers: { 'retry-after': retryAfter, 'x-request-id': 'req-1' },
  body: { ok: false, error: { code: 'rate_limited', message: 'slow down', details: { limit_count: 1, attempted_count: 2 } } },
});
const written = { status: 200, body: { ok: true, operation_id: 'op-1', status: 'accepted' } };

describe('AgentClient (scripted fetch)', () => {
  it('retries a 503 with the same idempotency key and returns the success body', async () => {
    const { fetchFn, seen } = scripted([{ status: 503, headers: { 'retry-after': '0' }, body: { ok: false, error: { code: 'service_unavailable', message: 'down' } } }, written]);
    const retries: RetryInfo[] = [];
    const client = new AgentClient(creds, { fetch: fetchFn, onRetry: (r) => retries.push(r) });
    const res = await client.payments.create({ to: '0x1', asset: 'USDC', amount: '1' });
    expect(res).to.deep.equal(written.body);
    expect(seen).to.have.length(2);
    expect(seen[0]!.url).to.equal('http://api.test/v1/agent/payments');
    expect(seen[0]!.headers['idempotency-key']).to.match(/^sdk_/).and.equal(seen[1]!.headers['idempotency-key']);
    expect(JSON.parse(seen[0]!.body!)).to.deep.equal({ to: '0x1', asset: 'USDC', amount: '1' });
    expect(retries.map((r) => (r.error as AgentApiError).code)).to.deep.equal(['service_unavailable']);
  });

  it('gives up at once when Retry-After would pass the deadline', async () => {
    const { fetchFn, seen } = scripted([rateLimited('30')]);
    const client = new AgentClient(creds, { fetch: fetchFn, timeoutMs: 2_000 });
    const started = Date.now();
    try {
      await client.self.get();
      expect.fail('should throw');
    } catch (e) {
      expect(isAgentApiError(e, 'rate_limited')).to.equal(true);
      expect((e as AgentApiError).retryAfterMs).to.equal(30_000);
      expect((e as AgentApiError).requestId).to.equal('req-1');
      expect((e as AgentApiError).details).to.deep.equal({ limit_count: 1, attempted_count: 2 });
    }
    expect(seen).to.have.length(1);
    expect(Date.now() - started).to.be.below(1_000);
  });

  it('stops after maxRetries', async () => {
    const { fetchFn, seen } = scripted([rateLimited('0'), rateLimited('0'), rateLimited('0')]);
    const client = new AgentClient(creds, { fetch: fetchFn, maxRetries: 2 });
    const err = await client.self.get().catch((e: unknown) => e);
    expect(isAgentApiError(err, 'rate_limited')).to.equal(true);
    expect(seen).to.have.length(3);
  });

  it('resends reads and the optional-key routes (simulate) after a network error, without inventing a key', async () => {
    const reads = scripted(['network', { status: 200, body: { ok: true, agent: { id: 'a' } } }]);
    expect(await new AgentClient(creds, { fetch: reads.fetchFn, retryBaseMs: 1 }).request('GET /v1/agent/self')).to.deep.include({ ok: true });
    expect(reads.seen).to.have.length(2);
    // simulate takes an optional key and changes nothing: resent too.
    const sim = scripted(['network', { status: 200, body: { ok: true, would_succeed: true } }]);
    await new AgentClient(creds, { fetch: sim.fetchFn, retryBaseMs: 1 }).simulate.request({ method: 'POST', path: '/v1/agent/payments', body: {} });
    expect(sim.seen).to.have.length(2);
    expect(sim.seen[0]!.headers['idempotency-key']).to.equal(undefined);
  });

  it('maps an answer without the envelope to an AgentApiError by status, and refuses unknown routes and missing path parameters', async () => {
    const { fetchFn } = scripted([{ status: 502, body: '<html>bad gateway</html>' }]);
    const err = await new AgentClient(creds, { fetch: fetchFn, maxRetries: 0 }).self.get().catch((e: unknown) => e);
    expect(err).to.be.instanceOf(AgentApiError);
    expect(err).to.include({ code: 'upstream_error', status: 502 });
    const client = new AgentClient(creds, { fetch: scripted([]).fetchFn });
    await client.request('GET /v1/agent/nowhere' as 'GET /v1/agent/self').then(
      () => expect.fail('unknown route'),
      (e: unknown) => expect(e).to.be.instanceOf(TypeError),
    );
    await client.operations.get({ id: '' }).then(
      () => expect.fail('missing id'),
      (e: unknown) => expect((e as Error).message).to.contain("'id'"),
    );
  });

  it('reports a deadline as a timed-out AgentNetworkError', async () => {
    const slow: typeof fetch = (_input, init) => new Promise((_resolve, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason), { once: true }));
    const err = await new AgentClient(creds, { fetch: slow, timeoutMs: 100 }).self.get().catch((e: unknown) => e);
    expect(err).to.be.instanceOf(AgentNetworkError);
    expect((err as AgentNetworkError).timedOut).to.equal(true);
  });

  it('encodes path and query parameters and sends bearer tokens', async () => {
    const { fetchFn, seen } = scripted([{ status: 200, body: { ok: true, items: [], next_cursor: null, has_more: false } }]);
    const client = new AgentClient({ baseUrl: 'http://api.test', bearerToken: 'tok' }, { fetch: fetchFn });
    await client.webhooks.listDeliveries({ id: 'a/b', limit: 5, status: 'failed' });
    expect(seen[0]!.url).to.equal('http://api.test/v1/agent/webhooks/a%2Fb/deliveries?limit=5&status=failed');
    expect(seen[0]!.headers.authorization).to.equal('Bearer tok');
    expect(seen[0]!.headers['x-api-key']).to.equal(undefined);
  });
});
