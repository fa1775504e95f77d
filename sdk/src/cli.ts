#!/usr/bin/env node
// agent-api: one subcommand per /v1/agent operation, generated from the document (src/generated/cli-spec.ts).
// JSON on stdout; errors on stderr. Exit codes: 0 ok, 1 unexpected, 2 usage, 3 API error, 4 network, 5 --wait deadline.
import { readFileSync } from 'node:fs';
import { AgentClient, type ClientOptions, type Credentials } from './client.js';
import { AgentApiError, AgentNetworkError, WaitTimeoutError } from './errors.js';
import { createIdempotencyKey } from './idempotency.js';
import { COMMANDS, type CommandSpec, type FlagSpec } from './generated/cli-spec.js';
import type { RequestOptions, RouteKey } from './types.js';

export const EXIT = { ok: 0, unexpected: 1, usage: 2, api: 3, network: 4, waitTimeout: 5 } as const;

const GLOBAL_FLAGS: readonly [string, string, string][] = [
  ['--base-url URL', 'AGENT_API_BASE_URL', 'Service origin, e.g. http://127.0.0.1:3000'],
  ['--agent-id UUID', 'AGENT_API_AGENT_ID', 'Agent id (header-key auth, with --api-key)'],
  ['--api-key KEY', 'AGENT_API_KEY', 'Agent API key'],
  ['--bearer-token TOKEN', 'AGENT_API_BEARER_TOKEN', 'OAuth access token (instead of the agent id and key)'],
  ['--timeout-ms N', 'AGENT_API_TIMEOUT_MS', 'Deadline of each call, retries included (default 30000)'],
  ['--idempotency-key KEY', '', 'Idempotency-Key of a write (default: a new random key)'],
  ['--body JSON|@FILE|@-', '', 'Request body as JSON, from a file, or from stdin; field flags override its fields'],
  ['--wait', '', 'After a write, follow its operation until a terminal status (prints it as "operation")'],
  ['--wait-timeout-ms N', '', 'Deadline of --wait (default 120000)'],
  ['--all', '', 'On list commands: follow every page and print all items as one JSON array'],
  ['--pretty', '', 'Indent the JSON output'],
  ['--verbose', '', 'Report each retry (429, 503, network) on stderr'],
  ['--help, -h', '', 'Show help (of a command, after its name)'],
];
const VALUE_FLAGS = new Set(['base-url', 'agent-id', 'api-key', 'bearer-token', 'timeout-ms', 'idempotency-key', 'body', 'wait-timeout-ms']);
const BOOL_FLAGS = new Set(['wait', 'all', 'pretty', 'verbose', 'help']);
const EXIT_CODES_TEXT = 'Exit codes: 0 success; 1 unexpected failure; 2 usage error; 3 API error (the code on stderr); 4 network error or timeout; 5 --wait reached its deadline.';

class UsageError extends Error {}

const kebab = (s: string) => s.replace(/_/g, '-');
const out = (s: string) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
const err = (s: string) => process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);

function mainHelp(): string {
  const groups = new Map<string, CommandSpec[]>();
  for (const c of COMMANDS) groups.set(c.group, [...(groups.get(c.group) ?? []), c]);
  const lines = ['Usage: agent-api <group> <command> [ARGS] [--flags]', '', 'Commands (one per /v1/agent operation; `agent-api <group> <command> --help` lists its flags):'];
  for (const [group, cmds] of groups) for (const c of cmds) lines.push(`  ${`${group} ${c.command}${c.positional.map((p) => ` <${p}>`).join('')}`.padEnd(52)} ${c.summary}`);
  lines.push('', 'Global flags (or their environment variables):');
  for (const [flag, env, text] of GLOBAL_FLAGS) lines.push(`  ${flag.padEnd(24)} ${env.padEnd(24)} ${text}`);
  lines.push('', EXIT_CODES_TEXT);
  return lines.join('\n');
}

function describeFlag(f: FlagSpec, positional: boolean): string {
  const type = f.type === 'array' ? `${f.items ?? 'string'}[] (comma-separated or repeated)` : f.type;
  const parts = [positional ? `<${f.name}>, --${kebab(f.name)}` : `--${kebab(f.name)}`, `${type}${f.required ? ', required' : ''}`];
  if (f.enum) parts.push(`one of: ${f.enum.join(', ')}`);
  if (f.default !== undefined) parts.push(`default: ${JSON.stringify(f.default)}`);
  return `  ${parts[0]!.padEnd(30)} ${parts.slice(1).join('; ')}${f.description ? `\n  ${''.padEnd(30)} ${f.description.replace(/\s+/g, ' ')}` : ''}`;
}

