// The read side of the `Chain` port: what the deposit watcher, reconciliation and x402 settlement tracking use
// (the evm adapter implements it; the simulated chain has nothing to read).
import type { Chain } from './port.js';

export type ChainReads = Pick<
  Chain,
  'mode' | 'chainId' | 'head' | 'block' | 'balanceOf' | 'transferLogs' | 'nativeTransfers' | 'internalTransfers' | 'authorizationUsed' | 'authorizationUsedAt' | 'callTransfer' | 'earn' | 'lending'
>;
