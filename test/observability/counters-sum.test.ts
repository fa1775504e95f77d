// The soak's counter check (scripts/soak-counters.ts) on two apps, each with its API and worker, against one database:
// the increases of agentapi_operations_total summed over both scrapes equal the table's growth per (type, terminal
// status), and the check fails when a process goes unscraped or restarted.
import { expect } from 'chai';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startMetricsServer } from '../../src/observability/metrics.js';
import { compareOperationCounters, countOperationRows, scrapeProcess } from '../../scripts/soak-counters.js';
import { createDemoAgent, newKey, startTestServer, type TestServer } from '../helpers/server.js';

describe('agentapi_operations_total summed over processes', () => {
  const apps: TestServer[] = [];
  const metricsServers: Server[] = [];
  const urls: string[] = [];

  before(async function () {
    this.timeout(30_000);
    for (let i = 0; i < 2; i++) {
      const app = await startTestServer({ worker: true, env: { METRICS_PORT: '0' } });
      apps.push(app);
      const server = await startMetricsServer(app.built.metrics.registry!, 0, '127.0.0.1');
      metricsServers.push(server);
      urls.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
    }
  });
  after(async () => {
    for (const s of metricsServers) s.close();
    for (const app of apps) await app.close();
  });

  const liveOperations = async () => Number(((await apps[0]!.db('operations').whereIn('status', ['accepted', 'submitted']).count({ n: '*' })) as Array<{ n: string }>)[0]!.n);
  const quiesce = async () => {
    for (let i = 0; i < 150 && (await liveOperations()) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await liveOperations()).to.equal(0);
  };
  const snapshot = async () => ({ processes: await Promise.all(urls.map(scrapeProcess)), table: await countOperationRows(apps[0]!.db) });

  it('matches the table per type and terminal status when every process is scraped, and fails when one is not', async function () {
    this.timeout(40_000);
    const agent = await createDemoAgent(apps[0]!);
    await quiesce();
    const before = await snapshot();
    // Payments through both APIs (settled by whichever worker claims them), and one that rolls back (more than the balance).
    const pay = (i: number, amount: string) =>
      apps[i % 2]!.request('POST', '/v1/agent/payments', { agent, idempotencyKey: newKey(), body: { to: '0x2222222222222222222222222222222222222222', asset: 'USDC', amount } });
    const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => pay(i, '0.5').then((r) => r.status)));
    expect(statuses.every((s) => s === 200)).to.equal(true);
    expect((await pay(1, '999999999')).status).to.not.equal(200);
    await quiesce();
    const after = await snapshot();

    const result = compareOperationCounters({ before: before.processes, after: after.processes, tableBefore: before.table, tableAfter: after.table });
    expect(result.problems).to.deep.equal([]);
    expect(result.ok).to.equal(true);
    expect(result.rows).to.deep.include({ key: 'payment executed', counted: 12, table: 12 });
    // Each process counted its own share (the two APIs accepted six payments each).
    expect(after.processes.map((p, i) => (p.operations.get('payment accepted') ?? 0) - (before.processes[i]!.operations.get('payment accepted') ?? 0))).to.deep.equal([6, 6]);

    // A process left unscraped at the end (its start scrape stands in for it), then one that restarted: both refused.
    const settler = after.processes.findIndex((p, i) => (p.operations.get('payment executed') ?? 0) > (before.processes[i]!.operations.get('payment executed') ?? 0));
    const unscraped = after.processes.map((p, i) => (i === settler ? before.processes[i]! : p));
    expect(compareOperationCounters({ before: before.processes, after: unscraped, tableBefore: before.table, tableAfter: after.table }).ok).to.equal(false);
    const restarted = after.processes.map((p, i) => (i === 0 ? { ...p, startedAt: (p.startedAt ?? 0) + 1 } : p));
    expect(compareOperationCounters({ before: before.processes, after: restarted, tableBefore: before.table, tableAfter: after.table }).problems).to.deep.equal([
      'process 1 restarted between the scrapes',
    ]);
  });
});