function commandHelp(c: CommandSpec): string {
  const lines = [`Usage: agent-api ${c.group} ${c.command}${c.positional.map((p) => ` <${p}>`).join('')} [--flags]`, '', `${c.summary} (${c.key})`];
  lines.push(`Idempotency-Key: ${c.idempotency}${c.idempotency === 'required' ? ' (generated when --idempotency-key is not given)' : ''}`);
  if (c.bodyDescription) lines.push(`Body: ${c.bodyDescription.replace(/\s+/g, ' ')}`);
  lines.push('', 'Flags from the document:');
  if (!c.flags.length) lines.push('  (none)');
  for (const f of c.flags) lines.push(describeFlag(f, c.positional.includes(f.name)));
  lines.push('', 'Global flags:');
  for (const [flag, env, text] of GLOBAL_FLAGS) {
    if ((flag === '--wait' || flag.startsWith('--wait-')) && !c.writesOperation) continue;
    if (flag === '--all' && !c.paginated) continue;
    lines.push(`  ${flag.padEnd(24)} ${env.padEnd(24)} ${text}`);
  }
  lines.push('', EXIT_CODES_TEXT);
  return lines.join('\n');
}

function coerce(f: FlagSpec, raw: string): unknown {
  switch (f.type) {
    case 'integer':
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || Number.isNaN(n) || (f.type === 'integer' && !Number.isInteger(n)))
        throw new UsageError(`--${kebab(f.name)} expects ${f.type === 'integer' ? 'an integer' : 'a number'}, got '${raw}'`);
      return n;
    }
    case 'boolean':
      if (raw === 'true' || raw === '') return true;
      if (raw === 'false') return false;
      throw new UsageError(`--${kebab(f.name)} expects true or false, got '${raw}'`);
    case 'array':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .map((v) => coerce({ ...f, type: f.items ?? 'string' }, v));
    case 'object':
      try {
        return JSON.parse(raw);
      } catch {
        throw new UsageError(`--${kebab(f.name)} expects JSON`);
      }
    default:
      return raw;
  }
}

