// Named (prepared) statements of the hot reads (src/db/knex.ts `prepared`): they are named, they survive a
// migration that changes the table under them, and a query without bindings stays a plain one.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createKnex, literalSql, prepared, statementsIn, type Knex, type SqlStatement } from '../../src/db/knex.js';
import { testEnv } from '../setup.js';

describe('prepared statements', () => {
  let db: Knex;
  const table = `prepared_test_${randomBytes(4).toString('hex')}`;
  before(async () => {
    // One connection: every query below runs on the connection that prepared the statement.
    db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '', poolMax: 1 });
    await db.raw(`CREATE TABLE ${table} (a int PRIMARY KEY)`);
    await db.raw(`INSERT INTO ${table} (a) VALUES (1), (2)`);
  });
  after(async () => {
    await db.raw(`DROP TABLE IF EXISTS ${table}`);
    await db.destroy();
  });

  it('runs a prepared query as a statement named by its SQL, the same name each time', async () => {
    const client = (await db.client.acquireConnection()) as { connection: { parsedStatements: Record<string, string> } };
    await db.client.releaseConnection(client);
    const statements = () => client.connection.parsedStatements;
    const first = await prepared(db.raw(`SELECT * FROM ${table} WHERE a = ?`, [1]));
    const second = await prepared(db.raw(`SELECT * FROM ${table} WHERE a = ?`, [2]));
    expect(first.rows).to.deep.equal([{ a: 1 }]);
    expect(second.rows).to.deep.equal([{ a: 2 }]);
    const names = Object.keys(statements());
    expect(names).to.have.length(1);
    expect(statements()[names[0]!]).to.contain(`FROM ${table} WHERE a = $1`);
    expect((await prepared(db(table).where({ a: 2 }).first())) as unknown).to.deep.equal({ a: 2 });
    expect(Object.keys(statements())).to.have.length(2);
  });

  it('answers after a migration changed the result type under the statement', async () => {
    await prepared(db.raw(`SELECT * FROM ${table} WHERE a = ?`, [1]));
    await db.raw(`ALTER TABLE ${table} ADD COLUMN b text NOT NULL DEFAULT 'x'`);
    const after = await prepared(db.raw(`SELECT * FROM ${table} WHERE a = ?`, [1]));
    expect(after.rows).to.deep.equal([{ a: 1, b: 'x' }]);
    // The connection that held the stale statement was retired; the next one prepares afresh.
    const again = await prepared(db.raw(`SELECT * FROM ${table} WHERE a = ?`, [2]));
    expect(again.rows).to.deep.equal([{ a: 2, b: 'x' }]);
  });

  it('leaves a query without bindings unnamed (several statements stay possible)', async () => {
    const result = await prepared(db.raw(`SELECT 1 AS one; SELECT 2 AS two`));
    expect(result).to.have.length(2);
  });

  describe('statementsIn', () => {
    const byA: SqlStatement = { name: `agentapi_test_${randomBytes(4).toString('hex')}`, params: ['int', 'text'], text: `SELECT a, $2::text AS label FROM ${table} WHERE a = $1::int` };
    const prepares = (statements: string[]) => statements.filter((q) => q.trim().startsWith('PREPARE')).length;
    const sent = async <T>(fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> => {
      const statements: string[] = [];
      const listener = (q: { sql: string }) => statements.push(q.sql);
      db.on('query', listener);
      try {
        return { result: await fn(), statements };
      } finally {
        db.off('query', listener);
      }
    };

    it('runs a statement of a transaction as EXECUTE with literals, PREPAREd once per connection', async () => {
      const run = () => db.transaction(async (trx) => {
        const [sql] = await statementsIn(trx, [{ statement: byA, values: ['1', "it's"] }]);
        expect(sql).to.equal(`EXECUTE ${byA.name}('1', 'it''s')`);
        return (await trx.raw(`${sql}; SELECT 2 AS two`)) as unknown as { rows: unknown[] }[];
      });
      const first = await sent(run);
      expect(first.result[0]!.rows).to.deep.equal([{ a: 1, label: "it's" }]);
      expect(prepares(first.statements)).to.equal(1);
      const second = await sent(run);
      expect(second.result[0]!.rows).to.deep.equal([{ a: 1, label: "it's" }]);
      expect(prepares(second.statements)).to.equal(0);
    });

    it('gives the statement with its values as literals outside a transaction, meaning the same', async () => {
      const [sql] = await statementsIn(db, [{ statement: byA, values: ['2', "x'); DROP TABLE t; --"] }]);
      expect(sql).to.equal(literalSql({ statement: byA, values: ['2', "x'); DROP TABLE t; --"] }));
      expect((await db.raw(sql!)).rows).to.deep.equal([{ a: 2, label: "x'); DROP TABLE t; --" }]);
    });

    it('retires a connection whose prepared statements are gone, and prepares again on the next', async () => {
      await db.transaction(async (trx) => statementsIn(trx, [{ statement: byA, values: ['1', 'a'] }]));
      const failed = await db
        .transaction(async (trx) => {
          const [sql] = await statementsIn(trx, [{ statement: byA, values: ['1', 'a'] }]);
          await trx.raw('DEALLOCATE ALL');
          await trx.raw(sql!);
        })
        .then(() => null, (err: { code?: string }) => err.code);
      expect(failed).to.equal('26000');
      const again = await sent(() => db.transaction(async (trx) => trx.raw((await statementsIn(trx, [{ statement: byA, values: ['2', 'b'] }]))[0]!)));
      expect((again.result as unknown as { rows: unknown[] }).rows).to.deep.equal([{ a: 2, label: 'b' }]);
      expect(prepares(again.statements)).to.equal(1);
    });
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
