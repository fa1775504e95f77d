// Connecting the chain at start (composition root, agentctl): the adapter for CHAIN_RPC_URL, its relayer, token
// addresses from configuration, and on the development chain (31337) the bootstrap: deploy the token once, record
// it as USDC's contract address, the DeFi venues, the agent account factory and USD price feeds (issue 24), fund the
// relayer from an Anvil dev account. Refused on any other chain id.
import type { PublicClient } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { viem, viemAccounts } from '../lib/viem.js';
import type { Config } from '../config.js';
import type { Knex } from '../db/knex.js';
import { deleteNonces, findSetting, insertProtocolOnce, insertSettingOnce, setAssetContractAddress, upsertSetting, withChainLock } from '../db/repositories/chain.repository.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { findAsset } from '../db/repositories/ledger.repository.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from '../lib/crypto.js';
import type { Logger } from '../lib/logger.js';
import { DEV_CHAIN_ID, FAUCET_KEY } from './dev-accounts.js';
import { setVaultAddress } from '../db/repositories/vault.repository.js';
import { DEX_PROTOCOL, DEX_SETTING, deployDevDex, type DexContracts } from './dex.js';
import { LENDING_SETTING, deployDevLending, type LendingContracts } from './lending.js';
import { EARN_SETTING, accrueVault, deployDevRewards, deployDevVaults, type EarnContracts } from './vaults.js';
import { CUSTODY_SETTING, deployDevCustody, deployPasskeyOwnerFactory, type CustodyContracts } from './custody.js';
import { createEvmChain } from './evm/index.js';
import type { Address, Chain, Hex } from './port.js';
import { deployToken, mintToken, usdCoinAbi } from './token.js';

export interface ConnectDeps {
  config: Readonly<Config>;
  db: Knex;
  sealer: Sealer;
  clock: Clock;
  log: Logger;
}

