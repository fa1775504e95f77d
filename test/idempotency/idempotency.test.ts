import { expect } from 'chai';
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/knex.js';
import { createIdempotency } from '../../src/idempotency/idempotency.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createSealer } from '../../src/lib/crypto.js';
import { ApiError, errorBody } from '../../src/lib/errors.js';
import { newId } from '../../src/lib/ids.js';
import { testEnv } from '../setup.js';

describe('idempotency (Postgres)', () => {
  let db: Knex;
  const clock = createFakeClock('2026-03-01T00:00:00Z');
  before(async () => {
    db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '', poolMax: 60 });
    await db.raw('CREATE TABLE IF NOT EXISTS idem_effects (id serial primary key, agent_id uuid, note text)');
  });
  after(() => db.destroy());

  const run = (agentId: string, key: string, fp = 'fp-1') => ({ agentId, key, fingerprint: fp, operationId: 'createPayment' });
  const effect = (agentId: string, note: string) => async (trx: Knex.Transaction) => {
    await trx('idem_effects').insert({ agent_id: agentId, note });
    return { status: 200, body: { ok: true, note } };
  };
  const effects = async (agentId: string) => Number((await db('idem_effects').where({ agent_id: agentId }).count('* as n'))[0]!.n);

  it('executes once among 50 concurrent identical requests', async () => {
    const idem = createIdempotency({ db, clock, sealer: createSealer('test-master-key-0123456789abcdef0123456789') });
    const agentId = newId();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, async () => {
        const res = await idem.run(run(agentId, 'race'), async (trx) => {
          await new Promise((r) => setTimeout(r, 50));
          return effect(agentId, 'race')(trx);
        });
        return res;
      }),
    );
    expect(await effects(agentId)).to.equal(1);
    const fulfilled = outcomes.filter((o) => o.status === 'fulfilled');
    const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    for (const r of rejected) expect((r.reason as ApiError).code).to.equal('idempotency_request_in_progress');
    expect(fulfilled.length).to.be.at.least(1);
    const replay = await idem.run(run(agentId, 'race'), effect(agentId, 'again'));
    expect(replay.replayed).to.equal(true);
    expect(await effects(agentId)).to.equal(1);
  });

  it('replays the stored status and body, and refuses another fingerprint', async () => {
    const idem = createIdempotency({ db, clock, sealer: createSealer('test-master-key-0123456789abcdef0123456789') });
    const agentId = newId();
    const first = await idem.run(run(agentId, 'k1'), effect(agentId, 'one'));
    const second = await idem.run(run(agentId, 'k1'), effect(agentId, 'two'));
    expect(first.replayed).to.equal(false);
    expect(second.replayed).to.equal(true);
    expect(second.result.body).to.deep.equal({ ok: true, note: 'one' });
    expect(second.result.headers?.['X-Idempotency-Replayed']).to.equal('true');
    try {
      await idem.run(run(agentId, 'k1', 'other'), effect(agentId, 'three'));
      expect.fail('expected a mismatch');
    } catch (err) {
      expect((err as ApiError).code).to.equal('idempotency_key_reuse_mismatch');
    }
    expect(await effects(agentId)).to.equal(1);
  });

  it('stores a refusal with its effects rolled back, or committed when asked', async () => {
    const idem = createIdempotency({ db, clock, sealer: createSealer('test-master-key-0123456789abcdef0123456789') });
    const agentId = newId();
    const refused = await idem.run(run(agentId, 'r1'), async (trx) => {
      await trx('idem_effects').insert({ agent_id: agentId, note: 'rolled back' });
      throw new ApiError('insufficient_funds', 'no money');
    });
    expect(refused.result.status).to.equal(422);
    expect(await effects(agentId)).to.equal(0);
    const committed = await idem.run(run(agentId, 'r2'), async (trx) => {
      await trx('idem_effects').insert({ agent_id: agentId, note: 'policy record' });
      return { status: 403, body: errorBody('limit_exceeded', 'cap') };
    });
    expect(committed.result.status).to.equal(403);
    expect(await effects(agentId)).to.equal(1);
    const replay = await idem.run(run(agentId, 'r2'), effect(agentId, 'x'));
    expect(replay.replayed).to.equal(true);
    expect(replay.result.status).to.equal(403);
  });

  it('stores nothing for a 5xx, so the key stays usable', async () => {
    const idem = createIdempotency({ db, clock, sealer: createSealer('test-master-key-0123456789abcdef0123456789') });
    const agentId = newId();
    try {
      await idem.run(run(agentId, 'boom'), async () => {
        throw new Error('database fell over');
      });
      expect.fail('expected a throw');
    } catch (err) {
      expect((err as Error).message).to.equal('database fell over');
    }
    const retry = await idem.run(run(agentId, 'boom'), effect(agentId, 'ok'));
    expect(retry.replayed).to.equal(false);
    expect(await effects(agentId)).to.equal(1);
  });

  it('forgets records after 24 hours and cleans them up', async () => {
    const local = createFakeClock('2026-03-02T00:00:00Z');
    const idem = createIdempotency({ db, clock: local, sealer: createSealer('test-master-key-0123456789abcdef0123456789') });
    const agentId = newId();
    await idem.run(run(agentId, 'old'), effect(agentId, 'first'));
    local.advance(24 * 3600 * 1000 + 1000);
    expect(await idem.deleteExpired()).to.be.at.least(1);
    expect(await db('idempotency_keys').where({ agent_id: agentId }).first()).to.equal(undefined);
    const fresh = await idem.run(run(agentId, 'old', 'different body now'), effect(agentId, 'second'));
    expect(fresh.replayed).to.equal(false);
    expect(await effects(agentId)).to.equal(2);
  });
});