function readBody(spec: string): Record<string, unknown> {
  let text = spec;
  try {
    if (spec === '@-') text = readFileSync(0, 'utf8');
    else if (spec.startsWith('@')) text = readFileSync(spec.slice(1), 'utf8');
  } catch (e) {
    throw new UsageError(`--body: cannot read ${spec.slice(1)}: ${(e as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as Record<string, unknown>;
  } catch (e) {
    throw new UsageError(`--body is not a JSON object (${(e as Error).message})`);
  }
}

interface Parsed {
  positionals: string[];
  flags: Map<string, string[]>;
}

function parseArgs(argv: string[], command: CommandSpec | undefined): Parsed {
  const positionals: string[] = [];
  const flags = new Map<string, string[]>();
  const fieldFlags = new Map((command?.flags ?? []).map((f) => [kebab(f.name), f]));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-h') {
      flags.set('help', ['']);
      continue;
    }
    if (!arg.startsWith('--') || arg === '--') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    let value = eq === -1 ? undefined : arg.slice(eq + 1);
    const field = fieldFlags.get(name);
    const isBool = BOOL_FLAGS.has(name) || field?.type === 'boolean';
    if (!field && !VALUE_FLAGS.has(name) && !BOOL_FLAGS.has(name)) {
      if (!command) continue; // the command is not known yet; the second pass reports it
      throw new UsageError(`unknown flag --${name} for '${command.group} ${command.command}' (see --help)`);
    }
    if (value === undefined) {
      const next = argv[i + 1];
      if (isBool && (next === undefined || !/^(true|false)$/.test(next))) value = '';
      else if (next === undefined) throw new UsageError(`--${name} needs a value`);
      else value = argv[++i]!;
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { positionals, flags };
}

function config(flags: Map<string, string[]>): { credentials: Credentials; options: ClientOptions } {
  const pick = (flag: string, env: string) => flags.get(flag)?.at(-1) || process.env[env] || undefined;
  const baseUrl = pick('base-url', 'AGENT_API_BASE_URL');
  const bearerToken = pick('bearer-token', 'AGENT_API_BEARER_TOKEN');
  const agentId = pick('agent-id', 'AGENT_API_AGENT_ID');
  const apiKey = pick('api-key', 'AGENT_API_KEY');
  const timeout = pick('timeout-ms', 'AGENT_API_TIMEOUT_MS');
  if (!baseUrl) throw new UsageError('no service: set AGENT_API_BASE_URL or --base-url');
  const timeoutMs = timeout === undefined ? undefined : Number(timeout);
  if (timeoutMs !== undefined && !(timeoutMs > 0)) throw new UsageError(`timeout must be a positive number of milliseconds, got '${timeout}'`);
  const options: ClientOptions = { timeoutMs };
  if (flags.has('verbose')) {
    options.onRetry = ({ attempt, delayMs, error }) =>
      err(`agent-api: retry ${attempt} in ${delayMs} ms after ${error instanceof AgentApiError ? `${error.code} (HTTP ${error.status})` : `network_error: ${error.message}`}`);
  }
  if (bearerToken) return { credentials: { baseUrl, bearerToken }, options };
  if (agentId && apiKey) return { credentials: { baseUrl, agentId, apiKey }, options };
  throw new UsageError('no credentials: set AGENT_API_AGENT_ID and AGENT_API_KEY, or AGENT_API_BEARER_TOKEN (or the matching flags)');
}

export async function run(argv: string[]): Promise<number> {
  const first = parseArgs(argv, undefined);
  const [group, name] = first.positionals;
  if (!group || (first.flags.has('help') && !name)) {
    (group || first.flags.has('help') ? out : err)(mainHelp());
    return group || first.flags.has('help') ? EXIT.ok : EXIT.usage;
  }
  const command = COMMANDS.find((c) => c.group === group && c.command === name);
  if (!command) {
    const inGroup = COMMANDS.filter((c) => c.group === group).map((c) => c.command);
    throw new UsageError(inGroup.length ? `unknown command '${group} ${name ?? ''}'; ${group} has: ${inGroup.join(', ')}` : `unknown group '${group}' (see agent-api --help)`);
  }
  const { positionals, flags } = parseArgs(argv, command);
  if (flags.has('help')) {
    out(commandHelp(command));
    return EXIT.ok;
  }
  const args = positionals.slice(2);
  if (args.length > command.positional.length) throw new UsageError(`too many arguments: ${args.slice(command.positional.length).join(' ')}`);
  const input: Record<string, unknown> = flags.has('body') ? readBody(flags.get('body')!.at(-1)!) : {};
  command.positional.forEach((p, i) => {
    if (args[i] !== undefined) input[p] = args[i];
  });
  for (const f of command.flags) {
    const values = flags.get(kebab(f.name));
    if (!values) continue;
    input[f.name] = f.type === 'array' ? values.flatMap((v) => coerce(f, v) as unknown[]) : coerce(f, values.at(-1)!);
  }
  const missing = command.flags.filter((f) => f.required && input[f.name] === undefined).map((f) => (command.positional.includes(f.name) ? `<${f.name}>` : `--${kebab(f.name)}`));
  if (missing.length) throw new UsageError(`missing ${missing.join(', ')} (see agent-api ${command.group} ${command.command} --help)`);
  if (flags.has('wait') && !command.writesOperation) throw new UsageError('--wait applies only to writes that create an operation');
  if (flags.has('all') && !command.paginated) throw new UsageError('--all applies only to list commands');

  const { credentials, options } = config(flags);
  const client = new AgentClient(credentials, options);
  const pretty = flags.has('pretty');
  const print = (value: unknown) => out(JSON.stringify(value, null, pretty ? 2 : undefined));
  let idempotencyKey = flags.get('idempotency-key')?.at(-1);
  if (idempotencyKey === undefined && command.idempotency === 'required') {
    // Generated here and shown on stderr (stdout stays the answer), so a retry can pass it back with --idempotency-key.
    idempotencyKey = createIdempotencyKey('cli');
    err(`idempotency-key: ${idempotencyKey}`);
  }
  const requestOptions: RequestOptions = { idempotencyKey };
  const route = command.key as RouteKey;

  if (flags.has('all')) {
    const items: unknown[] = [];
    for await (const item of client.paginate(route as never, input as never, requestOptions)) items.push(item);
    print(items);
    return EXIT.ok;
  }
  const result = (await (client.request as (r: RouteKey, i: unknown, o: RequestOptions) => Promise<unknown>)(route, input, requestOptions)) as Record<string, unknown>;
  if (flags.has('wait') && typeof result?.operation_id === 'string') {
    const waitTimeout = Number(flags.get('wait-timeout-ms')?.at(-1) ?? 120_000);
    try {
      const operation = await client.waitForOperation(result.operation_id, { timeoutMs: waitTimeout });
      print({ ...result, operation });
    } catch (e) {
      if (e instanceof WaitTimeoutError) print({ ...result, operation: e.operation ?? null });
      throw e;
    }
    return EXIT.ok;
  }
  print(result);
  return EXIT.ok;
}

/** Maps a thrown error to its exit code, with the error code first on stderr. */
export function report(e: unknown): number {
  if (e instanceof UsageError) {
    err(`agent-api: usage: ${e.message}`);
    return EXIT.usage;
  }
  if (e instanceof AgentApiError) {
    err(`agent-api: ${e.code} (HTTP ${e.status}): ${e.message}${e.requestId ? ` [request ${e.requestId}]` : ''}`);
    if (e.details) err(JSON.stringify({ details: e.details }));
    return EXIT.api;
  }
  if (e instanceof AgentNetworkError) {
    err(`agent-api: network_error${e.timedOut ? ' (timeout)' : ''}: ${e.message}`);
    return EXIT.network;
  }
  if (e instanceof WaitTimeoutError) {
    err(`agent-api: wait_timeout: ${e.message}`);
    return EXIT.waitTimeout;
  }
  err(`agent-api: unexpected: ${(e as Error)?.stack ?? String(e)}`);
  return EXIT.unexpected;
}

run(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (e: unknown) => (process.exitCode = report(e)),
);
