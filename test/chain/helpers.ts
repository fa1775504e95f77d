// Inbound chain tests: transfers from outside accounts, and worker processes (scripts/worker.ts) whose JSON log
// lines the test reads (which process credited what).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { parseUnits } from 'viem';
import { mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { Address, Hex } from '../../src/chain/port.js';
import type { AnvilNode } from '../helpers/anvil.js';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

/** Mints `amount` USDC to dev account `index` (from the faucet) and transfers it to `to` from there. */
export async function sendUsdc(node: AnvilNode, token: Address, index: number, to: Address, amount: string): Promise<{ hash: Hex; blockNumber: bigint }> {
  const wallet = node.devWallet(index);
  const value = parseUnits(amount, 6);
  await mintToken(node.devWallet(0), node.client, token, wallet.account.address, value);
  const hash = await wallet.writeContract({ address: token, abi: usdCoinAbi, functionName: 'transfer', args: [to, value] });
  const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return { hash, blockNumber: receipt.blockNumber };
}

/** A plain ETH transfer from dev account `index`. */
export async function sendEth(node: AnvilNode, index: number, to: Address, wei: bigint): Promise<{ hash: Hex; blockNumber: bigint }> {
  const hash = await node.devWallet(index).sendTransaction({ to, value: wei });
  const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return { hash, blockNumber: receipt.blockNumber };
}

export interface LoggedWorker {
  child: ChildProcess;
  lines: string[];
  /** SIGKILL and wait for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (graceful stop) and wait for the exit. */
  stop(): Promise<void>;
}

/** scripts/worker.ts with `env` (over the test defaults); resolves once it logged "worker started". */
export async function startLoggedWorker(env: Record<string, string>): Promise<LoggedWorker> {
  const childEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv(), LOG_LEVEL: 'info', ...env };
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts'], { cwd: repoRoot, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (c: string) => (stderr += c));
  const started = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      partial += chunk;
      const parts = partial.split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        if (line.includes('worker started')) resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`worker exited (${code}) before starting: ${stderr}`)));
    setTimeout(() => reject(new Error(`worker did not start within 60 s: ${stderr}`)), 60_000).unref();
  });
  const exited = once(child, 'exit');
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      await exited;
    }
  };
  try {
    await started;
  } catch (err) {
    await end('SIGKILL');
    throw err;
  }
  return { child, lines, kill: () => end('SIGKILL'), stop: () => end('SIGTERM') };
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Lines of a worker's JSON log with this message. */
export const logLines = (w: LoggedWorker, msg: string): Record<string, unknown>[] =>
  w.lines.flatMap((l) => {
    try {
      const parsed = JSON.parse(l) as Record<string, unknown>;
      return parsed.msg === msg ? [parsed] : [];
    } catch {
      return [];
    }
  });
