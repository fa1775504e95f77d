// Idempotency records hold the response as sent, sealed (issue 10 items 5 and 13): a replay is byte-identical,
// and no record holds a returned secret in plaintext, including records written before responses were sealed.
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createIdempotency } from '../../src/idempotency/idempotency.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { newId } from '../../src/lib/ids.js';
import { createWebhookService } from '../../src/services/webhook.service.js';
import { newKey, startTestServer, type TestAgent, type TestServer } from '../helpers/server.js';
import { createTableResolver } from '../webhooks/hostile-urls.js';

describe('idempotency records', function () {
  this.timeout(30_000);
  let server: TestServer;
  let agent: TestAgent;

  before(async () => {
    server = await startTestServer();
    (server.services as { webhooks: unknown }).webhooks = createWebhookService({
      clock: server.clock,
      sealer: createSealer(server.config.masterKey),
      allowLoopback: false,
      resolver: createTableResolver(),
    });
    agent = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, agent.agentId, { class: 'webhook_management', limit: 1000, burst: 1000, windowSeconds: 60 });
  });
  after(() => server.close());

  const rowsOf = (agentId: string) => server.db('idempotency_keys').where({ agent_id: agentId });

  it('replays createWebhook byte for byte, keys in the order first sent', async () => {
    const key = newKey();
    const body = { url: 'https://hooks.example.com/replay', event_types: ['payment.executed'], description: 'replay' };
    const first = await server.request('POST', '/v1/agent/webhooks', { agent, body, idempotencyKey: key });
    expect(first.status, first.text).to.equal(200);
    // jsonb sorts keys by length: the endpoint's `id, url, description, event_types, ...` would come back reordered.
    expect(first.text).to.match(/"webhook":\{"id":"[^"]+","url":"[^"]+","description"/);
    const replay = await server.request('POST', '/v1/agent/webhooks', { agent, body, idempotencyKey: key });
    expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
    expect(replay.text).to.equal(first.text);
  });

  it('holds no plaintext secret after createWebhook and rotateWebhookSecret, and replays both', async () => {
    const other = await server.createAgent();
    await server.services.agents.setRateLimit(server.db, other.agentId, { class: 'webhook_management', limit: 1000, burst: 1000, windowSeconds: 60 });
    const createKey = newKey();
    const created = await server.request('POST', '/v1/agent/webhooks', {
      agent: other,
      body: { url: 'https://hooks.example.com/sealed', event_types: ['payment.executed'] },
      idempotencyKey: createKey,
    });
    expect(created.status, created.text).to.equal(200);
    const rotateKey = newKey();
    const rotated = await server.request('POST', `/v1/agent/webhooks/${created.body.webhook.id}/rotate-secret`, { agent: other, idempotencyKey: rotateKey });
    expect(rotated.status, rotated.text).to.equal(200);
    const secrets = [created.body.signing_secret as string, rotated.body.signing_secret as string];
    expect(secrets[0]).to.match(/^whsec_/);
    expect(secrets[1]).to.match(/^whsec_/);

    const rows = await rowsOf(other.agentId);
    expect(rows).to.have.length(2);
    for (const row of rows) {
      expect(row.sealed_response).to.match(/^v1\./);
      expect(row.response_body).to.equal(null);
      for (const secret of secrets) expect(JSON.stringify(row)).not.to.include(secret);
    }
    const replayed = await server.request('POST', `/v1/agent/webhooks/${created.body.webhook.id}/rotate-secret`, { agent: other, idempotencyKey: rotateKey });
    expect(replayed.text).to.equal(rotated.text);
  });

  it('seals records written in plaintext before the change, and still replays them', async () => {
    const db: Knex = server.db;
    const clock = createFakeClock(new Date());
    const idempotency = createIdempotency({ db, clock, sealer: createSealer(server.config.masterKey) });
    const agentId = agent.agentId;
    const key = `legacy-${newId()}`;
    const legacyBody = { ok: true, signing_secret: `whsec_legacy_${newId()}` };
    await db('idempotency_keys').insert({
      agent_id: agentId,
      key,
      fingerprint: 'fp',
      operation_id: 'createWebhook',
      status_code: 200,
      response_body: JSON.stringify(legacyBody),
      response_headers: '{}',
      created_at: clock.now(),
      expires_at: new Date(clock.now().getTime() + 3_600_000),
    });
    const run = { agentId, key, fingerprint: 'fp', operationId: 'createWebhook' };
    const never = async () => expect.fail('a stored key must not run again');
    expect((await idempotency.run(run, never)).result.body).to.deep.equal(legacyBody);

    while ((await idempotency.sealLegacyRecords()) > 0);
    const row = await db('idempotency_keys').where({ agent_id: agentId, key }).first();
    expect(row.response_body).to.equal(null);
    expect(row.sealed_response).to.match(/^v1\./);
    expect(JSON.stringify(row)).not.to.include(legacyBody.signing_secret);
    const replay = await idempotency.run(run, never);
    expect(replay.replayed).to.equal(true);
    expect(replay.result.body).to.deep.equal(legacyBody);
  });
});
