// The simulated chain (the embedded default and the sandbox): a transaction hash derived from the operation id,
// Base's chain id, block numbers from the clock; a submitted operation is confirmed SETTLEMENT_DELAY_MS later and
// its registered settler moves the ledger money. No node, no reads: balances live in the ledger only.
import { viem } from '../lib/viem.js';
import type { Clock } from '../lib/clock.js';
import type { Chain } from './port.js';

export const SIMULATED_CHAIN_ID = 8453;

/** The simulated chain's block at a time (Base: a block every 2 s since its genesis), null before settlement. */
const BASE_GENESIS_MS = Date.UTC(2023, 5, 15);
export const simulatedBlock = (at: Date | null): number | null => (at && at.getTime() > BASE_GENESIS_MS ? Math.floor((at.getTime() - BASE_GENESIS_MS) / 2000) : null);

/** The simulated chain's transaction hash: deterministic per operation. */
export const txHashOf = (operationId: string): string => viem().keccak256(viem().toHex(`agent-api:tx:${operationId}`));

export function createSimulatedChain(deps: { clock: Clock; settlementDelayMs: number }): Chain {
  return {
    mode: 'simulated',
    chainId: SIMULATED_CHAIN_ID,
    dex: null,
    earn: null,
    lending: null,
    custody: null,
    settlesOnChain: () => false,
    gasReserve: () => 0n,
    async submit(_trx, op) {
      return { ok: true, txHash: txHashOf(op.id), recheckAt: new Date(deps.clock.now().getTime() + deps.settlementDelayMs) };
    },
    async track(_trx, op) {
      return { state: 'confirmed', txHash: op.tx_hash ?? txHashOf(op.id), feeUnits: 0n, details: {} };
    },
    pump: async () => 0,
    async onchain(_db, op, walletAddress) {
      return {
        chain_id: SIMULATED_CHAIN_ID,
        wallet_address: walletAddress,
        from: op.tx_hash ? walletAddress : null,
        to: op.tx_hash ? op.to_address : null,
        to_address: op.to_address,
        token_address: null,
        tx_hash: op.tx_hash,
        block_number: simulatedBlock(op.executed_at ?? op.failed_at),
        block_hash: null,
        log_index: null,
        gas_used: null,
        effective_gas_price: null,
      };
    },
    health: async () => ({ mode: 'simulated', chain_id: SIMULATED_CHAIN_ID, state: 'ok', head_block: simulatedBlock(deps.clock.now()) }),
    head: async () => null,
    block: async () => null,
    balanceOf: async () => {
      throw new Error('the simulated chain has no balances: read the ledger');
    },
    transferLogs: async () => [],
    nativeTransfers: async () => [],
    internalTransfers: async () => [],
    authorizationUsed: async () => false,
    authorizationUsedAt: async () => null,
    // Nothing to call: simulate reports `simulate_onchain_not_run` on the simulated chain.
    callTransfer: async () => null,
  };
}
