// agentctl as a user runs it (`npm run --silent agentctl -- ...`), in a child process with the given environment.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { repoRoot } from './process.js';

export interface AgentctlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one agentctl command; resolves with its exit code and output (never rejects). */
export function runAgentctl(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<AgentctlResult> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'agentctl', '--', ...args], { cwd: repoRoot, env, timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0, stdout, stderr });
    });
  });
}

/** An agentctl runner bound to an environment, and `json`: a command that must succeed, its printed JSON object. */
export function agentctlWith(env: () => NodeJS.ProcessEnv, timeoutMs = 60_000) {
  const agentctl = (...args: string[]) => runAgentctl(args, env(), timeoutMs);
  const json = async (...args: string[]) => {
    const r = await agentctl(...args);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0);
    return JSON.parse(r.stdout.trim()) as Record<string, unknown>;
  };
  return { agentctl, json };
}
