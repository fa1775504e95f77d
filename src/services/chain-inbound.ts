// The inbound side of an EVM chain (issue 11), built by the composition root when CHAIN_RPC_URL is set: the
// deposit watcher, reconciliation, and the reads x402 uses to see its authorizations settled. Its worker loops
// run in evm mode only.
import type { Knex } from 'knex';
import { ChainUnavailableError, type Address } from '../chain/port.js';
import type { ChainReads } from '../chain/reads.js';
import type { ChainConfig } from '../config.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { createPollingLoop, type WorkerLoop } from '../worker.js';
import { createDepositWatcher, type DepositWatcher } from './deposit-watcher.js';
import type { LedgerService } from './ledger/ledger.js';
import type { OperationService } from './ledger/operations.js';
import { createReconciler, reconcileAndWarn, type Reconciler } from './reconcile.js';

/** A tick that treats an unreachable node as idle: one warning per outage instead of an error every poll. */
export function quietWhileDown(name: string, tick: () => Promise<number>, log: Logger): () => Promise<number> {
  let down = false;
  return async () => {
    try {
      const did = await tick();
      if (down) log.info({ loop: name }, 'chain node reachable again');
      down = false;
      return did;
    } catch (err) {
      if (!(err instanceof ChainUnavailableError)) throw err;
      if (!down) log.warn({ loop: name, err: err.message }, 'chain node unreachable; waiting');
      down = true;
      return 0;
    }
  };
}

export interface ChainInbound {
  chain: ChainReads;
  deposits: DepositWatcher;
  reconciler: Reconciler;
  loops(): WorkerLoop[];
}

export function createChainInbound(deps: {
  db: Knex;
  chain: ChainReads;
  config: Readonly<ChainConfig>;
  ledger: LedgerService;
  operations: OperationService;
  clock: Clock;
  log: Logger;
  isDeployed(address: Address): Promise<boolean>;
}): ChainInbound {
  const { db, chain, config, clock, log } = deps;
  const deposits = createDepositWatcher({
    db,
    chain,
    ledger: deps.ledger,
    operations: deps.operations,
    clock,
    log,
    confirmations: config.confirmations,
    startBlock: config.depositStartBlock,
    isDeployed: deps.isDeployed,
  });
  const reconciler = createReconciler({ db, chain, clock, isDeployed: deps.isDeployed });
  return {
    chain,
    deposits,
    reconciler,
    loops() {
      const loops = [
        createPollingLoop(
          'chain-deposits',
          quietWhileDown('chain-deposits', () => deposits.tick(), log),
          { idleMs: config.pollMs, log },
        ),
      ];
      if (config.reconcileIntervalMs > 0) {
        loops.push(
          createPollingLoop(
            'chain-reconcile',
            quietWhileDown(
              'chain-reconcile',
              async () => {
                await reconcileAndWarn(reconciler, log);
                return 0;
              },
              log,
            ),
            { idleMs: config.reconcileIntervalMs, log },
          ),
        );
      }
      return loops;
    },
  };
}
