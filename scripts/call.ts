// A minimal agent-side client for trying the API where curl is not installed (a bare Debian with Node and npm):
// `npm run --silent call -- METHOD PATH [--agent ID --key KEY] [--body JSON] [--idempotency-key K]`.
// It calls the server that `npm start` runs with the same environment (BASE_URL, else HOST and PORT) and
// prints the response body; the exit status is 1 for a non-2xx answer.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../src/config.js';

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { agent: { type: 'string' }, key: { type: 'string' }, body: { type: 'string' }, 'idempotency-key': { type: 'string' } },
  });
  const [method, path] = positionals;
  if (!method || !path?.startsWith('/')) {
    process.stderr.write('usage: npm run --silent call -- METHOD /PATH [--agent ID --key KEY] [--body JSON] [--idempotency-key K]\n');
    return 2;
  }
  const { baseUrl } = loadConfig(process.env, () => {});
  const headers: Record<string, string> = {};
  if (values.agent) headers['x-agent-id'] = values.agent;
  if (values.key) headers['x-api-key'] = values.key;
  if (values['idempotency-key']) headers['idempotency-key'] = values['idempotency-key'];
  if (values.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${baseUrl}${path}`, { method: method.toUpperCase(), headers, body: values.body });
  process.stdout.write(`${await res.text()}\n`);
  return res.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`call: ${err instanceof ConfigError || err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
