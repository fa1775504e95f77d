// agentctl chain commands for a real chain (CHAIN_RPC_URL): the development chain's bootstrap and faucet, and the
// reconciliation of on-chain balances with the ledger.
import type { Address } from '../chain/port.js';
import { CliUsageError, onDatabase, optionalFlag, requireFlag, requirePositional, type CliCommand, type CliContext } from './types.js';

async function connect(ctx: CliContext) {
  const { config } = ctx;
  if (!config.chain.rpcUrl) throw new CliUsageError('CHAIN_RPC_URL is not set: the simulated chain has no bootstrap or faucet');
  const { createChainClient, createLogger, resolveChainId } = await onDatabase();
  const log = createLogger(config.logLevel);
  const chainId = await resolveChainId(config, log);
  return { config, log, chainId, client: createChainClient(config.chain.rpcUrl, chainId) };
}

export const chainCommands: CliCommand[] = [
  {
    name: 'chain bootstrap',
    usage: 'chain bootstrap (development chain 31337 only: deploy the USDC token once, fund the relayer)',
    run: async (ctx) => {
      const { config, log, chainId, client } = await connect(ctx);
      const { bootstrapDevChain, createSealer, resolveRelayer } = await onDatabase();
      const sealer = createSealer(config.masterKey);
      const deps = { config, db: ctx.db, sealer, clock: ctx.clock, log };
      const relayer = await resolveRelayer(deps, chainId);
      return { ...(await bootstrapDevChain({ ...deps, client, chainId, relayer })) };
    },
  },
  {
    name: 'chain faucet',
    usage: 'chain faucet ADDRESS --asset USDC|ETH --amount X (development chain 31337 only)',
    run: async (ctx, args) => {
      const raw = requirePositional(args, 0, 'ADDRESS');
      const { faucet, findAsset, getAddress, parseUnits } = await onDatabase();
      if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) throw new CliUsageError('ADDRESS must be a 0x EVM address');
      const asset = requireFlag(args, 'asset').toUpperCase();
      if (asset !== 'USDC' && asset !== 'ETH') throw new CliUsageError('--asset must be USDC or ETH');
      const amount = requireFlag(args, 'amount');
      let units: bigint;
      try {
        units = parseUnits(amount, asset === 'USDC' ? 6 : 18);
      } catch {
        throw new CliUsageError('--amount must be a decimal number');
      }
      if (units <= 0n) throw new CliUsageError('--amount must be positive');
      const { config, chainId, client } = await connect(ctx);
      const usdc = await findAsset(ctx.db, 'USDC');
      const token = usdc?.contract_address ? (getAddress(usdc.contract_address) as Address) : null;
      const address = getAddress(raw) as Address;
      const txHash = await faucet({ config, client, chainId, token }, address, asset, units);
      return { address, asset, amount, tx_hash: txHash, chain_id: chainId };
    },
  },
  {
    name: 'chain reconcile',
    usage: 'chain reconcile [--agent AGENT_ID] (on-chain balances against the ledger, and the policy mirror against the agent accounts: one JSON object with the drift)',
    run: async (ctx, args) => {
      const inbound = ctx.services.inbound;
      if (!inbound) throw new CliUsageError('CHAIN_RPC_URL is not set: the simulated chain has nothing to reconcile');
      const agentId = optionalFlag(args, 'agent');
      const { findAgent } = await onDatabase();
      if (agentId !== undefined && !(/^[0-9a-f-]{36}$/i.test(agentId) && (await findAgent(ctx.db, agentId)))) throw new CliUsageError(`agent ${agentId} not found`);
      // Agent accounts (issue 24): also where the database's policy mirror differs from what the accounts enforce.
      return { ...(await inbound.reconciler.run({ agentId })), policy_drift: await ctx.services.ledger.policy.chainDrift(ctx.db, agentId) };
    },
  },
  {
    name: 'vault accrue',
    usage: "vault accrue VAULT --amount X (development chain 31337 only: transfers X of the vault's asset into the ERC-4626 vault, its yield; VAULT = vault id or address)",
    run: async (ctx, args) => {
      const ref = requirePositional(args, 0, 'VAULT');
      const { accrueDevVault, findAsset, findVault, findVaultByAddress, getAddress, parseUnits } = await onDatabase();
      const vault = /^0x[0-9a-fA-F]{40}$/.test(ref) ? await findVaultByAddress(ctx.db, ref) : /^[0-9a-f-]{36}$/i.test(ref) ? await findVault(ctx.db, ref) : undefined;
      if (!vault) throw new CliUsageError(`no vault ${ref}`);
      const asset = await findAsset(ctx.db, vault.asset_symbol);
      let units: bigint;
      try {
        units = parseUnits(requireFlag(args, 'amount'), asset!.decimals);
      } catch {
        throw new CliUsageError('--amount must be a decimal number');
      }
      if (units <= 0n) throw new CliUsageError('--amount must be positive');
      const { config, chainId, client } = await connect(ctx);
      const address = getAddress(vault.address) as Address;
      if (((await client.getCode({ address })) ?? '0x') === '0x') throw new CliUsageError(`vault ${vault.id} (${address}) is not a contract on chain ${chainId}: run agentctl chain bootstrap`);
      const txHash = await accrueDevVault({ config, client, chainId }, address, units);
      return { vault_id: vault.id, vault_address: address, asset: vault.asset_symbol, amount: requireFlag(args, 'amount'), tx_hash: txHash, chain_id: chainId };
    },
  },
];
