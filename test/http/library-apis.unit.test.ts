// Libraries through their public APIs only (issue 25): the lint rules of eslint.config.js refuse an import of a
// library's private path and a function assigned over a library object's method. Each is shown failing on purpose
// (snippets shaped like the code they replaced: a replaced Express `app.handle`, reassigned openapi-backend router
// methods, knex's pg dialect loaded by path), and the HTTP layer passes them.
import { expect } from 'chai';
import { ESLint } from 'eslint';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const RULES = new Set(['no-restricted-imports', 'no-restricted-syntax', 'house/no-library-method-assignment']);

describe('libraries through their public APIs (eslint.config.js)', function () {
  this.timeout(60_000);
  const eslint = new ESLint({ cwd: root });

  /** The messages of the three rules for `code` linted as if it were `src/http/<name>`. */
  async function problems(code: string, name = 'fixture.ts'): Promise<{ rule: string; line: number }[]> {
    const [result] = await eslint.lintText(code, { filePath: `${root}src/http/${name}` });
    return result!.messages.filter((m) => RULES.has(m.ruleId ?? '')).map((m) => ({ rule: m.ruleId!, line: m.line }));
  }

  it("refuses an import of a library's private path, by import, require or import()", async () => {
    const code = [
      "import { createRequire } from 'node:module';",
      "import type { OpenAPIRouter } from 'openapi-backend/router';",
      "import Router from 'express/lib/router/index.js';",
      "const PgDialect = createRequire(import.meta.url)('knex/lib/dialects/postgres/index.js');",
      "const lazy = import('express/lib/response.js');",
      "import { OpenAPIBackend } from 'openapi-backend';",
      "import express from 'express';",
      'export { PgDialect, lazy, Router, OpenAPIBackend, express };',
      'export type { OpenAPIRouter };',
    ].join('\n');
    expect(await problems(code)).to.deep.equal([
      { rule: 'no-restricted-imports', line: 2 },
      { rule: 'no-restricted-imports', line: 3 },
      { rule: 'no-restricted-syntax', line: 4 },
      { rule: 'no-restricted-syntax', line: 5 },
    ]);
  });

  it("refuses a function assigned over a library object's method, through casts, consts, subclasses and typed parameters", async () => {
    const code = [
      "import type { Express } from 'express';",
      "import { OpenAPIBackend } from 'openapi-backend';",
      "import knex from 'knex';",
      'export function serveFirst(app: Express): void {',
      '  const handle = (app as unknown as { handle(): void }).handle.bind(app);',
      '  (app as unknown as { handle(): void }).handle = function agentApiFirst() { handle(); };',
      '}',
      'class OpenAPI31Backend extends OpenAPIBackend {}',
      'export async function route(): Promise<void> {',
      "  const api = new OpenAPI31Backend({ definition: 'openapi.json' });",
      '  const router = api.router as unknown as { matchOperation(): unknown; getOperations(): unknown[] };',
      '  router.matchOperation = () => undefined;',
      '  router.getOperations = router.getOperations.bind(router);',
      '  const db = knex({});',
      '  db.client._query = async () => undefined;',
      '}',
    ].join('\n');
    expect(await problems(code)).to.deep.equal([
      { rule: 'house/no-library-method-assignment', line: 6 },
      { rule: 'house/no-library-method-assignment', line: 12 },
      { rule: 'house/no-library-method-assignment', line: 13 },
      { rule: 'house/no-library-method-assignment', line: 15 },
    ]);
  });

  it('leaves our own objects, data properties and library calls alone', async () => {
    const code = [
      "import type { Response } from 'express';",
      "import { createServer } from 'node:http';",
      'export function ours(res: Response): void {',
      '  const steps = { run: () => 1 };',
      '  steps.run = () => 2;',
      "  res.locals.requestId = 'r1';",
      '  res.statusCode = 200;',
      "  createServer().on('request', () => undefined);",
      '}',
    ].join('\n');
    expect(await problems(code)).to.deep.equal([]);
  });

  it('finds nothing to refuse in src/http, src/mcp, the simulate handler and the composition root', async () => {
    const results = await eslint.lintFiles(['src/http/**/*.ts', 'src/mcp/**/*.ts', 'src/handlers/simulate.ts', 'src/app.ts']);
    const found = results.flatMap((r) => r.messages.filter((m) => RULES.has(m.ruleId ?? '')).map((m) => `${r.filePath}:${m.line} ${m.ruleId}`));
    expect(found).to.deep.equal([]);
    expect(results.length).to.be.greaterThan(20);
  });
});
