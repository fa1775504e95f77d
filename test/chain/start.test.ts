// Acceptance 1 of issue 11: `npm start` with CHAIN_RPC_URL on the development chain deploys the token once,
// records it as USDC's address, funds the demo wallet on chain, and serves the API; agentctl's chain bootstrap and
// faucet work there and are refused on any other chain id; production refuses the dev bootstrap.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAddress, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ANVIL_DEV_KEYS } from '../../src/chain/dev-accounts.js';
import { usdCoinAbi } from '../../src/chain/token.js';
import { startAnvil, type AnvilNode } from '../helpers/anvil.js';
import { createIsolatedDatabase, randomAddress } from '../helpers/chain.js';
import { agentctl, startServerProcess, type ServerProcess } from '../helpers/process.js';

const DEMO_LINE = /^demo agent: x-agent-id=([0-9a-f-]{36}) x-api-key=(\S+)$/;
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

describe('npm start on the development chain', function () {
  this.timeout(240_000);
  let node: AnvilNode;
  let dataDir: string;
  let current: ServerProcess | null = null;
  const relayerKey = generatePrivateKey();
  const env = () => ({
    DATABASE_URL: undefined,
    REDIS_URL: undefined,
    REDIS_PREFIX: undefined,
    MASTER_KEY: undefined,
    DATA_DIR: dataDir,
    NODE_ENV: 'development',
    LOG_LEVEL: 'debug',
    CHAIN_RPC_URL: node.rpcUrl,
    CHAIN_POLL_MS: '100',
    CHAIN_RELAYER_KEY: relayerKey,
  });
  const logs: string[] = [];

  before(async () => {
    node = await startAnvil();
    dataDir = mkdtempSync(join(tmpdir(), 'agent-api-chain-'));
  });
  after(async () => {
    await current?.stop('SIGKILL');
    await node?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('deploys the token once, serves the API, settles a demo payment on chain, and keeps the token across a restart', async () => {
    current = await startServerProcess(env(), { timeoutMs: 90_000 });
    const [, agentId, apiKey] = DEMO_LINE.exec(current.stdoutLines.find((l) => l.startsWith('demo agent:')) ?? '') ?? [];
    expect(agentId, current.stdoutLines.join('\n') + current.stderr()).to.be.a('string');
    const headers = { 'x-agent-id': agentId!, 'x-api-key': apiKey!, 'content-type': 'application/json' };
    const get = async (path: string) => (await fetch(`${current!.baseUrl}${path}`, { headers })).json() as Promise<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any

    const assets = await get('/v1/agent/assets?limit=100');
    const usdc = assets.items.find((a: { symbol: string }) => a.symbol === 'USDC');
    expect(usdc.contract_address).to.not.equal(BASE_USDC);
    const token = getAddress(usdc.contract_address);
    expect(await node.client.getCode({ address: token })).to.match(/^0x[0-9a-f]{100,}$/);
    expect(await get('/readyz')).to.deep.include({ chain: { mode: 'evm', chain_id: 31337, state: 'ok', head_block: Number(await node.client.getBlockNumber({ cacheTime: 0 })) } });

    const deposit = await get('/v1/agent/deposit-address');
    const wallet = getAddress(deposit.deposit_address.address);
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'balanceOf', args: [wallet] })).to.equal(parseUnits('1000', 6));
    // The deposit watcher credits the on-chain funds to the ledger once (no separate ledger funding).
    let balances: Array<{ asset_symbol: string; available: string }> = [];
    for (let i = 0; i < 200 && !(balances.find((b) => b.asset_symbol === 'USDC')?.available === '1000' && balances.find((b) => b.asset_symbol === 'ETH')?.available === '1'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      balances = (await get('/v1/agent/balances')).items;
    }
    expect(balances.find((b) => b.asset_symbol === 'USDC')).to.include({ available: '1000' });
    expect(balances.find((b) => b.asset_symbol === 'ETH')).to.include({ available: '1' });

    const to = randomAddress();
    const paid = await fetch(`${current.baseUrl}/v1/agent/payments`, {
      method: 'POST',
      headers: { ...headers, 'Idempotency-Key': 'readme-payment-1' },
      body: JSON.stringify({ to, asset: 'USDC', amount: '12.5' }),
    });
    const { operation_id } = (await paid.json()) as { operation_id: string };
    expect(paid.status).to.equal(200);
    let status = 'accepted';
    for (let i = 0; i < 300 && status !== 'executed' && status !== 'execution_failed'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await get(`/v1/agent/operations/${operation_id}`)).operation.status;
    }
    expect(status).to.equal('executed');
    const paymentTx = (await get(`/v1/agent/operations/${operation_id}?include=onchain`)).operation.onchain.tx_hash as `0x${string}`;
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'balanceOf', args: [to] })).to.equal(parseUnits('12.5', 6));

    expect(await current.stop()).to.equal(0);
    logs.push(current.stdoutLines.join('\n'), current.stderr());
    current = await startServerProcess(env(), { timeoutMs: 90_000 });
    const again = (await (await fetch(`${current.baseUrl}/v1/agent/assets?limit=100`, { headers })).json()) as { items: { symbol: string; contract_address: string }[] };
    expect(getAddress(again.items.find((a) => a.symbol === 'USDC')!.contract_address)).to.equal(token);
    expect(await current.stop()).to.equal(0);
    logs.push(current.stdoutLines.join('\n'), current.stderr());
    current = null;
    // The relayer (funded by the bootstrap) settled the payment; its key never reached the logs.
    expect(logs.join('\n')).to.contain('settling on chain');
    expect(logs.join('\n')).to.not.contain(relayerKey.slice(2));
    // Its three transactions: the demo account's deployment, the relay of its owner's policy, and the payment, a
    // lane call to the account (issue 24; an externally owned wallet needed only the last).
    const relayer = privateKeyToAccount(relayerKey).address;
    expect(await node.client.getTransactionCount({ address: relayer })).to.equal(3);
    const payment = await node.client.getTransactionReceipt({ hash: paymentTx });
    expect([getAddress(payment.from), getAddress(payment.to!)]).to.deep.equal([relayer, wallet]);

    // agentctl against the same data (default log level: stdout stays one JSON object): bootstrap is a no-op now;
    // the faucet mints and sends ETH.
    const ctlEnv = { ...env(), LOG_LEVEL: undefined };
    const bootstrap = await agentctl(ctlEnv, ['chain', 'bootstrap']);
    expect(bootstrap.code, bootstrap.stderr).to.equal(0);
    expect(JSON.parse(bootstrap.stdout)).to.include({ chain_id: 31337, token_address: token, deployed: false });
    const outsider = randomAddress();
    const minted = await agentctl(ctlEnv, ['chain', 'faucet', outsider, '--asset', 'USDC', '--amount', '5']);
    expect(minted.code, minted.stderr).to.equal(0);
    const sent = await agentctl(ctlEnv, ['chain', 'faucet', outsider, '--asset', 'ETH', '--amount', '0.5']);
    expect(sent.code, sent.stderr).to.equal(0);
    expect(await node.client.readContract({ address: token, abi: usdCoinAbi, functionName: 'balanceOf', args: [outsider] })).to.equal(parseUnits('5', 6));
    expect(await node.client.getBalance({ address: outsider })).to.equal(parseUnits('0.5', 18));
  });

  it('refuses the bootstrap and the faucet on another chain id', async () => {
    const other = await startAnvil({ chainId: 1337 });
    const database = await createIsolatedDatabase();
    try {
      const otherEnv = { ...env(), DATABASE_URL: database.url, CHAIN_RPC_URL: other.rpcUrl, CHAIN_RELAYER_KEY: ANVIL_DEV_KEYS[2] };
      const bootstrap = await agentctl(otherEnv, ['chain', 'bootstrap']);
      expect(bootstrap.code).to.equal(1);
      expect(bootstrap.stderr).to.contain('chain 31337 only; this node is chain 1337');
      const faucet = await agentctl(otherEnv, ['chain', 'faucet', randomAddress(), '--asset', 'ETH', '--amount', '1']);
      expect(faucet.code).to.equal(1);
      expect(faucet.stderr).to.contain('development chain 31337 only');
      // USDC keeps its configured (Base) address there: nothing was deployed.
      expect(await other.client.getBlockNumber({ cacheTime: 0 })).to.equal(0n);
    } finally {
      await other.stop();
      await database.drop();
    }
  });

  it('refuses the development bootstrap and fewer than one confirmation in production', () => {
    const production = {
      NODE_ENV: 'production',
      BASE_URL: 'https://api.example.com',
      DATABASE_URL: 'postgres://x@127.0.0.1/db',
      REDIS_URL: 'redis://127.0.0.1:6379',
      MASTER_KEY: 'k'.repeat(40),
      SMTP_URL: 'smtp://mail.example.com:25',
      CHAIN_RPC_URL: 'http://127.0.0.1:8545',
      CHAIN_RELAYER_KEY: ANVIL_DEV_KEYS[1],
    };
    const problems = (extra: Record<string, string>) => {
      try {
        loadConfig({ ...production, ...extra }, () => {});
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems({})).to.deep.equal([]);
    expect(problems({ CHAIN_CONFIRMATIONS: '0' })).to.deep.equal(['CHAIN_CONFIRMATIONS must be at least 1 in production']);
    expect(problems({ CHAIN_DEV_BOOTSTRAP: 'true' })).to.deep.equal(['CHAIN_DEV_BOOTSTRAP is refused when NODE_ENV=production']);
    const { CHAIN_RELAYER_KEY: _, ...noRelayer } = production;
    expect(() => loadConfig(noRelayer, () => {})).to.throw(ConfigError, 'CHAIN_RELAYER_KEY is required in production');
    // Development accepts 0 confirmations (the receipt alone) and defaults to 1.
    expect(loadConfig({ CHAIN_RPC_URL: 'http://127.0.0.1:8545' }, () => {}).chain.confirmations).to.equal(1);
  });
});
