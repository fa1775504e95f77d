// The sealed-column registry is complete: every `sealed_*` column of the migrated schema is listed, and nothing else.
import { expect } from 'chai';
import { createKnex } from '../../src/db/knex.js';
import { SEALED_COLUMNS } from '../../src/db/sealed-columns.js';
import { testEnv } from '../setup.js';

describe('SEALED_COLUMNS', () => {
  it('lists exactly the sealed_* columns of the schema, each with existing key columns', async () => {
    const db = await createKnex({ databaseUrl: testEnv.databaseUrl, dataDir: '' });
    try {
      const columns: { table_name: string; column_name: string }[] = await db('information_schema.columns').where({ table_schema: 'public' }).select('table_name', 'column_name');
      const sealed = columns.filter((c) => c.column_name.startsWith('sealed_')).map((c) => `${c.table_name}.${c.column_name}`);
      expect(SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`).sort()).to.deep.equal(sealed.sort());
      const all = new Set(columns.map((c) => `${c.table_name}.${c.column_name}`));
      for (const c of SEALED_COLUMNS) for (const k of c.key) expect(all.has(`${c.table}.${k}`), `${c.table}.${k}`).to.equal(true);
    } finally {
      await db.destroy();
    }
  });
});
