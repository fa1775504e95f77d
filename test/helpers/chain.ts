// Chain tests: a test server settling on an Anvil node, in its own database (the dev bootstrap rewrites USDC's
// contract address, which other test files must not see), with agents funded in the ledger and on chain alike.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { getAddress, parseUnits } from 'viem';
import type { Address, Hex } from '../../src/chain/port.js';
import type { Clock } from '../../src/lib/clock.js';
import { mintToken } from '../../src/chain/token.js';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import type { OperationRow } from '../../src/db/repositories/operation.repository.js';
import { cloneTemplateDatabase } from '../setup.js';
import type { AgentOptions } from '../support/agents.js';
import type { AnvilNode } from './anvil.js';
import { repoRoot } from './process.js';
import { startTestServer, testConfigEnv, type TestAgent, type TestServer } from './server.js';

/** A migrated database of its own (a clone of the run's template); `drop()` removes it. */
export async function createIsolatedDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const { url, drop } = await cloneTemplateDatabase('chain');
  return { url, drop };
}

/** The environment of a server settling on `node` (fast polling, one confirmation). */
export function chainEnv(node: AnvilNode, databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return { DATABASE_URL: databaseUrl, CHAIN_RPC_URL: node.rpcUrl, CHAIN_CONFIRMATIONS: '1', CHAIN_POLL_MS: '50', CHAIN_REBROADCAST_MS: '2000', ...extra };
}

export interface ChainAgent extends TestAgent {
  address: Address;
}

export interface ChainServer extends TestServer {
  node: AnvilNode;
  token: Address;
  /** An agent with an allow-all policy, funded with `fund` in the ledger and the same on chain. */
  agent(fund?: { USDC?: string; ETH?: string }, opts?: { policy?: AgentOptions['policy'] }): Promise<ChainAgent>;
  /** Runs settlement passes (unless `drive` is false: other processes settle) until every operation in `ids` is terminal. */
  settle(ids: string[], opts?: { timeoutMs?: number; drive?: boolean }): Promise<OperationRow[]>;
  usdcBalance(address: Address): Promise<bigint>;
}

export async function startChainServer(
  node: AnvilNode,
  opts: { env?: Record<string, string>; worker?: boolean; clock?: Clock; database?: { url: string; drop(): Promise<void> } } = {},
): Promise<ChainServer & { databaseUrl: string; dropDatabase(): Promise<void> }> {
  const database = opts.database ?? (await createIsolatedDatabase());
  const server = await startTestServer({ env: chainEnv(node, database.url, opts.env), worker: opts.worker, clock: opts.clock });
  const usdc = await server.db('assets').where({ symbol: 'USDC' }).first();
  const token = getAddress(usdc.contract_address) as Address;
  const faucet = node.devWallet(0);
  const { ledger } = server.services;
  const close = server.close;
  return Object.assign(server, {
    node,
    token,
    async agent(fund: { USDC?: string; ETH?: string } = {}, agentOpts: { policy?: AgentOptions['policy'] } = {}) {
      const agent = await server.createAgent({ policy: agentOpts.policy ?? 'all' });
      const wallet = await server.db('wallets').where({ id: agent.walletId }).first();
      const address = getAddress(wallet.address) as Address;
      // Funded on chain; the deposit watcher credits the ledger (ticked here, and by any running worker).
      if (fund.USDC) await mintToken(faucet, node.client, token, address, parseUnits(fund.USDC, 6));
      if (fund.ETH) {
        const hash = await faucet.sendTransaction({ to: address, value: parseUnits(fund.ETH, 18) });
        await node.client.waitForTransactionReceipt({ hash });
      }
      // Confirmations for the funding blocks (the watcher credits a block once it has CHAIN_CONFIRMATIONS).
      if ((fund.USDC || fund.ETH) && server.config.chain.confirmations > 1) await node.mine(server.config.chain.confirmations - 1);
      const expected: Array<[string, bigint]> = [];
      if (fund.USDC) expected.push(['USDC', parseUnits(fund.USDC, 6)]);
      if (fund.ETH) expected.push(['ETH', parseUnits(fund.ETH, 18)]);
      const deadline = Date.now() + 20_000;
      for (;;) {
        const balances = await Promise.all(expected.map(([asset]) => ledger.ledger.balance(server.db, agent.walletId, asset)));
        if (expected.every(([, units], i) => balances[i]!.available === units)) break;
        if (Date.now() > deadline)
          throw new Error(
            `deposits to ${address} not credited within 20 s (cursor ${JSON.stringify(await server.db('chain_cursors').first())}, head ${await node.client.getBlockNumber()}, deposits ${JSON.stringify(await server.db('chain_deposits').select('to_address', 'asset_symbol', 'block_number'))})`,
          );
        if ((await server.services.inbound!.deposits.tick()) === 0) await new Promise((r) => setTimeout(r, 30));
      }
      return { ...agent, address };
    },
    async settle(ids: string[], { timeoutMs = 30_000, drive = !opts.worker }: { timeoutMs?: number; drive?: boolean } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (drive) await runSettlementTick({ db: server.db, ledger });
        const rows = (await server.db('operations').whereIn('id', ids)) as OperationRow[];
        if (rows.length === ids.length && rows.every((r) => ['executed', 'execution_failed', 'policy_rejected', 'cancelled'].includes(r.status))) return rows;
        if (Date.now() > deadline) throw new Error(`operations not terminal after ${timeoutMs} ms: ${rows.map((r) => `${r.id}=${r.status}`).join(', ')}`);
        await new Promise((r) => setTimeout(r, 30));
      }
    },
    usdcBalance: (address: Address) =>
      node.client.readContract({
        address: token,
        abi: [{ type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ name: 'a', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] }] as const,
        functionName: 'balanceOf',
        args: [address],
      }),
    async close() {
      await close();
    },
    databaseUrl: database.url,
    dropDatabase: database.drop,
  });
}

/** Mints `usdc` USDC to `address` on chain and waits until the deposit watcher has credited the wallet with it (ticked here). */
export async function mintAndCredit(s: Pick<ChainServer, 'db' | 'services' | 'node' | 'token'>, walletId: string, address: Address, usdc: string): Promise<void> {
  const units = parseUnits(usdc, 6);
  await mintToken(s.node.devWallet(0), s.node.client, s.token, address, units);
  for (const deadline = Date.now() + 20_000; (await s.services.ledger.ledger.balance(s.db, walletId, 'USDC')).available !== units;) {
    if (Date.now() > deadline) throw new Error(`the deposit of ${usdc} USDC to ${address} was not credited within 20 s`);
    if ((await s.services.inbound!.deposits.tick()) === 0) await new Promise((r) => setTimeout(r, 50));
  }
}

export const randomAddress = (): Address => getAddress(`0x${randomBytes(20).toString('hex')}`) as Address;
export type { Hex };

export interface WorkerProcess {
  child: ChildProcess;
  /** Sends `signal` (SIGTERM by default) and resolves once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** `scripts/worker.ts` as a child process settling on `node` against `databaseUrl` (the same env as the test server). */
export function startWorkerProcess(node: AnvilNode, databaseUrl: string, extra: Record<string, string> = {}): WorkerProcess {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...testConfigEnv(chainEnv(node, databaseUrl, extra)) };
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts'], { cwd: repoRoot, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, 'exit');
  return {
    child,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
      if (signal === 'SIGTERM' && child.exitCode !== 0) throw new Error(`worker exited with ${child.exitCode}: ${stderr}`);
    },
  };
}
