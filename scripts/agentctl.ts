// agentctl: the owner's side (the app is out of scope). Prints one JSON object; errors exit non-zero.
import { parseArgs } from 'node:util';
import { buildCore } from '../src/app.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { commands } from '../src/cli/index.js';
import { CliUsageError, type CliArgs } from '../src/cli/types.js';

function parse(argv: string[]): { name: string; args: CliArgs } {
  const { positionals, values } = parseArgs({ args: argv, strict: false, allowPositionals: true });
  const words = positionals.map(String);
  const command = commands
    .filter((c) => c.name.split(' ').every((w, i) => words[i] === w))
    .sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)[0];
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
  const core = await buildCore(config);
  try {
    const command = commands.find((c) => c.name === name)!;
    const result = await command.run({ db: core.db, services: core.services, config, clock: core.clock }, args);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } finally {
    await core.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    const message = err instanceof ConfigError || err instanceof CliUsageError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`agentctl: ${message}\n`);
    process.exit(err instanceof CliUsageError ? 2 : 1);
  },
);
