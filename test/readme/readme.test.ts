// The README's shell examples, run as written (issue 10 item 16, issue 29) against `npm start` on a fresh data
// directory: every block in order, each command must exit 0, the variables a block sets stay set for the blocks after
// it. Values a reader copies from earlier output (the demo credentials, OWNER_ID, AGENT_ID) and the policy file's name
// are substituted; what cannot run here is marked in the README itself (`# not run by test/readme: REASON`).
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot, runToExit } from '../helpers/process.js';

/**
 * The README's own mark for what this test cannot run, visible to every reader: a block whose first line is
 * `# not run by test/readme: REASON`, or a line ending in that comment. Everything else runs, in order.
 */
const NOT_RUN = /#\s*not run by test\/readme:\s*(\S.*)$/;

interface ShellLine {
  command: string;
  /** Why the README says this line is not run here; undefined: it runs. */
  notRun?: string;
}

/** The commands of every ```sh block in order, continuation lines joined, comments and blanks dropped. */
function shellCommands(markdown: string): ShellLine[] {
  const commands: ShellLine[] = [];
  for (const [, block] of markdown.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const blockReason = NOT_RUN.exec(block!.split('\n')[0]!.trim())?.[1];
    for (const line of block!.replace(/\\\n\s*/g, '').split('\n')) {
      const trimmed = line.trim();
      if (trimmed === '' || trimmed.startsWith('#')) continue;
      const notRun = blockReason ?? NOT_RUN.exec(trimmed)?.[1];
      commands.push({ command: trimmed, ...(notRun ? { notRun } : {}) });
    }
  }
  return commands;
}

const sh = (command: string, env: NodeJS.ProcessEnv) => runToExit('sh', ['-c', command], env);

describe('README examples', function () {
  this.timeout(600_000);
  let dataDir: string;
  let server: ChildProcess | null = null;

  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-readme-'));
  });
  after(async () => {
    if (server?.exitCode === null) process.kill(-server.pid!, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('tells a newcomer what the code knows: the demo owner, where OPERATION_ID comes from, EBADENGINE, agentctl and the server', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const demoEmail = /createOwner\(db, \{ email: '([^']+)'/.exec(readFileSync(join(repoRoot, 'src/demo.ts'), 'utf8'))?.[1];
    expect(demoEmail).to.be.a('string');
    expect(readme).to.include(`\`${demoEmail!}\`: sign in with that address`);
    expect(readme).to.match(/EBADENGINE[\s\S]{0,300}harmless/);
    expect(readme).to.match(/first start builds[^.]*about 25 s/);
    expect(readme).to.not.match(/first start compiles for a few seconds/);
    expect(readme).to.not.match(/`agentctl` and `npm run migrate` on the same `DATA_DIR` refuse/);
    // A variable a block uses is set by that block or an earlier one: OPERATION_ID by the line that pays.
    const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const use = blocks.findIndex((b) => b.includes('$OPERATION_ID'));
    expect(use).to.be.at.least(0);
    expect(blocks.slice(0, use + 1).join('\n')).to.match(/^OPERATION_ID=\$\(/m);
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

    const lines = shellCommands(readme);
    for (const { command: written, notRun } of lines) {
      if (notRun) {
        skipped.push(`${written}  (${notRun})`);
        continue;
      }
      let command = written;
      for (const [placeholder, value] of values) command = command.split(placeholder).join(value);
      command = command.replace(/(?<![\w/.-])policy\.json\b/g, policyFile);
      const start = /^npm ci && (npm start)\b/.exec(command);
      if (start) {
        server = spawn('sh', ['-c', `exec ${start[1]!}`], { cwd: repoRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
        server.stdout!.on('data', (c: Buffer) => (serverOutput += c.toString()));
        server.stderr!.on('data', (c: Buffer) => (serverOutput += c.toString()));
        // The first start builds dist/ (~25 s on an idle machine; minutes on a shared, loaded one).
        const deadline = Date.now() + 280_000;
        while (!/^listening on /m.test(serverOutput)) {
          if (server.exitCode !== null || Date.now() > deadline) expect.fail(`npm start did not listen:\n${serverOutput}`);
          await new Promise((r) => setTimeout(r, 200));
        }
        checkFirstStart(readme, serverOutput, port, values);
        ran.push(written);
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
    expect(
      ran.filter((c) => /^npm run --silent call -- POST/.test(c)),
      'the payment example ran',
    ).to.have.length(1);
    expect(
      ran.filter((c) => /agentctl -- wallet fund/.test(c)),
      'the agentctl examples ran',
    ).to.have.length(1);
    // Nothing is left out silently: every line ran or carries the README's visible mark with its reason.
    expect(ran.length + skipped.length).to.equal(lines.length);
    expect(ran.length, 'most of the README runs').to.be.greaterThan(skipped.length);
    for (const line of ['owner list', 'agent list', 'agent show'])
      expect(
        ran.some((c) => c.includes(`agentctl -- ${line}`)),
        line,
      ).to.equal(true);
  });
});

/**
 * The lines the README says the first start prints, with its placeholders (`…`) and port 3000 read as
 * "some value": each must be a line of the output. The demo credentials go to `values` for later commands.
 */
function checkFirstStart(readme: string, output: string, port: number, values: Map<string, string>): void {
  const shown = /The first start [\s\S]*?```\n([\s\S]*?)```/.exec(readme)?.[1];
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
