// The chain stand-in: operations whose money moves on the configured chain settle there, every other one (and
// every operation without CHAIN_RPC_URL) on the simulated chain through its registered settler.
import type { Chain } from '../../chain/port.js';
import { createSimulatedChain } from '../../chain/simulated.js';
import type { Db } from '../../db/knex.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import type { Clock } from '../../lib/clock.js';
import type { LedgerService } from './ledger.js';

export interface Chains {
  simulated: Chain;
  /** The configured chain (the simulated one without CHAIN_RPC_URL). */
  chain: Chain;
  /** The adapter that settles `op`: the configured chain when its money moves there, else the simulated one. */
  adapterFor(db: Db, op: Pick<OperationRow, 'type' | 'details' | 'asset_symbol'>): Promise<Chain>;
}

export function createChains(deps: { clock: Clock; ledger: LedgerService; settlementDelayMs: number; chain?: Chain }): Chains {
  const simulated = createSimulatedChain({ clock: deps.clock, settlementDelayMs: deps.settlementDelayMs });
  const chain = deps.chain ?? simulated;
  return {
    simulated,
    chain,
    async adapterFor(db, op) {
      if (chain === simulated || !op.asset_symbol) return simulated;
      const asset = (await deps.ledger.assets(db)).get(op.asset_symbol) ?? null;
      return chain.settlesOnChain(op, asset) ? chain : simulated;
    },
  };
}
