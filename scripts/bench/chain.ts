// Benchmark: payments settled per second on Anvil (USDC by relayed EIP-3009, accepted then driven to `executed` by
// `--workers` concurrent settlement loops) beside a baseline measured in the same run against the same node: a raw
// viem loop signing and sending plain transfers with sendRawTransaction, waiting for the last receipt.
// Usage: npm run bench:chain -- [--payments 200] [--agents 5] [--workers 2]
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { keccak256, parseEther, parseUnits } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createApp } from '../../src/app.js';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import { mintToken } from '../../src/chain/token.js';
import { loadConfig } from '../../src/config.js';
import type { Address } from '../../src/chain/port.js';
import { runSettlementTick } from '../../src/services/ledger/settlement-loop.js';
import { startAnvil } from '../../test/helpers/anvil.js';
import { createIsolatedDatabase } from '../../test/helpers/chain.js';
import { isRefusal } from '../../src/lib/refusal.js';

const { values } = parseArgs({ options: { payments: { type: 'string', default: '200' }, agents: { type: 'string', default: '5' }, workers: { type: 'string', default: '2' } } });
const paymentCount = Number(values.payments);
const agentCount = Number(values.agents);
const workerCount = Number(values.workers);

async function main() {
  const node = await startAnvil();
  const database = await createIsolatedDatabase();
  const config = loadConfig(
    {
      NODE_ENV: 'development',
      DATABASE_URL: database.url,
      AUTO_MIGRATE: 'false',
      RUN_WORKER: 'false',
      LOG_LEVEL: 'silent',
      MASTER_KEY: 'bench-master-key-0123456789abcdef0123456789',
      VALIDATE_RESPONSES: 'false',
      CHAIN_RPC_URL: node.rpcUrl,
      CHAIN_POLL_MS: '20',
      CHAIN_CONFIRMATIONS: '1',
    },
    () => {},
  );
  const built = await createApp(config);
  try {
    const { ledger } = built.services;
    const token = (await built.db('assets').where({ symbol: 'USDC' }).first()).contract_address as Address;
    const { owner_id } = await built.services.agents.createOwner(built.db, { email: 'bench-chain@example.com' });
    const who: { agentId: string; walletId: string }[] = [];
    for (let i = 0; i < agentCount; i++) {
      const a = await built.services.agents.createAgent(built.db, { ownerId: owner_id, name: `bench ${i}` });
      const wallet = await built.db('wallets').where({ id: a.wallet_id }).first();
      await ledger.policy.allowAll(built.db, a.agent_id);
      await mintToken(node.devWallet(0), node.client, token, wallet.address, parseUnits('1000000', 6));
      await ledger.account.fund(built.db, a.agent_id, { asset: 'USDC', amount: '1000000' });
      who.push({ agentId: a.agent_id, walletId: a.wallet_id });
    }
    const ids: string[] = [];
    for (let i = 0; i < paymentCount; i++) {
      const res = await ledger.payments.createPayment(built.db, who[i % who.length]!, { to: '0x000000000000000000000000000000000000bEEF', asset: 'USDC', amount: '0.01' }, randomUUID());
      if (isRefusal(res)) throw new Error(`payment refused: ${res.refusal.message}`);
      ids.push(res.operation_id);
    }

    // The API's settlement: accepted -> signed, recorded, broadcast -> receipt -> executed.
    const started = performance.now();
    let done = 0;
    await Promise.all(
      Array.from({ length: workerCount }, async () => {
        while (done < paymentCount) {
          await runSettlementTick({ db: built.db, ledger });
          done = Number((await built.db('operations').whereIn('id', ids).where({ status: 'executed' }).count<{ n: string }[]>('* as n'))[0]!.n);
        }
      }),
    );
    const settledSeconds = (performance.now() - started) / 1000;
    const failed = await built.db('operations').whereIn('id', ids).whereNot({ status: 'executed' }).count<{ n: string }[]>('* as n');

    // Baseline: sign and send the same number of plain transfers straight to the node, then wait for the last receipt.
    const sender = privateKeyToAccount(ANVIL_DEV_KEYS[3]!);
    let nonce = await node.client.getTransactionCount({ address: sender.address, blockTag: 'pending' });
    const fees = await node.client.estimateFeesPerGas();
    const rawStarted = performance.now();
    let last: `0x${string}` = '0x';
    for (let i = 0; i < paymentCount; i++) {
      const raw = await sender.signTransaction({
        chainId: 31337,
        type: 'eip1559',
        to: '0x000000000000000000000000000000000000bEEF',
        value: parseEther('0.0001'),
        nonce: nonce++,
        gas: 21_000n,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
      last = await node.client.sendRawTransaction({ serializedTransaction: raw });
      if (last !== keccak256(raw)) throw new Error('hash mismatch');
    }
    await node.client.waitForTransactionReceipt({ hash: last, pollingInterval: 10 });
    const rawSeconds = (performance.now() - rawStarted) / 1000;

    const line = (name: string, n: number, s: number) => `${name.padEnd(44)} ${String(n).padStart(6)} in ${s.toFixed(2).padStart(6)} s = ${(n / s).toFixed(1).padStart(8)} /s`;
    process.stdout.write(`chain bench: ${paymentCount} payments, ${agentCount} wallets, ${workerCount} settlement loops, Anvil automine, 1 confirmation\n`);
    process.stdout.write(`${line('API settlement (accepted -> executed)', paymentCount, settledSeconds)}  (not executed: ${failed[0]!.n})\n`);
    process.stdout.write(`${line('baseline: viem sendRawTransaction loop', paymentCount, rawSeconds)}\n`);
  } finally {
    await built.close();
    await database.drop();
    await node.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
