// The real server as a child process (`node --import tsx src/server.ts`): start, read its stdout, stop.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** The repository root, so children resolve `src/server.ts` and `tsx` whatever the test's cwd. */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  baseUrl: string;
  port: number;
  /** Every stdout line so far (the demo line, the listening line, log lines). */
  stdoutLines: string[];
  stderr(): string;
  /** Sends SIGTERM (or `signal`) and resolves with the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Resolves with the exit code once the child has exited (whoever stopped it). */
  exited: Promise<number | null>;
}

/**
 * Spawns the server with exactly `env` (plus PATH/HOME) and PORT=0, HOST=127.0.0.1 unless given,
 * and resolves once it prints `listening on http://127.0.0.1:<port>` (or, in production, its JSON log line with that `url`). Rejects with its stderr
 * when it exits first or does not listen within `timeoutMs`.
 */
export async function startServerProcess(env: Record<string, string | undefined>, opts: { timeoutMs?: number; npmStart?: boolean } = {}): Promise<ServerProcess> {
  // No background validator warm-up (seconds of CPU per process): a test touches a few operations.
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', WARM_VALIDATORS: 'false' };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  // `npmStart`: exactly `npm start`, in its own process group so a signal reaches npm's child too.
  const child = opts.npmStart
    ? spawn('npm', ['start'], { cwd: repoRoot, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    : spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: repoRoot, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const signal = (sig: NodeJS.Signals) => (opts.npmStart ? process.kill(-child.pid!, sig) : child.kill(sig));
  const stdoutLines: string[] = [];
  let stderr = '';
  let partial = '';
  const listeners: Array<(line: string) => void> = [];
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    partial += chunk;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      stdoutLines.push(line);
      for (const l of listeners) l(line);
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited: Promise<number | null> = once(child, 'exit').then(([code]) => code as number | null);

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      signal('SIGKILL');
      reject(new Error(`server did not listen within ${opts.timeoutMs ?? 60_000} ms; stderr:\n${stderr}`));
    }, opts.timeoutMs ?? 60_000);
    const check = (line: string) => {
      // The plain line (development, test) or, in production, the JSON log line carrying `url`.
      const m = /^listening on http:\/\/[^:]+:(\d+)$/.exec(line.trim()) ?? (line.includes('"msg":"agent api listening"') ? /"url":"http:\/\/[^:]+:(\d+)"/.exec(line) : null);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    listeners.push(check);
    for (const line of stdoutLines) check(line);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with code ${code} before listening; stderr:\n${stderr}\nstdout:\n${stdoutLines.join('\n')}`));
    });
  });

  return {
    child,
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    stdoutLines,
    stderr: () => stderr,
    exited,
    async stop(sig: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) signal(sig);
      return exited;
    },
  };
}

/** A TCP port that was free a moment ago (bind 0, read, close), for children that must be told their port. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command in the repository root to its exit, collecting both outputs. */
export function runToExit(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `agentctl ARGS` as a child process with exactly `env` (besides PATH and HOME; undefined values unset); resolves with its exit code and output. */
export async function agentctl(env: Record<string, string | undefined>, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) childEnv[k] = v;
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/agentctl.ts', ...args], { cwd: repoRoot, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
