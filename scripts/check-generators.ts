// Generates clients from the served agent's document (GET /v1/agent/openapi.json) with three generators at their default settings, as an integrator
// would, and type-checks a small use of each: a payment with only its required fields compiles, and a body with both
// `amount` and `amount_usd` (or neither) is a type error (`// @ts-expect-error`, which fails when the rule is lost).
// Offline: every tool comes from node_modules. `npm run check:generators` / `make generators`; test/contract runs it.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { OpenApiDocument } from '../src/lib/contract.js';
import { surfaceDocument } from '../src/lib/document-surface.js';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The document GET /v1/agent/openapi.json serves: the agent's surface of generated/openapi.json. */
function agentDocument(): string {
  return JSON.stringify(surfaceDocument(JSON.parse(readFileSync(join(ROOT, 'generated/openapi.json'), 'utf8')) as OpenApiDocument, '/v1/agent'), null, 2);
}

export interface GeneratorResult {
  generator: string;
  ok: boolean;
  output: string;
}

/** The JavaScript file of a package's command, run with this Node (the machine's `node` may be older). */
function binOf(pkg: string, name: string): string {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { bin: string | Record<string, string> };
  const rel = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name];
  if (!rel) throw new Error(`${pkg} has no command ${name}`);
  return join(ROOT, 'node_modules', pkg, rel);
}

async function exec(cwd: string, pkg: string, name: string, args: string[]): Promise<string> {
  const { stdout, stderr } = await run(process.execPath, [binOf(pkg, name), ...args], { cwd, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
  return `${stdout}${stderr}`;
}

const PAYER = `to: '0x1111111111111111111111111111111111111111', asset: 'USDC'`;

/** Each generator: how to run it (defaults only) and a use of its output that must compile. */
const GENERATORS: { name: string; generate: (dir: string) => Promise<string>; use: string }[] = [
  {
    name: 'openapi-typescript + openapi-fetch',
    generate: (dir) => exec(dir, 'openapi-typescript', 'openapi-typescript', ['openapi.json', '-o', 'openapi-typescript/schema.d.ts']),
    use: `import createClient from 'openapi-fetch';
import type { paths } from './openapi-typescript/schema.js';

const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:3000', headers: { 'X-Agent-Id': 'agent', 'X-Api-Key': 'key' } });
const header = { 'Idempotency-Key': 'pay-42' };

export async function pay(): Promise<string | undefined> {
  const { data } = await client.POST('/v1/agent/payments', { params: { header }, body: { ${PAYER}, amount: '12.5' } });
  await client.POST('/v1/agent/payments', { params: { header }, body: { ${PAYER}, amount_usd: '12.50' } });
  // @ts-expect-error exactly one of amount and amount_usd
  await client.POST('/v1/agent/payments', { params: { header }, body: { ${PAYER}, amount: '1', amount_usd: '1' } });
  // @ts-expect-error exactly one of amount and amount_usd
  await client.POST('/v1/agent/payments', { params: { header }, body: { ${PAYER} } });
  // @ts-expect-error the agent's document has no owner routes
  await client.GET('/v1/owner/agents');
  return data?.operation_id;
}
`,
  },
  {
    name: '@hey-api/openapi-ts',
    generate: (dir) => exec(dir, '@hey-api/openapi-ts', 'openapi-ts', ['-i', 'openapi.json', '-o', 'hey-api']),
    use: `import * as sdk from './hey-api/index.js';
import { createPayment } from './hey-api/index.js';

// @ts-expect-error the agent's document has no owner methods
export const owner = sdk.ownerListAgents;
// @ts-expect-error the agent's document has no operator methods
export const admin = sdk.adminCreateOwner;

const headers = { 'Idempotency-Key': 'pay-42' };

export async function pay(): Promise<string | undefined> {
  const { data } = await createPayment({ headers, body: { ${PAYER}, amount: '12.5' } });
  await createPayment({ headers, body: { ${PAYER}, amount_usd: '12.50' } });
  // @ts-expect-error exactly one of amount and amount_usd
  await createPayment({ headers, body: { ${PAYER}, amount: '1', amount_usd: '1' } });
  // @ts-expect-error exactly one of amount and amount_usd
  await createPayment({ headers, body: { ${PAYER} } });
  return data?.operation_id;
}
`,
  },
  {
    // orval's default client is axios (a devDependency here so its output compiles as an integrator's would).
    name: 'orval',
    generate: (dir) => exec(dir, 'orval', 'orval', ['-i', 'openapi.json', '-o', 'orval/api.ts']),
    use: `import * as api from './orval/api.js';
import { createPayment } from './orval/api.js';

// @ts-expect-error the agent's document has no owner methods
export const owner = api.ownerListAgents;
// @ts-expect-error the agent's document has no operator methods
export const admin = api.adminCreateOwner;

export async function pay(): Promise<number> {
  const res = await createPayment({ ${PAYER}, amount: '12.5' }, { headers: { 'Idempotency-Key': 'pay-42' } });
  await createPayment({ ${PAYER}, amount_usd: '12.50' });
  // @ts-expect-error exactly one of amount and amount_usd
  await createPayment({ ${PAYER}, amount: '1', amount_usd: '1' });
  // @ts-expect-error exactly one of amount and amount_usd
  await createPayment({ ${PAYER} });
  return res.status;
}
`,
  },
];

/** Strict TypeScript as a new project has it, with the DOM's fetch types and no ambient @types. */
const tsconfig = (file: string) => ({
  compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'ESNext', moduleResolution: 'Bundler', lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: [], skipLibCheck: true },
  files: [file],
});

export async function checkGenerators(opts: { keep?: boolean; document?: string } = {}): Promise<GeneratorResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-api-generators-'));
  try {
    if (opts.document) copyFileSync(opts.document, join(dir, 'openapi.json'));
    else writeFileSync(join(dir, 'openapi.json'), agentDocument());
    // The temp dir has no redocly.yaml (openapi-typescript would lint with ours); packages resolve through this link.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const results: GeneratorResult[] = [];
    for (const [i, g] of GENERATORS.entries()) {
      let output = '';
      try {
        output += await g.generate(dir);
        writeFileSync(join(dir, `use-${i}.ts`), g.use);
        writeFileSync(join(dir, `tsconfig.${i}.json`), JSON.stringify(tsconfig(`use-${i}.ts`), null, 2));
        output += await exec(dir, 'typescript', 'tsc', ['-p', `tsconfig.${i}.json`]);
        results.push({ generator: g.name, ok: true, output });
      } catch (e) {
        const err = e as { stdout?: string; stderr?: string; message?: string };
        results.push({ generator: g.name, ok: false, output: `${output}${err.stdout ?? ''}${err.stderr ?? ''}` || String(err.message) });
      }
    }
    return results;
  } finally {
    if (opts.keep) process.stderr.write(`kept ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const document = process.argv.slice(2).find((a) => !a.startsWith('--'));
  const results = await checkGenerators({ keep: process.argv.includes('--keep'), ...(document ? { document: resolve(document) } : {}) });
  for (const r of results) process.stdout.write(`${r.ok ? 'ok  ' : 'FAIL'} ${r.generator}${r.ok ? '' : `\n${r.output}`}\n`);
  process.exit(results.every((r) => r.ok) ? 0 : 1);
}
