// The real server as child processes: one Redis limit shared by two API processes, and SIGTERM draining.
import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { createKnex, type Knex } from '../../src/db/knex.js';
import { systemClock } from '../../src/lib/clock.js';
import { createAgentService, type AgentService } from '../../src/services/agent.service.js';
import { startServerProcess, type ServerProcess } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';
import { testEnv } from '../setup.js';

async function createAgent(db: Knex, agents: AgentService) {
  const { owner_id } = await agents.createOwner(db, { email: `owner-${randomBytes(6).toString('hex')}@example.com` });
  const created = await agents.createAgent(db, { ownerId: owner_id, name: 'process test agent' });
  return { agentId: created.agent_id, headers: { 'x-agent-id': created.agent_id, 'x-api-key': created.api_key } };
}

describe('API processes', function () {
  this.timeout(90_000);
  let db: Knex;
  let agents: AgentService;
  const started: ServerProcess[] = [];

  before(async () => {
    db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '' });
    agents = createAgentService({ clock: systemClock });
  });
  after(async () => {
    await Promise.all(started.map((p) => p.stop('SIGKILL')));
    await db?.destroy();
  });

  describe('rate limits across two processes sharing one Redis', () => {
    it('accepts exactly the limit across both processes and answers the rest 429 with Retry-After', async () => {
      const env = testConfigEnv({ RUN_WORKER: 'false' });
      const [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
      started.push(a!, b!);
      const agent = await createAgent(db, agents);
      await agents.setRateLimit(db, agent.agentId, { class: 'read', limit: 10, burst: 10, windowSeconds: 60 });

      const results = await Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          const res = await fetch(`${(i % 2 === 0 ? a : b)!.baseUrl}/v1/agent/self`, { headers: agent.headers });
          return {
            process: i % 2,
            status: res.status,
            retryAfter: res.headers.get('retry-after'),
            body: (await res.json()) as { ok: boolean; error?: { code: string; details?: Record<string, number> } },
          };
        }),
      );
      const ok = results.filter((r) => r.status === 200);
      const limited = results.filter((r) => r.status === 429);
      expect(ok).to.have.length(10);
      expect(limited).to.have.length(20);
      // Both processes answered some of each, so the count really was shared.
      expect(new Set(limited.map((r) => r.process)).size).to.equal(2);
      for (const r of limited) {
        expect(Number(r.retryAfter)).to.be.at.least(1);
        expect(r.body.error!.code).to.equal('rate_limited');
        expect(r.body.error!.details!.limit_count).to.equal(10);
      }
      // One more from either process is still refused: the 20 refusals charged nothing.
      const again = await fetch(`${b!.baseUrl}/v1/agent/self`, { headers: agent.headers });
      expect(again.status).to.equal(429);
      await again.body?.cancel();
    });
  });

  describe('Redis unreachable', () => {
    it('boots, serves reads, refuses writes with 503 at once, and still stops cleanly', async () => {
      const proc = await startServerProcess(testConfigEnv({ RUN_WORKER: 'false', REDIS_URL: 'redis://127.0.0.1:1' }));
      started.push(proc);
      const agent = await createAgent(db, agents);
      const read = await fetch(`${proc.baseUrl}/v1/agent/self`, { headers: agent.headers });
      expect(read.status).to.equal(200);
      await read.body?.cancel();
      const t0 = Date.now();
      const write = await fetch(`${proc.baseUrl}/v1/agent/simulate`, {
        method: 'POST',
        headers: { ...agent.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ method: 'POST', path: '/v1/agent/payments', body: {} }),
      });
      expect(write.status).to.equal(503);
      expect(Number(write.headers.get('retry-after'))).to.be.at.least(1);
      expect(((await write.json()) as { error: { code: string } }).error.code).to.equal('service_unavailable');
      expect(Date.now() - t0).to.be.below(5_000);
      // Closing a Redis client that never connected must not hang the drain (quit() would).
      expect(await proc.stop()).to.equal(0);
    });
  });

  describe('SIGTERM', () => {
    it('drains an in-flight request to a complete response, exits 0, then refuses connections', async () => {
      const proc = await startServerProcess(testConfigEnv({ RUN_WORKER: 'false', SHUTDOWN_GRACE_MS: '15000' }));
      started.push(proc);
      const agent = await createAgent(db, agents);
      const payload = Buffer.from(JSON.stringify({ method: 'POST', path: '/v1/agent/payments', body: { recipient: 'nobody@example.com', asset: 'USDC', amount: '1.00' } }));
      const keepAlive = new http.Agent({ keepAlive: true });
      try {
        let req!: http.ClientRequest;
        const response = new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
          req = http.request(
            `${proc.baseUrl}/v1/agent/simulate`,
            { method: 'POST', agent: keepAlive, headers: { ...agent.headers, 'content-type': 'application/json', 'content-length': String(payload.length) } },
            (res) => {
              let body = '';
              res.setEncoding('utf8');
              res.on('data', (c: string) => (body += c));
              res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
              res.on('error', reject);
            },
          );
          req.on('error', reject);
        });
        await new Promise<void>((resolve, reject) => req.write(payload.subarray(0, 10), (err) => (err ? reject(err) : resolve())));
        // Let the server read the headers and start the request, then stop it mid-body.
        await new Promise((r) => setTimeout(r, 300));
        proc.child.kill('SIGTERM');
        await new Promise((r) => setTimeout(r, 300));
        expect(proc.child.exitCode, 'the process waits for the in-flight request').to.equal(null);
        req.end(payload.subarray(10));
        const res = await response;
        const body = JSON.parse(res.body) as { ok: boolean; error?: { code: string } };
        expect(typeof body.ok).to.equal('boolean');
        if (res.status === 200) expect(body.ok).to.equal(true);
        else expect(body.error?.code, `status ${res.status}: ${res.body}`).to.be.a('string');
        expect(res.status).to.not.equal(500);

        expect(await proc.exited).to.equal(0);
        const refused = await new Promise<string>((resolve) => {
          const socket = net.connect(proc.port, '127.0.0.1');
          socket.on('connect', () => {
            socket.destroy();
            resolve('connected');
          });
          socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
        });
        expect(refused).to.equal('ECONNREFUSED');
      } finally {
        keepAlive.destroy();
      }
    });
  });
});
