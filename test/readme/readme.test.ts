// The README's shell examples, run as written (issue 10 item 16) against `npm start` on a fresh data directory:
// each command must exit 0. Values a reader copies from earlier output (the demo credentials, OWNER_ID,
// AGENT_ID) and the policy file's name are substituted; the few commands not run here are listed with why.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot, runToExit } from '../helpers/process.js';

/** Commands the test does not run, and why; any other command in a ```sh block must pass. */
const NOT_RUN: Array<[RegExp, string]> = [
  [/^npm ci\b/, 'node_modules is installed already (and would need the network)'],
  [/^npm test\b/, 'would run this test again; CI runs it'],
  [/^npm run --silent gen\b/, 'rewrites generated/; CI runs it in its drift check'],
  [/^npm run --silent lint\b/, 'CI runs lint, contract lint and typecheck as their own steps'],
  [/^npm run --silent bench:/, 'a benchmark of minutes, not an example'],
  [/^npm run --silent soak\b/, 'a scale-out run of minutes (make soak), not an example'],
  // "A real chain" needs Anvil running beside the server: test/chain/start.test.ts runs these on Anvil.
  [/^npm run chain\b/, 'a long-running Anvil node; test/chain/start.test.ts starts one'],
  [/^CHAIN_RPC_URL=/, 'needs the Anvil node; test/chain/start.test.ts starts the server on one'],
  [/include=onchain/, 'reads an on-chain payment; test/chain/start.test.ts checks it'],
  [/agentctl -- chain (bootstrap|faucet)\b/, 'development chain only; test/chain/start.test.ts runs both'],
];

/** The shell commands of every ```sh block, continuation lines joined, comments and blanks dropped. */
function shellCommands(markdown: string): string[] {
  const commands: string[] = [];
  for (const [, block] of markdown.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const command of block!.replace(/\\\n\s*/g, '').split('\n')) {
      const trimmed = command.trim();
      if (trimmed !== '' && !trimmed.startsWith('#')) commands.push(trimmed);
    }
  }
  return commands;
}

const sh = (command: string, env: NodeJS.ProcessEnv) => runToExit('sh', ['-c', command], env);

describe('README examples', function () {
  this.timeout(300_000);
  let dataDir: string;
  let server: ChildProcess | null = null;

  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-readme-'));
  });
  after(async () => {
    if (server?.exitCode === null) process.kill(-server.pid!, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs every shell example as written on a fresh data directory', async () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const port = await freePort();
    // Only what a fresh machine has: no DATABASE_URL, REDIS_URL or MASTER_KEY; a free port and a fresh DATA_DIR.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), DATA_DIR: dataDir };
    const policyFile = join(dataDir, 'policy.json');
    const values = new Map<string, string>();
    const assignments: string[] = [];
    let serverOutput = '';
    const ran: string[] = [];
    const skipped: string[] = [];

    for (const written of shellCommands(readme)) {
      let command = written;
      for (const [placeholder, value] of values) command = command.split(placeholder).join(value);
      command = command.replace(/(?<![\w/.-])policy\.json\b/g, policyFile);
      const start = /^npm ci && (npm start)\b/.exec(command);
      if (start) {
        server = spawn('sh', ['-c', `exec ${start[1]!}`], { cwd: repoRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
        server.stdout!.on('data', (c: Buffer) => (serverOutput += c.toString()));
        server.stderr!.on('data', (c: Buffer) => (serverOutput += c.toString()));
        const deadline = Date.now() + 120_000;
        while (!/^listening on /m.test(serverOutput)) {
          if (server.exitCode !== null || Date.now() > deadline) expect.fail(`npm start did not listen:\n${serverOutput}`);
          await new Promise((r) => setTimeout(r, 200));
        }
        checkFirstStart(readme, serverOutput, port, values);
        ran.push(written);
        continue;
      }
      const reason = NOT_RUN.find(([pattern]) => pattern.test(command));
      if (reason) {
        skipped.push(`${written}  (${reason[1]})`);
        continue;
      }
      if (/^\w+=/.test(command) && !/\bnpm\b/.test(command)) {
        assignments.push(command);
        ran.push(written);
        continue;
      }
      // agentctl goes through the running server (the README says so): it stays up for every command.
      if (/agentctl/.test(command)) expect(server?.exitCode, 'npm start still runs for agentctl').to.equal(null);
      const result = await sh([...assignments, command].join('\n'), env);
      expect(result.code, `${written}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`).to.equal(0);
      ran.push(written);
      const printed = /^\{.*\}$/m.exec(result.stdout)?.[0];
      if (printed && /agentctl -- (owner|agent) create/.test(command)) {
        const json = JSON.parse(printed) as { owner_id?: string; agent_id?: string };
        if (/owner create/.test(command)) values.set('OWNER_ID', json.owner_id!);
        else values.set('AGENT_ID', json.agent_id!);
      }
    }
    expect(ran.filter((c) => /^npm run --silent call -- POST/.test(c)), 'the payment example ran').to.have.length(1);
    expect(ran.filter((c) => /agentctl -- wallet fund/.test(c)), 'the agentctl examples ran').to.have.length(1);
    // `npm ci && npm test`, five chain lines, and seven lines of Development (lint:deploy runs as a CI step):
    // a new example is run unless listed above.
    expect(skipped, skipped.join('\n')).to.have.length(13);
  });
});

/**
 * The lines the README says the first start prints, with its placeholders (`…`) and port 3000 read as
 * "some value": each must be a line of the output. The demo credentials go to `values` for later commands.
 */
function checkFirstStart(readme: string, output: string, port: number, values: Map<string, string>): void {
  const shown = /The first start prints[\s\S]*?```\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(shown, 'the README shows what the first start prints').to.be.a('string');
  const lines = output.split('\n').map((l) => l.trim());
  for (const expected of shown!.trim().split('\n')) {
    const pattern = expected
      .trim()
      .split(/\s+/)
      .map((token) => (token.includes('…') ? `${token.slice(0, token.indexOf('=') + 1).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\S+)` : token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join(' ')
      .replace(':3000', `:${port}`);
    const match = lines.map((l) => new RegExp(`^${pattern}$`).exec(l)).find(Boolean);
    expect(match, `a line like "${expected}" in:\n${output}`).to.not.equal(undefined);
    if (expected.startsWith('demo agent:')) {
      values.set('6f1c…-…', match![1]!);
      values.set('agk_…', match![2]!);
    }
  }
}
