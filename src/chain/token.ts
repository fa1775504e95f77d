// The USDC-like token of development chains (contracts/UsdCoin.sol): deploy, mint, and the EIP-3009 typed data.
import { viem } from '../lib/viem.js';
import type { Account, Chain as ViemChain, PublicClient, Transport, WalletClient } from 'viem';
import { usdCoinAbi, usdCoinBytecode } from '../../contracts/artifacts/UsdCoin.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../x402/signing.js';
import type { Address, Hex } from './hex.js';

export { usdCoinAbi };

/** EIP-712 types of EIP-3009 `transferWithAuthorization` (FiatTokenV2 and @x402/evm use the same). */
export const transferWithAuthorizationTypes = TRANSFER_WITH_AUTHORIZATION_TYPES;

export interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** The EIP-712 domain of a USDC-like token (name "USD Coin", version "2" unless the asset row says otherwise). */
export const tokenDomain = (chainId: number, token: Address, name = 'USD Coin', version = '2') => ({ name, version, chainId, verifyingContract: token });

type Wallet = WalletClient<Transport, ViemChain | undefined, Account>;

/** Deploys the token from `deployer` (who becomes its owner and minter); resolves with its address once mined. */
export async function deployToken(wallet: Wallet, client: PublicClient): Promise<Address> {
  const hash = await wallet.deployContract({ abi: usdCoinAbi, bytecode: usdCoinBytecode, account: wallet.account, chain: wallet.chain });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`token deployment failed (tx ${hash})`);
  return viem().getAddress(receipt.contractAddress);
}

/** Deploys any contract from `wallet`; resolves with its address once mined. */
export async function deployContract(wallet: Wallet, client: PublicClient, args: Parameters<Wallet['deployContract']>[0]): Promise<Address> {
  const hash = await wallet.deployContract(args);
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`deployment failed (tx ${hash})`);
  return viem().getAddress(receipt.contractAddress);
}

/** Resolves once the transaction `hash` resolves to is mined with status success (throws on a revert). */
export async function waitMined(client: PublicClient, hash: Promise<Hex>): Promise<void> {
  const receipt = await client.waitForTransactionReceipt({ hash: await hash, pollingInterval: 50 });
  if (receipt.status !== 'success') throw new Error(`transaction ${receipt.transactionHash} reverted`);
}

/** Mints `value` base units to `to` (the deployer only); resolves with the mined transaction's hash. */
export async function mintToken(wallet: Wallet, client: PublicClient, token: Address, to: Address, value: bigint): Promise<Hex> {
  const hash = await wallet.writeContract({ address: token, abi: usdCoinAbi, functionName: 'mint', args: [to, value], account: wallet.account, chain: wallet.chain });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== 'success') throw new Error(`mint failed (tx ${hash})`);
  return hash;
}
