// Named (prepared) statements of the hot reads (src/db/knex.ts `prepared`): they are named, they survive a
// migration that changes the table under them, and a query without bindings stays a plain one.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createKnex, prepared, type Knex } from '../../src/db/knex.js';
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
});
