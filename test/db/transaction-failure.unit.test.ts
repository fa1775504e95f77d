// A transaction that ended under its caller (its connection was lost, so knex rolled it back) answers with what
// ended it, not with knex's "Transaction query already complete" from the caller's next query: the first is an outage
// (503 service_unavailable), the second would be a 500 (found by the soak's Postgres cut, issue 30).
import { expect } from 'chai';
import { isDatabaseUnavailable, transactionFailure } from '../../src/db/unavailable.js';

describe('transactionFailure', () => {
  const lost = Object.assign(new Error('Connection terminated unexpectedly'), {});
  const complete = new Error('Transaction query already complete, run with DEBUG=knex:tx for more info');

  it('answers the error that ended the transaction when the caller hit "already complete"', async () => {
    const trx = { executionPromise: Promise.reject(lost) };
    trx.executionPromise.catch(() => undefined);
    const answered = await transactionFailure(trx, complete);
    expect(answered).to.equal(lost);
    expect(isDatabaseUnavailable(answered)).to.equal(true);
    expect(isDatabaseUnavailable(complete)).to.equal(false);
  });

  it('keeps any other error, and "already complete" of a transaction that committed', async () => {
    const other = new Error('duplicate key');
    expect(await transactionFailure({ executionPromise: Promise.reject(lost).catch(() => undefined) }, other)).to.equal(other);
    expect(await transactionFailure({ executionPromise: Promise.resolve() }, complete)).to.equal(complete);
  });
});