/** A viem client with short timeouts and no retries: the settlement loops retry, and a down node must fail fast. */
export function createChainClient(rpcUrl: string, chainId: number, pollMs = 1000): PublicClient {
  const chain = viem().defineChain({ id: chainId, name: `chain ${chainId}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  return viem().createPublicClient({ chain, transport: viem().http(rpcUrl, { timeout: 5000, retryCount: 0 }), pollingInterval: Math.min(pollMs, 1000) }) as PublicClient;
}

/** The chain id: CHAIN_ID when set (checked against the node when it answers), else the node's. */
async function resolveChainId(config: Readonly<Config>, log: Logger): Promise<number> {
  const rpcUrl = config.chain.rpcUrl!;
  const probe = viem().createPublicClient({ transport: viem().http(rpcUrl, { timeout: 3000, retryCount: 0 }) });
  const fromNode = await probe.getChainId().catch((err: unknown) => {
    if (config.chain.chainId !== null) {
      log.error({ err: err instanceof Error ? err.message.split('\n')[0] : String(err) }, 'chain node unreachable at start; settling when it returns');
      return null;
    }
    throw new Error(`CHAIN_RPC_URL ${rpcUrl} did not answer eth_chainId and CHAIN_ID is not set`);
  });
  if (fromNode !== null && config.chain.chainId !== null && fromNode !== config.chain.chainId) throw new Error(`CHAIN_ID is ${config.chain.chainId} but the node at CHAIN_RPC_URL reports ${fromNode}`);
  return fromNode ?? config.chain.chainId!;
}

/** The relayer: CHAIN_RELAYER_KEY, or on the development chain a key generated once and stored sealed. */
async function resolveRelayer(deps: ConnectDeps, chainId: number): Promise<PrivateKeyAccount> {
  if (deps.config.chain.relayerKey) return viemAccounts().privateKeyToAccount(deps.config.chain.relayerKey as Hex);
  if (chainId !== DEV_CHAIN_ID) throw new Error(`CHAIN_RELAYER_KEY is required on chain ${chainId} (a relayer key is generated on the development chain ${DEV_CHAIN_ID} only)`);
  const sealed = await insertSettingOnce(deps.db, chainId, 'relayer_key', deps.sealer.seal(viemAccounts().generatePrivateKey()), deps.clock.now());
  return viemAccounts().privateKeyToAccount(deps.sealer.open(sealed) as Hex);
}

/** Builds the evm adapter, or null when CHAIN_RPC_URL is unset (the simulated chain). */
export async function connectChain(deps: ConnectDeps): Promise<Chain | null> {
  const { config, db, log } = deps;
  if (!config.chain.rpcUrl) return null;
  const chainId = await resolveChainId(config, log);
  const client = createChainClient(config.chain.rpcUrl, chainId, config.chain.pollMs);
  const relayer = await resolveRelayer(deps, chainId);
  for (const [symbol, address] of Object.entries(config.chain.assetAddresses)) await setAssetContractAddress(db, symbol, address, await readEip712Domain(client, address as Address));
  if (chainId === DEV_CHAIN_ID && config.chain.devBootstrap && !config.chain.assetAddresses.USDC) {
    // Each step finds what an earlier attempt deployed, so a node that answered slowly or dropped a call is retried.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const failed = await bootstrapDevChain({ ...deps, client, chainId, relayer }).then(
        () => null,
        (err: unknown) => (err instanceof Error ? err.message.split('\n')[0] : String(err)),
      );
      if (failed === null) break;
      if (attempt === 3) log.error({ err: failed }, 'development chain bootstrap failed; retry with agentctl chain bootstrap');
      else log.warn({ err: failed, attempt }, 'development chain bootstrap failed; trying again');
    }
  }
  log.debug({ chain_id: chainId, relayer: relayer.address, confirmations: config.chain.confirmations }, 'settling on chain');
  return createEvmChain({ config: config.chain, chainId, client, relayer, sealer: deps.sealer, clock: deps.clock, log });
}

/**
 * The EIP-712 name and version a configured token signs under (`name()`, `version()`: FiatTokenV2 has both; Base
 * Sepolia's USDC is named "USDC", not "USD Coin"). Undefined when the node cannot tell (the seeded values stay).
 */
async function readEip712Domain(client: PublicClient, token: Address): Promise<{ name: string; version: string } | undefined> {
  try {
    const [name, version] = await Promise.all([
      client.readContract({ address: token, abi: usdCoinAbi, functionName: 'name' }),
      client.readContract({ address: token, abi: usdCoinAbi, functionName: 'version' }),
    ]);
    return { name, version };
  } catch {
    return undefined;
  }
}

export interface BootstrapResult {
  chain_id: number;
  token_address: string;
  deployed: boolean;
  dex: DexContracts;
  earn: EarnContracts;
  lending: LendingContracts;
  /** Agent accounts (issue 24): the factory and the USD price feeds (updater: the faucet). */
  custody: CustodyContracts;
  relayer: string;
  relayer_funded_wei: string;
}

function faucetWallet(rpcUrl: string, chainId: number) {
  const client = createChainClient(rpcUrl, chainId);
  return viem().createWalletClient({ account: viemAccounts().privateKeyToAccount(FAUCET_KEY), chain: client.chain, transport: viem().http(rpcUrl, { timeout: 10_000, retryCount: 0 }) });
}

/**
 * Development chain only: deploys the token unless the recorded one still has code (a fresh Anvil has none), records
 * it as USDC's contract address, and tops the relayer up to 100 ETH from Anvil's first account. One process at a
 * time (an advisory lock), so two workers starting together deploy once.
 */
export async function bootstrapDevChain(deps: ConnectDeps & { client: PublicClient; chainId: number; relayer: PrivateKeyAccount }): Promise<BootstrapResult> {
  const { db, client, chainId, relayer, config } = deps;
  if (chainId !== DEV_CHAIN_ID) throw new Error(`the development bootstrap runs on chain ${DEV_CHAIN_ID} only; this node is chain ${chainId}`);
  if (config.nodeEnv === 'production') throw new Error('the development bootstrap is refused when NODE_ENV=production');
  return withChainLock(db, async (trx) => {
    const wallet = faucetWallet(config.chain.rpcUrl!, chainId);
    let token = (await findSetting(trx, chainId, 'usdc_token')) as Address | undefined;
    const hasCode = token ? ((await client.getCode({ address: token })) ?? '0x') !== '0x' : false;
    let deployed = false;
    if (!token || !hasCode) {
      // A recorded token without code means a fresh node: its account nonces start again from the node's counts.
      if (token) await deleteNonces(trx, chainId);
      token = await deployToken(wallet, client);
      await upsertSetting(trx, chainId, 'usdc_token', token, deps.clock.now());
      deployed = true;
      deps.log.debug({ token }, 'development chain: token deployed');
    }
    const usdc = await findAsset(trx, 'USDC');
    if (usdc?.contract_address !== token) await setAssetContractAddress(trx, 'USDC', token);
    // The conversion venue (issue 16): tokens, Uniswap v2 pairs and the router (bound to this relayer), redeployed
    // with a new token or relayer.
    const recorded = await findSetting(trx, chainId, DEX_SETTING);
    let dex = recorded ? (JSON.parse(recorded) as DexContracts) : null;
    const dexHasCode = dex && dex.tokens.USDC === token && dex.relayer === relayer.address ? ((await client.getCode({ address: dex.router })) ?? '0x') !== '0x' : false;
    if (!dex || !dexHasCode) {
      dex = await deployDevDex(wallet, client, token, relayer.address);
      await upsertSetting(trx, chainId, DEX_SETTING, JSON.stringify(dex), deps.clock.now());
      deps.log.info({ factory: dex.factory, router: dex.router, pairs: dex.pairs }, 'development chain: Uniswap v2 pairs deployed and seeded');
    }
    for (const [symbol, address] of Object.entries(dex.tokens)) if (symbol !== 'USDC') await setAssetContractAddress(trx, symbol, address);
    await insertProtocolOnce(trx, { id: DEX_PROTOCOL, name: 'Uniswap v2', kinds: ['conversion'], asset_symbols: Object.keys(dex.tokens) });
    // Earn (issue 16): ERC-4626 vaults for the seeded USDC vault rows, and the router acting on the wallets' permits.
    const recordedEarn = await findSetting(trx, chainId, EARN_SETTING);
    let earn = recordedEarn && dexHasCode ? (JSON.parse(recordedEarn) as EarnContracts) : null;
    if (!earn || ((await client.getCode({ address: earn.router })) ?? '0x') === '0x') {
      earn = await deployDevVaults(wallet, client, dex.tokens, relayer.address);
      await upsertSetting(trx, chainId, EARN_SETTING, JSON.stringify(earn), deps.clock.now());
      deps.log.info({ router: earn.router, vaults: earn.vaults }, 'development chain: ERC-4626 vaults deployed');
    } else if (!earn.rewards || earn.relayer !== relayer.address) {
      // Vaults recorded before the rewards distributor (or for another relayer): add the distributor only.
      earn = { ...earn, rewards: await deployDevRewards(wallet, client, dex.tokens, relayer.address) };
      await upsertSetting(trx, chainId, EARN_SETTING, JSON.stringify(earn), deps.clock.now());
      deps.log.info({ distributor: earn.rewards!.distributor }, 'development chain: rewards distributor deployed');
    }
    for (const [vaultId, address] of Object.entries(earn.vaults)) await setVaultAddress(trx, vaultId, address);
    // Borrow: Morpho Blue, its WETH/USDC market and the BorrowRouter (bound to this relayer).
    const recordedLending = await findSetting(trx, chainId, LENDING_SETTING);
    let lending = recordedLending && dexHasCode ? (JSON.parse(recordedLending) as LendingContracts) : null;
    if (!lending || lending.relayer !== relayer.address || !lending.router || ((await client.getCode({ address: lending.morpho })) ?? '0x') === '0x') {
      lending = await deployDevLending(wallet, client, dex.tokens, relayer.address);
      await upsertSetting(trx, chainId, LENDING_SETTING, JSON.stringify(lending), deps.clock.now());
      deps.log.info({ morpho: lending.morpho, market: lending.market.id }, 'development chain: Morpho Blue market deployed');
    }
    // Custody (issue 24): the USD price feeds the accounts' caps read, updated by the faucet (not a server key), and
    // the account factory. Redeployed on a fresh node (no code at the recorded factory).
    const recordedCustody = await findSetting(trx, chainId, CUSTODY_SETTING);
    let custody = recordedCustody ? (JSON.parse(recordedCustody) as CustodyContracts) : null;
    if (!custody || ((await client.getCode({ address: custody.factory })) ?? '0x') === '0x') {
      custody = await deployDevCustody(wallet, client);
      await upsertSetting(trx, chainId, CUSTODY_SETTING, JSON.stringify(custody), deps.clock.now());
      deps.log.info({ factory: custody.factory, feeds: custody.feeds }, 'development chain: agent account factory and price feeds deployed');
    } else if (!custody.passkeyOwnerFactory || ((await client.getCode({ address: custody.passkeyOwnerFactory })) ?? '0x') === '0x') {
      // Recorded before the passkey signers (issue 27): their factory only.
      custody = { ...custody, passkeyOwnerFactory: await deployPasskeyOwnerFactory(wallet, client) };
      await upsertSetting(trx, chainId, CUSTODY_SETTING, JSON.stringify(custody), deps.clock.now());
      deps.log.info({ passkey_owner_factory: custody.passkeyOwnerFactory }, 'development chain: passkey signer factory deployed');
    }
    const target = viem().parseEther('100');
    const balance = await client.getBalance({ address: relayer.address });
    let funded = 0n;
    if (balance < target / 10n) {
      const hash = await wallet.sendTransaction({ to: relayer.address, value: target - balance, account: wallet.account, chain: wallet.chain });
      await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      funded = target - balance;
    }
    return { chain_id: chainId, token_address: token, deployed, dex, earn, lending, custody, relayer: relayer.address, relayer_funded_wei: funded.toString() };
  });
}

/** Development chain only: the yield of an ERC-4626 vault, `units` of its asset minted into it (agentctl vault accrue). */
export async function accrueDevVault(deps: { config: Readonly<Config>; client: PublicClient; chainId: number }, vault: Address, units: bigint): Promise<Hex> {
  if (deps.chainId !== DEV_CHAIN_ID) throw new Error(`vault accrue runs on the development chain ${DEV_CHAIN_ID} only; this node is chain ${deps.chainId}`);
  if (deps.config.nodeEnv === 'production') throw new Error('vault accrue is refused when NODE_ENV=production');
  return accrueVault(faucetWallet(deps.config.chain.rpcUrl!, deps.chainId), deps.client, vault, units);
}

/** Development chain only: mints USDC (the faucet deployed the token) or sends ETH to `address`. */
export async function faucet(deps: { config: Readonly<Config>; client: PublicClient; chainId: number; token: Address | null }, address: Address, asset: 'USDC' | 'ETH', units: bigint): Promise<Hex> {
  if (deps.chainId !== DEV_CHAIN_ID) throw new Error(`the faucet runs on the development chain ${DEV_CHAIN_ID} only; this node is chain ${deps.chainId}`);
  if (deps.config.nodeEnv === 'production') throw new Error('the faucet is refused when NODE_ENV=production');
  const wallet = faucetWallet(deps.config.chain.rpcUrl!, deps.chainId);
  if (asset === 'USDC') {
    if (!deps.token) throw new Error('no USDC token on this chain yet: run agentctl chain bootstrap');
    return mintToken(wallet, deps.client, deps.token, address, units);
  }
  const hash = await wallet.sendTransaction({ to: address, value: units, account: wallet.account, chain: wallet.chain });
  await deps.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return hash;
}

export { resolveChainId, resolveRelayer };

/**
 * The embedded demo agent on the development chain: the same 1000 USDC and 1 ETH the ledger credits it
 * (setupDemoAgent) are put on chain, so the README's payment settles.
 */
export async function fundDemoWalletOnDevChain(deps: { config: Readonly<Config>; db: Knex; chainId: number }, agentId: string): Promise<void> {
  if (deps.chainId !== DEV_CHAIN_ID || !deps.config.chain.rpcUrl) return;
  const wallet = await findWalletByAgent(deps.db, agentId);
  const usdc = await findAsset(deps.db, 'USDC');
  if (!wallet?.address || !usdc?.contract_address) return;
  const client = createChainClient(deps.config.chain.rpcUrl, deps.chainId);
  const target = { config: deps.config, client, chainId: deps.chainId, token: usdc.contract_address as Address };
  await faucet(target, wallet.address as Address, 'USDC', viem().parseUnits('1000', 6));
  await faucet(target, wallet.address as Address, 'ETH', viem().parseEther('1'));
}
