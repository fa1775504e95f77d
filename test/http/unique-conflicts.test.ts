// A value already taken under a unique index is the caller's conflict (409 naming the field), never a 500
// and never mistaken for the idempotency key's own race (issue 30 item 10): the admin routes that take such
// values, agentctl (through the server and on the database), and a sweep over every unique index of the schema.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { conflictErrorOf, IDEMPOTENCY_KEY_CONSTRAINT, isIdempotencyKeyViolation } from '../../src/db/unique-violation.js';
import { toApiError } from '../../src/http/error-mapping.js';
import { agentctl } from '../helpers/process.js';
import { startTestServer, testConfigEnv, type TestResponse, type TestServer } from '../helpers/server.js';

const ADMIN = 'test-admin-token-0123456789abcdef0123456789';

describe('unique violations', function () {
  this.timeout(120_000);
  let srv: TestServer;
  const admin = { authorization: `Bearer ${ADMIN}` };
  const post = (path: string, body: unknown, key = randomUUID()): Promise<TestResponse> => srv.request('POST', path, { headers: admin, body, idempotencyKey: key });

  before(async () => {
    srv = await startTestServer({ env: { ADMIN_TOKEN: ADMIN } });
  });
  after(async () => srv?.close());

  const expectConflict = (res: TestResponse, field: string) => {
    expect(res.status, res.text).to.equal(409);
    expect(res.body.ok).to.equal(false);
    expect(res.body.error.code).to.equal('invalid_state_transition');
    expect(res.body.error.details).to.deep.equal({ field });
    expect(res.body.error.message).to.include(field);
  };

  describe('adminCreateOwner', () => {
    it('answers 409 naming email when the e-mail is taken, exactly or upper-cased, and replays the refusal under its key', async () => {
      const email = `taken-${randomUUID()}@example.com`;
      expect((await post('/v1/admin/owners', { email })).status).to.equal(201);
      expectConflict(await post('/v1/admin/owners', { email }), 'email');
      const key = randomUUID();
      const upper = await post('/v1/admin/owners', { email: email.toUpperCase() }, key);
      expectConflict(upper, 'email');
      const replay = await post('/v1/admin/owners', { email: email.toUpperCase() }, key);
      expect(replay.status).to.equal(409);
      expect(replay.headers.get('x-idempotency-replayed')).to.equal('true');
      expect(replay.body).to.deep.equal(upper.body);
      const owners = await srv.db('owners').whereRaw('lower(email) = ?', [email]).count<{ count: string }[]>('* as count');
      expect(Number(owners[0]!.count)).to.equal(1);
    });
  });

  describe('adminAddVault', () => {
    it('answers 409 naming address when a vault has the address, in any letter case', async () => {
      const address = `0x${randomUUID().replace(/-/g, '').slice(0, 8)}${'ab'.repeat(16)}`;
      const vault = { name: 'dup', protocol: 'morpho', asset: 'USDC', apy_bps: 100 };
      expect((await post('/v1/admin/vaults', { ...vault, address })).status).to.equal(201);
      expectConflict(await post('/v1/admin/vaults', { ...vault, address }), 'address');
      expectConflict(await post('/v1/admin/vaults', { ...vault, address: address.toUpperCase().replace('0X', '0x') }), 'address');
    });
  });

  describe('adminAddMarket', () => {
    it('answers 409 naming asset when the asset has a market', async () => {
      expectConflict(await post('/v1/admin/markets', { asset: 'WETH', ltv_bps: 5000, liquidation_threshold_bps: 6000, borrow_apr_bps: 100 }), 'asset');
    });
  });

  describe('agentctl owner create', () => {
    it('refuses a taken e-mail with the 409 and the field, through the server and on the database', async () => {
      const email = `cli-${randomUUID()}@example.com`;
      expect((await post('/v1/admin/owners', { email })).status).to.equal(201);
      const base = testConfigEnv({ ADMIN_TOKEN: ADMIN });
      const remote = await agentctl({ ...base, AGENT_API_BASE_URL: srv.baseUrl }, ['owner', 'create', '--email', email.toUpperCase(), '--json']);
      expect(remote.code, remote.stderr).to.equal(1);
      expect(remote.stderr).to.include('email').and.include('409 invalid_state_transition');
      const local = await agentctl({ ...base, AGENT_API_BASE_URL: 'http://127.0.0.1:9' }, ['owner', 'create', '--email', email, '--json']);
      expect(local.code, local.stderr).to.equal(1);
      expect(local.stderr).to.include('An owner with this email already exists').and.include('409 invalid_state_transition');
      expect(local.stderr).to.not.include('duplicate key');
    });
  });

  describe('every unique index', () => {
    it('maps each violation to 409 naming its field, but the idempotency key, which stays the idempotency layer’s', async () => {
      // Each unique index of the schema, with its key as Postgres prints it in a violation's detail.
      const { rows } = await srv.db.raw<{ rows: Array<{ table: string; constraint: string; key: string }> }>(`
        SELECT t.relname AS table, c.relname AS constraint,
               (SELECT string_agg(pg_get_indexdef(i.indexrelid, k, true), ', ' ORDER BY k) FROM generate_series(1, i.indnkeyatts) AS k) AS key
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE i.indisunique AND n.nspname = current_schema() AND t.relname NOT LIKE 'knex_migrations%'`);
      expect(rows.length).to.be.at.least(40);
      expect(rows.map((r) => r.constraint)).to.include.members([IDEMPOTENCY_KEY_CONSTRAINT, 'owners_email_live', 'earn_vaults_address_unique', 'borrow_markets_asset_symbol_unique']);
      const wrong: string[] = [];
      for (const r of rows) {
        const err = Object.assign(new Error(`duplicate key value violates unique constraint "${r.constraint}"`), {
          code: '23505',
          constraint: r.constraint,
          table: r.table,
          detail: `Key (${r.key})=(x) already exists.`,
        });
        if (r.constraint === IDEMPOTENCY_KEY_CONSTRAINT) {
          if (!isIdempotencyKeyViolation(err) || conflictErrorOf(err) !== null) wrong.push(`${r.constraint}: not the idempotency layer's`);
          continue;
        }
        const mapped = toApiError(err);
        const field = (mapped?.details as { field?: string } | undefined)?.field ?? '';
        if (mapped?.status !== 409 || !/^[a-z_]+(, [a-z_]+)*$/.test(field)) wrong.push(`${r.table}.${r.constraint} (${r.key}) -> ${mapped?.status ?? 500} ${field}`);
      }
      expect(wrong, wrong.join('\n')).to.deep.equal([]);
    });

    it('maps a real violation raised by Postgres through knex (wrapped or not)', async () => {
      const email = `raw-${randomUUID()}@example.com`;
      await srv.db('owners').insert({ id: randomUUID(), email });
      const err = await srv
        .db('owners')
        .insert({ id: randomUUID(), email: email.toUpperCase() })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(conflictErrorOf(err)?.details).to.deep.equal({ field: 'email' });
      expect(conflictErrorOf(new Error('wrapped', { cause: err }))?.status).to.equal(409);
    });
  });
});
