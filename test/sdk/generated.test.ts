// sdk/src/generated/ is what sdk/scripts/generate.ts makes of the bundled document today (no drift), and the
// method names it derives cover every /v1/agent operation once.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GROUPS, OPERATIONS, ERROR_CODES } from '../../sdk/src/generated/operations.js';
import { ERROR_CODES as SERVER_ERROR_CODES } from '../../generated/vocabulary.js';
import { repoRoot, runToExit } from '../helpers/process.js';

describe('SDK generated code', function () {
  this.timeout(60_000);

  it('matches the bundled document (run `npm run gen` when this fails)', async () => {
    const r = await runToExit(process.execPath, ['--import', 'tsx', 'sdk/scripts/generate.ts', '--check'], process.env);
    expect(r.code, r.stderr).to.equal(0);
  });

  it('has one method per /v1/agent operation and the document error codes', () => {
    const doc = JSON.parse(readFileSync(join(repoRoot, 'generated/openapi.json'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
    const keys = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/v1/agent/'))
      .flatMap(([p, item]) => ['get', 'put', 'post', 'patch', 'delete'].filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${p}`));
    expect(Object.keys(OPERATIONS).sort()).to.deep.equal(keys.sort());
    const methods = Object.values(GROUPS).flatMap((g) => Object.values(g) as string[]);
    expect(methods.sort()).to.deep.equal(keys.sort());
    expect(GROUPS.payments).to.include({ create: 'POST /v1/agent/payments', list: 'GET /v1/agent/payments', get: 'GET /v1/agent/payments/{id}' });
    expect(GROUPS.operations).to.deep.equal({ list: 'GET /v1/agent/operations', get: 'GET /v1/agent/operations/{id}' });
    expect([...ERROR_CODES]).to.deep.equal([...SERVER_ERROR_CODES]);
  });

  it('types only the agent document: no owner or operator path or schema', () => {
    const types = readFileSync(join(repoRoot, 'sdk/src/generated/api.ts'), 'utf8');
    expect(types).to.match(/^ {4}"\/v1\/agent\/payments": \{/m);
    expect(types.match(/^ {4}"\/v1\/(owner|admin)\/[^"]*"/gm) ?? []).to.deep.equal([]);
    expect(types).to.not.match(/ownerListAgents|adminCreateOwner|OwnerAgent\b/);
  });
});
