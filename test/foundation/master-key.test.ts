// MASTER_KEY rotation: `npm run rotate-master-key` re-seals every registered column (the registry's completeness: test/db/sealed-columns.test.ts).
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createApp, type BuiltApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { listSealedValues } from '../../src/db/repositories/sealed.repository.js';
import { SEALED_COLUMNS } from '../../src/db/sealed-columns.js';
import { createSealer } from '../../src/lib/crypto.js';
import { rotateMasterKey } from '../../src/services/master-key.service.js';
import { loadSigningKeys } from '../../src/oauth/keys.js';
import { createScratchDatabase, type ScratchDatabase } from '../helpers/database.js';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const OLD_KEY = 'old-master-key-0000000000000000000000000000';
const NEW_KEY = 'new-master-key-1111111111111111111111111111';

const opensWith = (key: string, sealed: string): boolean => {
  try {
    createSealer(key).open(sealed);
    return true;
  } catch {
    return false;
  }
};

describe('rotate-master-key', () => {
  let scratch: ScratchDatabase;
  let built: BuiltApp;

  before(async function () {
    this.timeout(60_000);
    scratch = await createScratchDatabase('rotation');
    built = await createApp(loadConfig(testConfigEnv({ DATABASE_URL: scratch.url, AUTO_MIGRATE: 'true', MASTER_KEY: OLD_KEY }), () => {}));
    const { services, db } = built;
    const owner = await services.agents.createOwner(db, { email: 'rotation@example.com' });
    for (let i = 0; i < 3; i++) {
      const agent = await services.agents.createAgent(db, { ownerId: owner.owner_id, name: `rotation ${i}` });
      const caller = { agentId: agent.agent_id, walletId: agent.wallet_id };
      const { webhook } = await services.webhooks.create(db, caller, { url: 'https://example.com/hook', event_types: ['payment.executed'] });
      await services.webhooks.rotateSecret(db, caller, webhook.id);
    }
    await loadSigningKeys(db, createSealer(OLD_KEY), built.clock);
    // One sealed idempotency response and one sealed OAuth secret, so every registered column holds a value.
    const now = new Date();
    await db('idempotency_keys').insert({
      agent_id: owner.owner_id,
      key: 'rotation',
      fingerprint: 'f',
      operation_id: 'createWebhook',
      status_code: 200,
      response_body: null,
      sealed_response: createSealer(OLD_KEY).seal('{"ok":true}'),
      created_at: now,
      expires_at: now,
    });
    await db('oauth_models').insert({ model: 'Client', id: 'rotation-client', payload: {}, sealed_secrets: createSealer(OLD_KEY).seal('{"client_secret":"s"}') });
  });
  after(async function () {
    this.timeout(30_000);
    await built?.close();
    await scratch?.drop();
  });

  it('re-seals every value under the new key, leaves nothing the old key opens, and is idempotent', async function () {
    this.timeout(60_000);
    const before = await Promise.all(SEALED_COLUMNS.map((c) => listSealedValues(built.db, c, null, 1000)));
    expect(before.map((rows) => rows.length)).to.deep.equal([3, 3, 3, 1, 1, 1]);
    expect(before.flat().every((v) => opensWith(OLD_KEY, v.sealed))).to.equal(true);

    const run = () =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/rotate-master-key.ts'], {
        cwd: repoRoot,
        env: { ...process.env, ...testConfigEnv({ DATABASE_URL: scratch.url, MASTER_KEY: NEW_KEY, MASTER_KEY_PREVIOUS: OLD_KEY }) },
      });
    const first = JSON.parse((await run()).stdout) as { ok: boolean; columns: Array<{ resealed: number; alreadyCurrent: number; unopenable: string[] }> };
    expect(first.ok).to.equal(true);
    expect(first.columns.map((c) => c.resealed)).to.deep.equal([3, 3, 3, 1, 1, 1]);

    const after = await Promise.all(SEALED_COLUMNS.map((c) => listSealedValues(built.db, c, null, 1000)));
    const values = after.flat();
    expect(values).to.have.length(12);
    expect(values.every((v) => opensWith(NEW_KEY, v.sealed) && !opensWith(OLD_KEY, v.sealed))).to.equal(true);
    // Same plaintexts as before.
    const plain = (key: string, rows: typeof values) => rows.map((v) => createSealer(key).open(v.sealed));
    expect(plain(NEW_KEY, values)).to.deep.equal(plain(OLD_KEY, before.flat()));

    const second = JSON.parse((await run()).stdout) as typeof first;
    expect(second.columns.map((c) => [c.resealed, c.alreadyCurrent])).to.deep.equal([
      [0, 3],
      [0, 3],
      [0, 3],
      [0, 1],
      [0, 1],
      [0, 1],
    ]);
  });

  it('opens values sealed under the previous key while both are configured, and seals under the new one', () => {
    const old = createSealer(OLD_KEY).seal('secret');
    const both = createSealer(NEW_KEY, OLD_KEY);
    expect(both.open(old)).to.equal('secret');
    expect(opensWith(NEW_KEY, both.seal('x'))).to.equal(true);
    expect(() => createSealer(NEW_KEY).open(old)).to.throw();
  });

  it('refuses to run without MASTER_KEY_PREVIOUS (exit 2)', async () => {
    const err = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/rotate-master-key.ts'], {
      cwd: repoRoot,
      env: { ...process.env, ...testConfigEnv({ DATABASE_URL: scratch.url, MASTER_KEY: NEW_KEY }) },
    }).then(
      () => null,
      (e: { code?: number; stderr?: string }) => e,
    );
    expect(err?.code).to.equal(2);
    expect(err?.stderr).to.contain('MASTER_KEY_PREVIOUS');
  });

  it('walks a table with a composite primary key across batches (the shape of idempotency_keys)', async () => {
    await built.db.raw('CREATE TABLE rotation_probe (agent_id uuid NOT NULL, key text NOT NULL, probe_sealed text, PRIMARY KEY (agent_id, key))');
    try {
      const agents = [crypto.randomUUID(), crypto.randomUUID()];
      const rows = agents.flatMap((agent_id) => ['a', 'b', 'c'].map((key) => ({ agent_id, key, probe_sealed: createSealer(OLD_KEY).seal(`${agent_id}/${key}`) })));
      await built.db('rotation_probe').insert([...rows, { agent_id: agents[0], key: 'null', probe_sealed: null }]);
      const columns = [{ table: 'rotation_probe', key: ['agent_id', 'key'], column: 'probe_sealed' }];
      const [result] = await rotateMasterKey({ db: built.db, masterKey: NEW_KEY, previousMasterKey: OLD_KEY, columns, batchSize: 2 });
      expect(result).to.include({ resealed: 6, alreadyCurrent: 0, changedMeanwhile: 0 });
      const after = (await built.db('rotation_probe').whereNotNull('probe_sealed')) as Array<{ agent_id: string; key: string; probe_sealed: string }>;
      expect(after.map((r) => createSealer(NEW_KEY).open(r.probe_sealed)).sort()).to.deep.equal(rows.map((r) => `${r.agent_id}/${r.key}`).sort());
    } finally {
      await built.db.raw('DROP TABLE rotation_probe');
    }
  });
});
