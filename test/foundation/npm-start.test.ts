// `npm start` under a process manager (issue 10 item 10): SIGTERM or SIGINT to the process npm start created
// drains and stops the whole tree within SHUTDOWN_GRACE_MS, freeing the port.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { freePort, repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

const GRACE_MS = 4000;
/** Time for npm itself to notice its child is gone and exit, beyond the server's own grace. */
const MARGIN_MS = 3000;

/** Live processes in a process group (from /proc), so a surviving grandchild is seen whatever its parent. */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the parenthesised command: state ppid pgrp ...
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
    } catch {
      // the process went away while we looked
    }
  }
  return members;
}

const portRefuses = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(true));
  });

async function startNpm(): Promise<{ npm: ChildProcess; port: number; output: () => string }> {
  const port = await freePort();
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv({ RUN_WORKER: 'false', PORT: String(port), SHUTDOWN_GRACE_MS: String(GRACE_MS), LOG_LEVEL: 'warn' }) };
  // Its own process group, as a service manager or a terminal gives it; the test finds every descendant by it.
  const npm = spawn('npm', ['start'], { cwd: repoRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  npm.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  npm.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const deadline = Date.now() + 60_000;
  while (!/listening on http:\/\//.test(output)) {
    if (npm.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not listen:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { npm, port, output: () => output };
}

describe('npm start', function () {
  this.timeout(120_000);
  const groups: number[] = [];
  after(() => {
    // Whatever a failing run left behind in the groups this file started.
    for (const pgid of groups) for (const pid of groupMembers(pgid)) process.kill(pid, 'SIGKILL');
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops the whole process tree and frees the port within SHUTDOWN_GRACE_MS when npm gets ${signal}`, async () => {
      const { npm, port, output } = await startNpm();
      const pgid = npm.pid!;
      groups.push(pgid);
      expect(groupMembers(pgid).length, 'npm and the server').to.be.at.least(2);
      const sent = Date.now();
      const exited = once(npm, 'exit');
      npm.kill(signal);
      while (groupMembers(pgid).length > 0 && Date.now() - sent < GRACE_MS + MARGIN_MS) await new Promise((r) => setTimeout(r, 100));
      const survivors = groupMembers(pgid).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
      expect(survivors, `still running ${Date.now() - sent} ms after ${signal}\n${output()}`).to.deep.equal([]);
      await exited;
      expect(await portRefuses(port), 'the port is free').to.equal(true);
    });
  }
});
