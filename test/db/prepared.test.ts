// The one idiom for hand-written SQL (src/db/sql.ts, run by src/db/knex.ts): values are bound, never spliced (hostile
// quotes round-trip); a named statement is prepared once per connection; it survives a migration that changes the
// table under it and a DEALLOCATE ALL; a batch leaves in one round trip, in order; the last statement of a
// transaction goes with its COMMIT.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { batch, createKnex, rows, withTransaction, type Knex } from '../../src/db/knex.js';
import { fromNative, identifier, prepared, sql } from '../../src/db/sql.js';
import { statementsOf } from '../support/statements.js';
import { testEnv } from '../setup.js';

describe('hand-written SQL (sql, rows, batch)', () => {
  let db: Knex;
  const table = `prepared_test_${randomBytes(4).toString('hex')}`;
  /** The names pg has prepared on the pool's one connection. */
  let parsed: () => string[];
  before(async () => {
    // One connection: every query below runs on the connection that prepared the statement.
    db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '', poolMax: 1 });
    await db.raw(`CREATE TABLE ${table} (a int PRIMARY KEY, label text)`);
    await db.raw(`INSERT INTO ${table} (a) VALUES (1), (2)`);
    const client = (await db.client.acquireConnection()) as { connection: { parsedStatements: Record<string, string> } };
    await db.client.releaseConnection(client);
    parsed = () => Object.keys(client.connection.parsedStatements);
  });
  after(async () => {
    await db.raw(`DROP TABLE IF EXISTS ${table}`);
    await db.destroy();
  });

  const t = () => identifier(table);
  const byA = (a: number) => prepared(sql<{ a: number }>`SELECT a FROM ${t()} WHERE a = ${a}`);

  it('binds values: hostile quotes come back as they went in, nothing is spliced into the text', async () => {
    const hostile = `x'); DROP TABLE ${table}; --`;
    const statement = sql<{ label: string }>`SELECT ${hostile}::text AS label, ${"it's"}::text AS other`;
    expect(statement.text).to.equal('SELECT $1::text AS label, $2::text AS other');
    expect(await rows(db, statement)).to.deep.equal([{ label: hostile, other: "it's" }]);
    expect((await db.raw(`SELECT count(*)::int AS n FROM ${table}`)).rows).to.deep.equal([{ n: 2 }]);
  });

  it('renumbers the parameters of a nested fragment, and keeps a literal ? of the text', async () => {
    const inner = sql`${'b'} || ${'c'}`;
    const statement = sql<{ s: string; has: boolean }>`SELECT ${'a'} || ${inner} AS s, '{"k":1}'::jsonb ? 'k' AS has`;
    expect(statement.text).to.equal(`SELECT $1 || $2 || $3 AS s, '{"k":1}'::jsonb ? 'k' AS has`);
    expect(await rows(db, statement)).to.deep.equal([{ s: 'abc', has: true }]);
  });

  it('prepares a named statement once per connection, under the same name each time', async () => {
    const before = parsed().length;
    expect(await rows(db, byA(1))).to.deep.equal([{ a: 1 }]);
    expect(await rows(db, byA(2))).to.deep.equal([{ a: 2 }]);
    expect(parsed()).to.have.length(before + 1);
    expect(parsed()).to.include(byA(1).name);
    // A knex builder query, compiled, runs the same way.
    const native = db(table).where({ a: 2 }).select('a').toSQL().toNative();
    expect(await rows(db, prepared(fromNative(native)))).to.deep.equal([{ a: 2 }]);
    expect(parsed()).to.have.length(before + 2);
  });

  it('answers after a migration changed the result type under the statement, and prepares afresh', async () => {
    const star = () => prepared(sql`SELECT * FROM ${t()} WHERE a = ${1}`);
    await rows(db, star());
    await db.raw(`ALTER TABLE ${table} ADD COLUMN b text NOT NULL DEFAULT 'x'`);
    expect(await rows(db, star())).to.deep.equal([{ a: 1, label: null, b: 'x' }]);
    expect(await rows(db, star())).to.deep.equal([{ a: 1, label: null, b: 'x' }]);
  });

  it('recovers after DEALLOCATE ALL: the failed transaction is the caller’s, the next run prepares again', async () => {
    await rows(db, byA(1));
    const failed = await db
      .transaction(async (trx) => {
        await trx.raw('DEALLOCATE ALL');
        await rows(trx, byA(1));
      })
      .then(
        () => null,
        (err: { code?: string }) => err.code,
      );
    expect(failed).to.equal('26000');
    expect(await db.transaction((trx) => rows(trx, byA(2)))).to.deep.equal([{ a: 2 }]);
    // Outside a transaction the failed call itself runs once more.
    await db.raw('DEALLOCATE ALL');
    expect(await rows(db, byA(1))).to.deep.equal([{ a: 1 }]);
  });

  it('sends a batch in one round trip, in order, each statement with its own snapshot', async () => {
    const { result, roundTrips } = await statementsOf(() =>
      db.transaction((trx) =>
        batch(trx, [
          sql`UPDATE ${t()} SET label = ${'first'} WHERE a = ${1}`,
          prepared(sql<{ label: string }>`SELECT label FROM ${t()} WHERE a = ${1}`),
          sql<{ n: number }>`SELECT ${7}::int AS n`,
        ] as const),
      ),
    );
    expect(result[1]).to.deep.equal([{ label: 'first' }]);
    expect(result[2]).to.deep.equal([{ n: 7 }]);
    // BEGIN, the batch, COMMIT.
    expect(roundTrips, roundTrips.join('\n---\n')).to.have.length(3);
  });

  it('sends the last statement of a transaction with its COMMIT, and rolls back when it fails', async () => {
    const { roundTrips } = await statementsOf(() =>
      withTransaction(
        db,
        (trx) => rows(trx, sql`UPDATE ${t()} SET label = ${'second'} WHERE a = ${2}`),
        () => sql`UPDATE ${t()} SET label = ${'last'} WHERE a = ${1}`,
      ),
    );
    expect(roundTrips, roundTrips.join('\n---\n')).to.have.length(3);
    expect(roundTrips[2]).to.match(/UPDATE .*;\s*COMMIT/s);
    expect((await db.raw(`SELECT a, label FROM ${table} ORDER BY a`)).rows.map((r: { label: string }) => r.label)).to.deep.equal(['last', 'second']);
    const failed = await withTransaction(
      db,
      (trx) => rows(trx, sql`UPDATE ${t()} SET label = ${'lost'} WHERE a = ${2}`),
      () => sql`SELECT 1 / ${0}::int`,
    ).then(
      () => null,
      (err: { code?: string }) => err.code,
    );
    expect(failed).to.equal('22012');
    expect((await db.raw(`SELECT label FROM ${table} WHERE a = 2`)).rows).to.deep.equal([{ label: 'second' }]);
  });

  it('connects with JIT off, keeping the server settings the URL gives', async () => {
    expect((await db.raw('SHOW jit')).rows).to.deep.equal([{ jit: 'off' }]);
    const url = new URL(testEnv.databaseUrl);
    url.searchParams.set('options', '-c work_mem=7MB');
    const other = await createKnex({ databaseUrl: url.toString(), dataDir: '', poolMax: 1 });
    try {
      expect((await other.raw('SHOW work_mem')).rows).to.deep.equal([{ work_mem: '7MB' }]);
      expect((await other.raw('SHOW jit')).rows).to.deep.equal([{ jit: 'off' }]);
    } finally {
      await other.destroy();
    }
  });
});
