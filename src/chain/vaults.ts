// Earn on chain (issue 16): ERC-4626 vaults (contracts/DevVault.sol, OpenZeppelin's ERC4626) deployed by the
// development bootstrap for some of the ledger's vault rows (whose `address` then becomes the vault's), and
// contracts/EarnRouter.sol, through which the relayer deposits, redeems and moves a wallet's money on its permit.
// `createEarnVenue` reads the wallet's shares and the vault's own conversions for positions and opportunities.
import { viem } from '../lib/viem.js';
import type { Account, Chain as ViemChain, PublicClient, Transport, WalletClient } from 'viem';
import { devVaultAbi, devVaultBytecode } from '../../contracts/artifacts/DevVault.js';
import { earnRouterAbi, earnRouterBytecode } from '../../contracts/artifacts/EarnRouter.js';
import { rewardsDistributorAbi, rewardsDistributorBytecode } from '../../contracts/artifacts/RewardsDistributor.js';
import type { Db } from '../db/knex.js';
import { findSetting } from '../db/repositories/chain.repository.js';
import type { Address, Hex } from './hex.js';
import { deployContract, mintToken } from './token.js';

export { devVaultAbi, earnRouterAbi, rewardsDistributorAbi };

/** The chain_settings key holding the deployed vaults (JSON). */
export const EARN_SETTING = 'earn';

export interface EarnContracts {
  /** The only account the router lets act on a wallet's permit. */
  relayer: Address;
  router: Address;
  /** On-chain vault address by the ledger's vault id. */
  vaults: Record<string, Address>;
  /** contracts/RewardsDistributor.sol: pays the rewards of positions in these vaults (absent on older bootstraps). */
  rewards?: { distributor: Address; asset: string; token: Address };
}

export interface EarnVenue {
  contracts(db: Db): Promise<EarnContracts | null>;
  /** Whether the vault at `address` is one of this chain's ERC-4626 vaults. */
  isOnchain(db: Db, address: string): Promise<boolean>;
  router(db: Db): Promise<Address | null>;
  /** The rewards distributor and the asset it pays, if deployed. */
  rewards(db: Db): Promise<EarnContracts['rewards'] | null>;
  sharesOf(vault: Address, owner: Address): Promise<bigint>;
  totalAssets(vault: Address): Promise<bigint>;
  convertToAssets(vault: Address, shares: bigint): Promise<bigint>;
  previewDeposit(vault: Address, assets: bigint): Promise<bigint>;
  previewWithdraw(vault: Address, assets: bigint): Promise<bigint>;
  previewRedeem(vault: Address, shares: bigint): Promise<bigint>;
}

export function createEarnVenue(deps: { client: PublicClient; chainId: number }): EarnVenue {
  const { client, chainId } = deps;
  let cached: EarnContracts | null = null;
  const read = <F extends 'balanceOf' | 'totalAssets' | 'convertToAssets' | 'previewDeposit' | 'previewWithdraw' | 'previewRedeem'>(vault: Address, functionName: F, args: readonly unknown[]) =>
    client.readContract({ address: vault, abi: devVaultAbi, functionName, args } as never) as Promise<bigint>;

  const venue: EarnVenue = {
    async contracts(db) {
      if (cached) return cached;
      const raw = await findSetting(db, chainId, EARN_SETTING);
      if (!raw) return null;
      cached = JSON.parse(raw) as EarnContracts;
      return cached;
    },
    async isOnchain(db, address) {
      const c = await venue.contracts(db);
      return c !== null && Object.values(c.vaults).some((a) => a.toLowerCase() === address.toLowerCase());
    },
    router: async (db) => (await venue.contracts(db))?.router ?? null,
    rewards: async (db) => (await venue.contracts(db))?.rewards ?? null,
    sharesOf: (vault, owner) => read(vault, 'balanceOf', [owner]),
    totalAssets: (vault) => read(vault, 'totalAssets', []),
    convertToAssets: (vault, shares) => read(vault, 'convertToAssets', [shares]),
    previewDeposit: (vault, assets) => read(vault, 'previewDeposit', [assets]),
    previewWithdraw: (vault, assets) => read(vault, 'previewWithdraw', [assets]),
    previewRedeem: (vault, shares) => read(vault, 'previewRedeem', [shares]),
  };
  return venue;
}

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/** The ledger's vault rows put on chain by the development bootstrap (the seeded USDC vaults of 0005_defi). */
export const DEV_VAULTS: { vaultId: string; name: string; symbol: string; asset: string; decimalsOffset: number }[] = [
  { vaultId: '6f1d2a10-0000-4000-8000-000000000001', name: 'Morpho USDC Prime', symbol: 'mUSDCp', asset: 'USDC', decimalsOffset: 6 },
  { vaultId: '6f1d2a10-0000-4000-8000-000000000002', name: 'Aave v3 USDC', symbol: 'aUSDCv', asset: 'USDC', decimalsOffset: 6 },
];

/** Development chain only: deploys the router and one DevVault per DEV_VAULTS entry over the given asset tokens. */
export async function deployDevVaults(wallet: Wallet, client: PublicClient, tokens: Record<string, Address>, relayer: Address): Promise<EarnContracts> {
  const router = await deployContract(wallet, client, { abi: earnRouterAbi, bytecode: earnRouterBytecode, args: [relayer], account: wallet.account, chain: wallet.chain });
  const vaults: Record<string, Address> = {};
  for (const v of DEV_VAULTS) {
    vaults[v.vaultId] = await deployContract(wallet, client, {
      abi: devVaultAbi,
      bytecode: devVaultBytecode,
      args: [tokens[v.asset]!, v.name, v.symbol, v.decimalsOffset],
      account: wallet.account,
      chain: wallet.chain,
    });
  }
  return { relayer, router, vaults, rewards: await deployDevRewards(wallet, client, tokens, relayer) };
}

/** Development chain only: the rewards distributor paying USDC (the seeded vaults' reward asset), funded by the faucet. */
export async function deployDevRewards(wallet: Wallet, client: PublicClient, tokens: Record<string, Address>, relayer: Address): Promise<NonNullable<EarnContracts['rewards']>> {
  const distributor = await deployContract(wallet, client, {
    abi: rewardsDistributorAbi,
    bytecode: rewardsDistributorBytecode,
    args: [tokens.USDC!, relayer],
    account: wallet.account,
    chain: wallet.chain,
  });
  await mintToken(wallet, client, tokens.USDC!, distributor, DEV_REWARDS_FUNDING);
  return { distributor, asset: 'USDC', token: tokens.USDC! };
}

/** What the development bootstrap funds the rewards distributor with: 1,000,000 USDC. */
export const DEV_REWARDS_FUNDING = 1_000_000_000_000n;

/** `agentctl vault accrue`: the yield source of a development vault, `amount` of its asset minted into it by the faucet. */
export async function accrueVault(wallet: Wallet, client: PublicClient, vault: Address, units: bigint): Promise<Hex> {
  const asset = viem().getAddress(await client.readContract({ address: vault, abi: devVaultAbi, functionName: 'asset' }));
  return mintToken(wallet, client, asset, vault, units);
}
