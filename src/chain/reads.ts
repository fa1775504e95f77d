// The chain reads the deposit watcher, x402 settlement tracking and reconcile need, as functions over a viem
// PublicClient: the evm adapter's read methods (head, block, balanceOf, transferLogs, nativeTransfers,
// authorizationUsed) can delegate here.
import { getAddress, type PublicClient } from 'viem';
import { usdCoinAbi } from './token.js';
import type { Address, BlockRef, Chain, ChainAsset, Hex, NativeTransfer, TransferLog } from './port.js';

/** The read side of the `Chain` port. */
export type ChainReads = Pick<Chain, 'mode' | 'chainId' | 'head' | 'block' | 'balanceOf' | 'transferLogs' | 'nativeTransfers' | 'authorizationUsed'>;

const ref = (b: { number: bigint | null; hash: Hex | null; parentHash: Hex; timestamp: bigint }): BlockRef => ({ number: b.number!, hash: b.hash!, parentHash: b.parentHash, timestamp: b.timestamp });

export async function readHead(client: PublicClient): Promise<BlockRef> {
  return ref(await client.getBlock({ blockTag: 'latest' }));
}

/** The block at `number`, or null when the node has none (beyond its head). */
export async function readBlock(client: PublicClient, number: bigint): Promise<BlockRef | null> {
  try {
    return ref(await client.getBlock({ blockNumber: number }));
  } catch (err) {
    if ((err as { name?: string }).name === 'BlockNotFoundError') return null;
    throw err;
  }
}

export async function readBalance(client: PublicClient, address: Address, asset: Pick<ChainAsset, 'contract_address'>): Promise<bigint> {
  if (asset.contract_address === null) return client.getBalance({ address });
  return client.readContract({ address: getAddress(asset.contract_address), abi: usdCoinAbi, functionName: 'balanceOf', args: [address] });
}

export async function readTransferLogs(client: PublicClient, tokens: Address[], fromBlock: bigint, toBlock: bigint): Promise<TransferLog[]> {
  if (tokens.length === 0) return [];
  const logs = await client.getContractEvents({ address: tokens, abi: usdCoinAbi, eventName: 'Transfer', fromBlock, toBlock, strict: true });
  return logs.map((l) => ({ token: getAddress(l.address), from: l.args.from, to: l.args.to, value: l.args.value, txHash: l.transactionHash, logIndex: l.logIndex, blockNumber: l.blockNumber, blockHash: l.blockHash }));
}

/** Value transfers of the transactions in one block (value > 0, not contract creations). */
export async function readNativeTransfers(client: PublicClient, blockNumber: bigint): Promise<NativeTransfer[]> {
  const block = await client.getBlock({ blockNumber, includeTransactions: true });
  return block.transactions
    .filter((tx) => tx.to && tx.value > 0n)
    .map((tx) => ({ from: getAddress(tx.from), to: getAddress(tx.to!), value: tx.value, txHash: tx.hash, blockNumber: block.number!, blockHash: block.hash! }));
}

export async function readAuthorizationUsed(client: PublicClient, token: Address, authorizer: Address, nonce: Hex): Promise<boolean> {
  return client.readContract({ address: token, abi: usdCoinAbi, functionName: 'authorizationState', args: [authorizer, nonce] });
}

/** The read methods bound to one client (the evm adapter's, or a reader of its own). */
export function createChainReads(client: PublicClient, chainId: number): ChainReads {
  return {
    mode: 'evm',
    chainId,
    head: () => readHead(client),
    block: (n) => readBlock(client, n),
    balanceOf: (address, asset) => readBalance(client, address, asset),
    transferLogs: (tokens, from, to) => readTransferLogs(client, tokens, from, to),
    nativeTransfers: (n) => readNativeTransfers(client, n),
    authorizationUsed: (token, authorizer, nonce) => readAuthorizationUsed(client, token, authorizer, nonce),
  };
}
