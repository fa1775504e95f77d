// The evm adapter's state reads: node health, blocks, balances, token transfer logs and native transfers, EIP-3009
// authorization state, and a transfer's dry run (the deposit watcher, reconciliation and x402 tracking use them).
import { viem } from '../../lib/viem.js';
import { ChainUnavailableError, type Chain } from '../port.js';
import { usdCoinAbi } from '../token.js';
import type { EvmChainDeps, EvmTransactions } from './transactions.js';
import { isNative } from './transfers.js';
import { internalTransfersOf, internalTransfersOfCallFrames, type CallFrame, type ParityTrace } from './traces.js';

type EvmReads = Pick<Chain, 'health' | 'head' | 'block' | 'balanceOf' | 'transferLogs' | 'nativeTransfers' | 'internalTransfers' | 'authorizationUsed' | 'authorizationUsedAt' | 'callTransfer'>;

export function createReads({ chainId, client }: EvmChainDeps, { node, revertOf }: EvmTransactions): EvmReads {
  /** Which trace method the node answered (null until one did). */
  let tracer: 'trace' | 'debug' | null = null;
  return {
    async health() {
      try {
        const head = await node(() => client.getBlockNumber({ cacheTime: 0 }));
        return { mode: 'evm', chain_id: chainId, state: 'ok', head_block: Number(head) };
      } catch (err) {
        return { mode: 'evm', chain_id: chainId, state: 'unreachable', head_block: null, error: err instanceof Error ? err.message.split('\n')[0]! : String(err) };
      }
    },

    async head() {
      const block = await node(() => client.getBlock({ blockTag: 'latest' }));
      return { number: block.number!, hash: block.hash!, parentHash: block.parentHash, timestamp: block.timestamp };
    },

    async block(number) {
      const block = await node(() => client.getBlock({ blockNumber: number })).catch((err: unknown) => {
        if (err instanceof ChainUnavailableError) throw err;
        return null;
      });
      return block ? { number: block.number!, hash: block.hash!, parentHash: block.parentHash, timestamp: block.timestamp } : null;
    },

    async balanceOf(address, asset) {
      if (isNative(asset)) return node(() => client.getBalance({ address }));
      return node(() => client.readContract({ address: viem().getAddress(asset.contract_address!), abi: usdCoinAbi, functionName: 'balanceOf', args: [address] }));
    },

    async transferLogs(tokens, fromBlock, toBlock) {
      if (tokens.length === 0) return [];
      const logs = await node(() => client.getContractEvents({ address: tokens, abi: usdCoinAbi, eventName: 'Transfer', fromBlock, toBlock }));
      return logs.map((l) => ({
        token: viem().getAddress(l.address),
        from: l.args.from!,
        to: l.args.to!,
        value: l.args.value!,
        txHash: l.transactionHash,
        logIndex: l.logIndex,
        blockNumber: l.blockNumber,
        blockHash: l.blockHash,
      }));
    },

    async nativeTransfers(blockNumber) {
      const block = await node(() => client.getBlock({ blockNumber, includeTransactions: true }));
      return block.transactions
        .filter((tx) => tx.to && tx.value > 0n)
        .map((tx) => ({ from: tx.from, to: viem().getAddress(tx.to!), value: tx.value, txHash: tx.hash, blockNumber: block.number!, blockHash: block.hash! }));
    },

    async internalTransfers(block) {
      // trace_block where the node has it, else Geth's callTracer, else null; the first method that answers is kept.
      const raw = client as unknown as { request(args: { method: string; params: unknown[] }): Promise<unknown> };
      const attempt = async <T>(method: string, params: unknown[]): Promise<T | null> =>
        node(() => raw.request({ method, params }) as Promise<T>).catch((err: unknown) => {
          // Transport failures stop the pass; a node that refuses the method has no such traces.
          if (err instanceof ChainUnavailableError) throw err;
          return null;
        });
      if (tracer !== 'debug') {
        const traces = await attempt<ParityTrace[]>('trace_block', [`0x${block.number.toString(16)}`]);
        if (traces !== null) {
          tracer = 'trace';
          return internalTransfersOf(traces);
        }
      }
      if (tracer !== 'trace') {
        const frames = await attempt<{ txHash: string; result: CallFrame }[]>('debug_traceBlockByHash', [block.hash, { tracer: 'callTracer' }]);
        if (frames !== null) {
          tracer = 'debug';
          return internalTransfersOfCallFrames(frames, block);
        }
      }
      return null;
    },

    async authorizationUsed(token, authorizer, nonce) {
      return node(() => client.readContract({ address: token, abi: usdCoinAbi, functionName: 'authorizationState', args: [authorizer, nonce] }));
    },

    async authorizationUsedAt(token, authorizer, nonce, fromBlock, toBlock) {
      // Both event arguments are indexed: the node filters by topic, so the range costs one indexed lookup.
      const logs = await node(() => client.getContractEvents({ address: token, abi: usdCoinAbi, eventName: 'AuthorizationUsed', args: { authorizer, nonce }, fromBlock, toBlock }));
      return logs.find((l) => !l.removed)?.blockNumber ?? null;
    },

    async callTransfer(token, from, to, amount) {
      const data = viem().encodeFunctionData({ abi: usdCoinAbi, functionName: 'transfer', args: [to, amount] });
      return revertOf(() => client.call({ to: token, data, account: from }));
    },
  };
}
