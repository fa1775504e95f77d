// Integrators generate clients from the served document (issue 13): three generators at their default settings
// compile it, a payment with only its required fields type-checks, and both amount and amount_usd is a type error.
import { expect } from 'chai';
import { checkGenerators } from '../../scripts/check-generators.js';

describe('client generators on the served document', function () {
  // Three generators and three tsc runs, offline from node_modules (~25 s on an idle machine).
  this.timeout(300_000);

  it('openapi-typescript + openapi-fetch, @hey-api/openapi-ts and orval compile it and keep exactly one of amount / amount_usd', async () => {
    const results = await checkGenerators();
    expect(results.map((r) => r.generator)).to.deep.equal(['openapi-typescript + openapi-fetch', '@hey-api/openapi-ts', 'orval (client fetch)']);
    for (const r of results) expect(r.ok, `${r.generator}:\n${r.output}`).to.equal(true);
  });
});
