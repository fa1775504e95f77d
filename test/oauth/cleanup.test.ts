import { expect } from 'chai';
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/knex.js';
import { createFakeClock } from '../../src/lib/clock.js';
import { newId } from '../../src/lib/ids.js';
import { deleteExpiredOAuthRows } from '../../src/oauth/cleanup.js';
import { testEnv } from '../setup.js';

describe('OAuth cleanup loop', () => {
  let db: Knex;
  before(async () => {
    db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '' });
  });
  after(() => db.destroy());

  it('deletes login codes a day past expiry and keeps live ones', async () => {
    const clock = createFakeClock('2026-09-10T12:00:00Z');
    const code = (expiresAt: string) => ({
      id: newId(),
      interaction_uid: `uid-${newId()}`,
      email_hash: 'h',
      code_hash: 'c',
      expires_at: new Date(expiresAt),
      created_at: new Date(expiresAt),
    });
    const old = code('2026-09-08T12:00:00Z');
    const live = code('2026-09-10T12:05:00Z');
    await db('oauth_login_codes').insert([old, live]);
    expect(await deleteExpiredOAuthRows(db, clock)).to.be.at.least(1);
    expect(await db('oauth_login_codes').where({ id: old.id }).first()).to.equal(undefined);
    expect(await db('oauth_login_codes').where({ id: live.id }).first()).to.not.equal(undefined);
  });
});
