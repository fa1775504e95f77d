// A real local chain for tests: Anvil (from the npm package @foundry-rs/anvil) on a free loopback port, started
// per test file and stopped on teardown. `restart()` stops the node (state dumped) and starts it again on the same
// port with that state, so tests can take the node away and bring it back.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPublicClient, createWalletClient, http, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import type { Hex } from '../../src/chain/port.js';

const require = createRequire(import.meta.url);

/** The platform binary inside @foundry-rs/anvil-<os>-<arch> (the `anvil` bin is a Node shim around it). */
export function anvilBinary(): string {
  const pkg = `@foundry-rs/anvil-${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'anvil');
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

export interface AnvilNode {
  rpcUrl: string;
  port: number;
  client: PublicClient;
  /** A wallet client for one of Anvil's dev accounts (index 0 is the deployer/faucet). */
  devWallet(index: number): ReturnType<typeof devWalletClient>;
  /** Raw JSON-RPC (anvil_*, evm_* methods). */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Mines `blocks` empty blocks. */
  mine(blocks?: number): Promise<void>;
  /** Stops the node (state kept in a file) and resolves once it is gone; `start()` brings it back on the same port. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

function devWalletClient(rpcUrl: string, key: Hex) {
  return createWalletClient({ account: privateKeyToAccount(key), chain: foundry, transport: http(rpcUrl) });
}

/** Starts Anvil on a free port (chain id 31337 and instant mining unless told otherwise) and waits until it answers. */
export async function startAnvil(opts: { blockTime?: number; chainId?: number } = {}): Promise<AnvilNode> {
  const chainId = opts.chainId ?? 31337;
  const port = await freePort();
  const rpcUrl = `http://127.0.0.1:${port}`;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'anvil-'));
  const stateFile = path.join(stateDir, 'state.json');
  let child: ChildProcess | null = null;

  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    const body = (await res.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };

  async function launch(loadState: boolean) {
    const args = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--quiet', '--dump-state', stateFile];
    if (loadState) args.push('--load-state', stateFile);
    if (opts.blockTime) args.push('--block-time', String(opts.blockTime));
    const proc = spawn(anvilBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    child = proc;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`anvil exited with ${proc.exitCode}: ${stderr}`);
      try {
        if ((await rpc<string>('eth_chainId')) === `0x${chainId.toString(16)}`) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`anvil did not answer on ${rpcUrl}: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function halt() {
    const proc = child;
    child = null;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, 'exit');
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  await launch(false);
  const client = createPublicClient({ chain: foundry, transport: http(rpcUrl), pollingInterval: 50 }) as PublicClient;
  return {
    rpcUrl,
    port,
    client,
    devWallet: (index) => devWalletClient(rpcUrl, ANVIL_DEV_KEYS[index]!),
    rpc,
    async mine(blocks = 1) {
      await rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    pause: halt,
    resume: () => launch(true),
    async stop() {
      await halt();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
