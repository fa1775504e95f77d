// Shared set-up of the chain tests: an Anvil node with the USDC-like token deployed and recorded as the USDC
// asset's contract (restored afterwards), the deposit cursor of chain 31337 cleared (each file has its own node),
// the environment of an evm-mode server or worker, and worker processes (scripts/worker.ts) as children.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Knex } from 'knex';
import { parseUnits } from 'viem';
import { deployToken, mintToken, usdCoinAbi } from '../../src/chain/token.js';
import type { Address, Hex } from '../../src/chain/port.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { repoRoot } from '../helpers/process.js';
import { testConfigEnv } from '../helpers/server.js';

export interface ChainFixture {
  node: AnvilNode;
  token: Address;
  /** The environment of an evm-mode process on this node (merge into testConfigEnv). */
  env(extra?: Record<string, string>): Record<string, string>;
  /** Mints `amount` USDC to dev account `index` (from the faucet) and transfers it to `to`; resolves with the tx. */
  sendUsdc(index: number, to: Address, amount: string): Promise<{ hash: Hex; blockNumber: bigint }>;
  /** A plain ETH transfer from dev account `index`. */
  sendEth(index: number, to: Address, wei: bigint): Promise<{ hash: Hex; blockNumber: bigint }>;
  /** Restores the USDC asset row and clears the cursor (through any open connection to the test database), stops the node. */
  close(db: Knex): Promise<void>;
}

export async function startChainFixture(db: Knex, opts: { confirmations?: number } = {}): Promise<ChainFixture> {
  const node = await startAnvil();
  const token = await deployToken(node.devWallet(0), node.client);
  const usdc = (await db('assets').where({ symbol: 'USDC' }).first('contract_address')) as { contract_address: string };
  await db('assets').where({ symbol: 'USDC' }).update({ contract_address: token });
  await db('chain_cursors').where({ chain_id: 31337 }).delete();
  return {
    node,
    token,
    env: (extra = {}) => ({
      CHAIN_RPC_URL: node.rpcUrl,
      CHAIN_CONFIRMATIONS: String(opts.confirmations ?? 3),
      CHAIN_POLL_MS: '100',
      CHAIN_DEV_BOOTSTRAP: 'false',
      CHAIN_ASSET_ADDRESSES: `USDC=${token}`,
      CHAIN_RECONCILE_INTERVAL_MS: '0',
      ...extra,
    }),
    async sendUsdc(index, to, amount) {
      const wallet = node.devWallet(index);
      const value = parseUnits(amount, 6);
      await mintToken(node.devWallet(0), node.client, token, wallet.account.address, value);
      const hash = await wallet.writeContract({ address: token, abi: usdCoinAbi, functionName: 'transfer', args: [to, value] });
      const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      return { hash, blockNumber: receipt.blockNumber };
    },
    async sendEth(index, to, wei) {
      const hash = await node.devWallet(index).sendTransaction({ to, value: wei });
      const receipt = await node.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      return { hash, blockNumber: receipt.blockNumber };
    },
    async close(db: Knex) {
      try {
        await db('assets').where({ symbol: 'USDC' }).update({ contract_address: usdc.contract_address });
        await db('chain_cursors').where({ chain_id: 31337 }).delete();
      } finally {
        await node.stop();
      }
    },
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  lines: string[];
  /** SIGKILL and wait for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (graceful stop) and wait for the exit. */
  stop(): Promise<void>;
}

/** scripts/worker.ts with the test database and `env`; resolves once it logged "worker started". */
export async function startWorkerProcess(env: Record<string, string>): Promise<WorkerProcess> {
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
export const logLines = (w: WorkerProcess, msg: string): Record<string, unknown>[] =>
  w.lines.flatMap((l) => {
    try {
      const parsed = JSON.parse(l) as Record<string, unknown>;
      return parsed.msg === msg ? [parsed] : [];
    } catch {
      return [];
    }
  });
