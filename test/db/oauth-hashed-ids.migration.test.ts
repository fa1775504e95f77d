// Migration 0007 on rows written before it: OAuth artefacts keep working, looked up by hash, and sessions
// and interactions (whose ids the migration cannot seal) are dropped.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from '../../src/db/migrations/index.js';
import { artefactHash } from '../../src/db/repositories/oauth.repository.js';
import { createSealer } from '../../src/lib/crypto.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { createAdapterClass } from '../../src/oauth/adapter.js';
import { adminQuery, testEnv } from '../setup.js';

describe('migration 0011_oauth_hashed_ids', function () {
  this.timeout(60_000);
  const name = `agent_api_mig_${randomBytes(4).toString('hex')}`;
  let db: Knex;
  const admin = adminQuery;

  before(async () => {
    await admin(`CREATE DATABASE ${name}`);
    db = knexFactory({ client: 'pg', connection: testEnv.databaseUrl.replace(/\/[^/]*$/, `/${name}`) });
  });
  after(async () => {
    await db?.destroy();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });

  it('hashes ids, uids and interaction ids, drops the payload copy of the id, and keeps tokens usable', async () => {
    const before0007 = { ...migrationSource, getMigrations: async () => (await migrationSource.getMigrations([])).filter((m) => m < '0007') };
    await db.migrate.latest({ migrationSource: before0007 });
    const later = new Date(Date.now() + 3_600_000);
    const model = (m: string, id: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ model: m, id, payload: JSON.stringify(payload), expires_at: later, ...extra });
    await db('oauth_models').insert([
      model('RefreshToken', 'refresh-plain', { jti: 'refresh-plain', kind: 'RefreshToken', grantId: 'grant-1', exp: Math.floor(later.getTime() / 1000), iat: 1 }, { grant_id: 'grant-1' }),
      model('Session', 'session-plain', { jti: 'session-plain', uid: 'session-uid', kind: 'Session' }, { uid: 'session-uid' }),
      model('Interaction', 'interaction-plain', { jti: 'interaction-plain', kind: 'Interaction', session: { cookie: 'session-plain' } }),
      model('Client', 'client-1', { client_id: 'client-1', client_name: 'Old app' }, { expires_at: null }),
    ]);
    await db('oauth_login_codes').insert({
      id: '00000000-0000-4000-8000-0000000000aa',
      interaction_uid: 'interaction-plain',
      email_hash: 'e',
      code_hash: 'c',
      expires_at: later,
      created_at: new Date(),
    });

    await db.migrate.latest({ migrationSource });

    const rows = await db('oauth_models').select('model', 'id', 'payload');
    expect(rows.map((r) => r.model).sort()).to.deep.equal(['Client', 'RefreshToken']);
    expect(JSON.stringify(rows)).not.to.include('refresh-plain');
    expect(rows.find((r) => r.model === 'RefreshToken')!.id).to.equal(artefactHash('refresh-plain'));
    expect((await db('oauth_login_codes').first()).interaction_uid).to.equal(artefactHash('interaction-plain'));

    const Adapter = createAdapterClass({ db, clock: createFakeClock(new Date()), sealer: createSealer('k'.repeat(40)) });
    expect(await new Adapter('RefreshToken').find('refresh-plain')).to.include({ jti: 'refresh-plain', grantId: 'grant-1' });
    expect(await new Adapter('Client').find('client-1')).to.deep.equal({ client_id: 'client-1', client_name: 'Old app' });
    expect(await new Adapter('Session').find('session-plain')).to.equal(undefined);
  });
});
