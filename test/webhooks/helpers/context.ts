// Shared fixture for webhook service/worker tests: per-run database, fake clock, agents, events, a worker factory.
import type { Knex } from 'knex';
import { createKnex, withTransaction } from '../../../src/db/knex.js';
import { appendEvent, type EventEnvelope } from '../../../src/db/repositories/event.repository.js';
import type { DeliveryRow } from '../../../src/db/repositories/delivery.repository.js';
import { createFakeClock, type FakeClock } from '../../../src/lib/clock.js';
import { createSealer } from '../../../src/lib/crypto.js';
import { createLogger } from '../../../src/lib/logger.js';
import { createAgentService } from '../../../src/services/agent.service.js';
import { createWebhookService, type WebhookCaller } from '../../../src/services/webhook.service.js';
import { createDeliveryWorker, type DeliveryWorkerDeps } from '../../../src/webhooks/delivery-worker.js';
import type { ResolvedAddress } from '../../../src/webhooks/url-safety.js';
import { testEnv } from '../../setup.js';
import { createTestAgent } from '../../support/agents.js';
import { createTableResolver, HOSTILE_DNS, PUBLIC_DNS } from '../hostile-urls.js';

export const TEST_MASTER_KEY = 'test-master-key-0123456789abcdef0123456789';

export interface WebhookTestContext {
  db: Knex;
  clock: FakeClock;
  dns: Record<string, ResolvedAddress[]>;
  service: ReturnType<typeof createWebhookService>;
  /** Same service without the loopback exemption (production rules). */
  strictService: ReturnType<typeof createWebhookService>;
  newAgent(): Promise<WebhookCaller>;
  emit(caller: WebhookCaller, type?: string, data?: Record<string, unknown>): Promise<EventEnvelope>;
  worker(overrides?: Partial<DeliveryWorkerDeps>): ReturnType<typeof createDeliveryWorker>;
  deliveriesOf(endpointId: string): Promise<DeliveryRow[]>;
  close(): Promise<void>;
}

export async function createWebhookTestContext(ca?: string): Promise<WebhookTestContext> {
  const db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '' });
  const clock = createFakeClock('2026-03-01T00:00:00.000Z');
  const sealer = createSealer(TEST_MASTER_KEY);
  const dns: Record<string, ResolvedAddress[]> = { ...HOSTILE_DNS, ...PUBLIC_DNS };
  const resolver = createTableResolver(dns);
  const agents = createAgentService({ clock });
  const service = createWebhookService({ clock, sealer, allowLoopback: true, resolver });
  const log = createLogger('silent');
  const workers: Array<ReturnType<typeof createDeliveryWorker>> = [];
  let ownerId: string | null = null;
  return {
    db,
    clock,
    dns,
    service,
    strictService: createWebhookService({ clock, sealer, allowLoopback: false, resolver }),
    async newAgent() {
      ownerId ??= (await agents.createOwner(db, { email: `wh-${Math.random().toString(16).slice(2)}@example.com` })).owner_id;
      const { agentId, walletId } = await createTestAgent({ db, agents }, { ownerId, name: 'webhook test agent' });
      return { agentId, walletId };
    },
    emit(caller, type = 'payment.executed', data = { amount: '1.5' }) {
      return withTransaction(db, (trx) =>
        appendEvent(trx, {
          type,
          agentId: caller.agentId,
          walletId: caller.walletId,
          operationId: null,
          resource: { type: 'operation', id: '00000000-0000-4000-8000-000000000001' },
          data,
          createdAt: clock.now(),
        }),
      );
    },
    worker(overrides = {}) {
      const worker = createDeliveryWorker({
        db,
        clock,
        log,
        sealer,
        leaseMs: 30_000,
        attemptTimeoutMs: 2_000,
        allowLoopback: true,
        resolver,
        ca,
        idleMs: 20,
        random: () => 0.5,
        ...overrides,
      });
      workers.push(worker);
      return worker;
    },
    deliveriesOf(endpointId) {
      return db('webhook_deliveries')
        .where({ endpoint_id: endpointId })
        .orderBy([{ column: 'created_at' }, { column: 'id' }]);
    },
    async close() {
      for (const w of workers) w.close();
      await db.destroy();
    },
  };
}

export async function waitUntil<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 15));
  }
}
