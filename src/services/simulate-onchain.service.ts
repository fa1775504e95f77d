// Simulate `depth: onchain` (issue 26, item 7): in evm mode, an eth_call of the token transfer a write's settlement
// would make from the agent's wallet; 503 agent_api_chain_unavailable when the node does not answer.
import { ChainUnavailableError, type Address, type Chain } from '../chain/port.js';
import type { Db } from '../db/knex.js';
import { findWalletByAgent } from '../db/repositories/agent.repository.js';
import { ApiError } from '../lib/errors.js';
import { parseAmount } from '../lib/money.js';
import type { LedgerService } from './ledger/ledger.js';

export type OnchainCheck = { ran: false; reason: string } | { ran: true; revert: string | null };

export interface SimulationService {
  /** The on-chain dry run of a simulated write's body (its `to` or `pay_to`, `asset` and `amount`). */
  onchain(db: Db, agentId: string, body: Record<string, unknown>): Promise<OnchainCheck>;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

export function createSimulationService(deps: { chain: Pick<Chain, 'mode' | 'head' | 'callTransfer'> | null; ledger: Pick<LedgerService, 'requireAsset'> }): SimulationService {
  const unavailable = (err: unknown) =>
    new ApiError('agent_api_chain_unavailable', 'The chain node did not answer; nothing was simulated on chain. Retry later.', {
      reason: err instanceof Error ? err.message.split('\n')[0] : String(err),
    });
  return {
    async onchain(db, agentId, body) {
      const chain = deps.chain;
      if (!chain || chain.mode !== 'evm') return { ran: false, reason: 'the simulated chain has nothing to call' };
      // The node first: depth onchain needs it whatever the body.
      try {
        await chain.head();
      } catch (err) {
        if (err instanceof ChainUnavailableError) throw unavailable(err);
        throw err;
      }
      const to = typeof body.to === 'string' ? body.to : typeof body.pay_to === 'string' ? body.pay_to : null;
      const symbol = typeof body.asset === 'string' ? body.asset : body.pay_to !== undefined ? 'USDC' : null;
      if (!to || !ADDRESS.test(to) || !symbol || typeof body.amount !== 'string') return { ran: false, reason: 'the body names no 0x recipient, asset and amount to call a transfer with' };
      const asset = await deps.ledger.requireAsset(db, symbol);
      if (!asset.contract_address) return { ran: false, reason: `${symbol} is the native asset: there is no token call to make` };
      const wallet = await findWalletByAgent(db, agentId);
      if (!wallet?.address) return { ran: false, reason: 'the wallet has no on-chain address' };
      // x402 amounts are base units; every other write's are decimal units of the asset.
      const amount = body.pay_to !== undefined ? BigInt(body.amount) : parseAmount(body.amount, asset.decimals);
      try {
        return { ran: true, revert: await chain.callTransfer(asset.contract_address as Address, wallet.address as Address, to as Address, amount) };
      } catch (err) {
        if (err instanceof ChainUnavailableError) throw unavailable(err);
        throw err;
      }
    },
  };
}
