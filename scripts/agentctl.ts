// agentctl: the operator's and owners' command line. Prints one JSON object; errors exit non-zero.
// With a server answering at AGENT_API_BASE_URL every command goes through the owner and admin APIs
// (admin token); only when none answers does it open the database itself.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../src/config.js';
import { ApiCallError, connectToServer } from '../src/cli/client.js';
import { conflictErrorOf } from '../src/db/unique-violation.js';
import { isApiError } from '../src/lib/errors.js';
import { commands } from '../src/cli/index.js';
import { ownerKeyFromArgs, withOwnerSignature } from '../src/cli/owner-keys.js';
import { CliUsageError, type CliArgs } from '../src/cli/types.js';

/** Flags that never take a value; every other `--flag` takes the next word (`--email E`) or `--flag=value`. */
const BOOLEAN_FLAGS = new Set(['json', 'help', 'all', 'off']);

/**
 * node:util parseArgs with `strict: false` and no option list reads `--email E` as a boolean
 * flag plus a positional `E`, so the documented `--flag VALUE` form needs the flags declared.
 */
function splitArgs(argv: string[]): { positionals: string[]; values: Record<string, string | boolean> } {
  const names = new Set(argv.filter((a) => a.startsWith('--') && !a.includes('=')).map((a) => a.slice(2)));
  const options = Object.fromEntries([...names].map((n) => [n, { type: BOOLEAN_FLAGS.has(n) ? ('boolean' as const) : ('string' as const) }]));
  const { positionals, values } = parseArgs({ args: argv, options, strict: false, allowPositionals: true });
  return { positionals, values: values as Record<string, string | boolean> };
}

function parse(argv: string[]): { name: string; args: CliArgs } {
  const { positionals, values } = splitArgs(argv);
  const words = positionals.map(String);
  const command = commands.filter((c) => c.name.split(' ').every((w, i) => words[i] === w)).sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)[0];
  if (!command) throw new CliUsageError(`unknown command "${words.join(' ')}"\n\ncommands:\n${commands.map((c) => `  ${c.usage}`).join('\n')}`);
  const flags: Record<string, string | boolean> = {};
  for (const [k, v] of Object.entries(values)) if (k !== 'json') flags[k] = v as string | boolean;
  return { name: command.name, args: { positional: words.slice(command.name.split(' ').length), flags } };
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv.includes('--help')) {
    process.stdout.write(`usage: agentctl <command> [--json]\n\n${commands.map((c) => `  ${c.usage}`).join('\n')}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  const { name, args } = parse(argv);
  const config = loadConfig(process.env, () => {});
  const command = commands.find((c) => c.name === name)!;
  const server = command.http ? await connectToServer(config) : null;
  // --owner-key-file: an owner change is proposed unsigned, signed here, and sent again with the signature.
  const ownerKey = ownerKeyFromArgs(args);
  if (server && command.http) {
    const call = await command.http(args, config);
    const result = await withOwnerSignature(ownerKey, (signature) =>
      server.call(signature ? { ...call, body: { ...((call.body as Record<string, unknown> | undefined) ?? {}), owner_signature: signature } } : call),
    );
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  }
  // On the database: the whole core, loaded only now (a command sent to a server never needs it).
  const { buildCore } = await import('../src/app.js');
  const core = await buildCore(config);
  try {
    const result = await withOwnerSignature(ownerKey, (signature) => command.run({ db: core.db, services: core.services, config, clock: core.clock, ownerSignature: signature }, args));
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } finally {
    await core.close();
  }
}

main().then(
  (code) => process.exit(code),
  (thrown: unknown) => {
    // A value taken under a unique index (an owner's e-mail) reads as the server would answer it, not as SQL.
    const err = conflictErrorOf(thrown) ?? thrown;
    const message = err instanceof ConfigError || err instanceof CliUsageError || err instanceof Error ? err.message : String(err);
    const answer = isApiError(err) ? ` (${err.status} ${err.code})` : err instanceof ApiCallError ? ` (${err.status} ${err.code})` : '';
    process.stderr.write(`agentctl: ${message}${answer}\n`);
    process.exit(err instanceof CliUsageError ? 2 : 1);
  },
);
