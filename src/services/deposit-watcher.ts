// The deposit watcher (evm mode): follows the chain block by block from a stored cursor and credits the ledger
// with every token `Transfer` log and plain ETH transfer into a wallet address, once the block has
// CHAIN_CONFIRMATIONS confirmations. A block is applied in one database transaction under the cursor's row lock:
// the deposits (unique on chain, tx hash, log index: -1 for ETH), their journal entries and activity rows, and the
// cursor moved to the block's number and hash. The next block must name that hash as its parent; when it does
// not, the chain reorganised deeper than the confirmations and the cursor walks back. A block orphaned before its
// confirmations is never applied, so its deposits are never credited. The cursor's own block is checked first on
// every tick, and the hashes of the last blocks applied are kept to find the fork point. Deposits credited from the
// blocks a rewind gives up are reversed (deficits.ts: a compensating entry, a deficit for what was already spent); the
// re-scan credits again whatever the new branch still holds. ETH that contracts send to a wallet (internal transfers)
// is read from the block's traces (`trace_block`, else Geth's callTracer) and credited like a transfer, once per (transaction, index). No
// public event (deposit.received is reserved in v1): activity rows.
import type { Db } from '../db/knex.js';
import { withTransaction } from '../db/knex.js';
import * as repo from '../db/repositories/deposit.repository.js';
import { listAssets, type AssetRow } from '../db/repositories/ledger.repository.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import type { Logger } from '../lib/logger.js';
import { formatAmount } from '../lib/money.js';
import { DEV_CHAIN_ID } from '../chain/dev-accounts.js';
import type { Address, BlockRef, InternalTransfer, NativeTransfer, TransferLog } from '../chain/port.js';
import type { ChainReads } from '../chain/reads.js';
import { reverseCredit } from './ledger/deficits.js';
import type { LedgerService } from './ledger/ledger.js';
import type { OperationService } from './ledger/operations.js';

export const DEPOSIT_CURSOR = 'deposits';
/** The log index recorded for a plain ETH transfer (a transaction carries one native value at most). */
export const NATIVE_LOG_INDEX = -1;
/** The log index recorded for the `index`-th internal ETH transfer of a transaction (-2, -3, ...). */
export const internalLogIndex = (index: number): number => -2 - index;
/** The ledger's external account of chain deposits (credited from, reversed to). */
const DEPOSIT_SOURCE = 'chain';
/** Blocks applied per tick at most (the loop runs again at once while it has work). */
/** chain_transactions kinds whose settlement books the wallet's inbound leg itself (DeFi on chain). */
const SELF_BOOKED_KINDS = ['swap', 'wrap', 'vault', 'lending', 'rewards'] as const;
const BLOCKS_PER_TICK = 50;
/** How many applied block hashes are kept to find where a reorganised chain forks from ours. */
const REMEMBERED_BLOCKS = 256;
/** How long an asset whose contract has no code on this chain is skipped before it is looked at again. */
const NOT_DEPLOYED_TTL_MS = 60_000;

export interface DepositWatcherDeps {
  db: Db;
  chain: ChainReads;
  ledger: LedgerService;
  operations: OperationService;
  clock: Clock;
  log: Logger;
  confirmations: number;
  /** The first block to scan when no cursor exists yet; null = block 0 on the development chain (31337), else the newest confirmed block at that moment. */
  startBlock: number | null;
  /** Whether a token contract is deployed at this address on the chain (assets of other chains are skipped). */
  isDeployed(address: Address): Promise<boolean>;
}

export interface DepositWatcher {
  /** Creates the cursor unless it exists (at start, so deposits made before the first tick are not skipped). */
  ensureCursor(): Promise<void>;
  /** Applies the confirmed blocks past the cursor (up to a batch); returns how many blocks it applied or rewound. */
  tick(): Promise<number>;
}

interface Credit {
  txHash: string;
  logIndex: number;
  asset: AssetRow;
  from: string;
  to: string;
  value: bigint;
}

export function createDepositWatcher(deps: DepositWatcherDeps): DepositWatcher {
  const { db, chain, ledger, operations, clock, log } = deps;
  const depth = BigInt(Math.max(1, deps.confirmations));
  /** Token address -> deployed, or the time (ms) until which "not deployed" is believed (a later deployment is seen). */
  const deployed = new Map<string, true | number>();

  /** The chain's assets: ETH (no contract) and the tokens deployed on this chain. */
  async function chainAssets(): Promise<{ native: AssetRow | undefined; tokens: Map<string, AssetRow> }> {
    const assets = await listAssets(db);
    const tokens = new Map<string, AssetRow>();
    for (const a of assets) {
      if (!a.contract_address) continue;
      const key = a.contract_address.toLowerCase();
      const known = deployed.get(key);
      if (known === undefined || (known !== true && known < Date.now())) {
        const yes = await deps.isDeployed(a.contract_address as Address);
        deployed.set(key, yes ? true : Date.now() + NOT_DEPLOYED_TTL_MS);
      }
      if (deployed.get(key) === true) tokens.set(key, a);
    }
    return { native: assets.find((a) => a.symbol === 'ETH' && !a.contract_address), tokens };
  }

  async function ensureCursor(): Promise<repo.CursorRow | null> {
    const existing = await repo.findCursor(db, chain.chainId, DEPOSIT_CURSOR);
    if (existing) return existing;
    const head = await chain.head();
    if (!head) return null;
    const start = deps.startBlock !== null ? BigInt(deps.startBlock) : chain.chainId === DEV_CHAIN_ID ? 0n : head.number - depth + 1n;
    const before = start - 1n;
    const block = before >= 0n ? await chain.block(before) : null;
    const created = await repo.insertCursorOnce(db, chain.chainId, DEPOSIT_CURSOR, before, block?.hash ?? null, clock.now());
    if (block) await repo.rememberBlock(db, chain.chainId, DEPOSIT_CURSOR, block.number, block.hash, REMEMBERED_BLOCKS);
    return created;
  }

  /**
   * The deposits of one block into our wallets. Transfers between two of our wallets count too: an on-chain payment
   * captures the payer's hold to `external:onchain` and leaves crediting the recipient to the chain (this watcher).
   * Swaps and vault actions are the exception: their settlement books what the wallet receives from the receipt;
   * so does an account's lane call for what it moves into the account itself.
   */
  async function creditsOf(
    block: BlockRef,
    logs: TransferLog[],
    natives: NativeTransfer[],
    internals: InternalTransfer[],
    assets: Awaited<ReturnType<typeof chainAssets>>,
  ): Promise<{ credits: Credit[]; wallets: Map<string, { id: string; agent_id: string }> }> {
    const candidates: Credit[] = [];
    for (const l of logs) {
      const asset = assets.tokens.get(l.token.toLowerCase());
      if (asset && l.value > 0n) candidates.push({ txHash: l.txHash, logIndex: l.logIndex, asset, from: l.from, to: l.to, value: l.value });
    }
    if (assets.native) for (const t of natives) candidates.push({ txHash: t.txHash, logIndex: NATIVE_LOG_INDEX, asset: assets.native, from: t.from, to: t.to, value: t.value });
    if (assets.native) for (const t of internals) candidates.push({ txHash: t.txHash, logIndex: internalLogIndex(t.index), asset: assets.native, from: t.from, to: t.to, value: t.value });
    const wallets = await repo.findWalletsByAddresses(
      db,
      candidates.map((c) => c.to),
    );
    const ours = candidates.filter((c) => wallets.has(c.to.toLowerCase()));
    const own = await repo.ownTransactions(
      db,
      chain.chainId,
      ours.map((c) => c.txHash),
    );
    const selfBooked = (c: Credit) => {
      const t = own.get(c.txHash.toLowerCase());
      // An account's lane call books what flows back into the account itself (a payment's Earn redemption, issue 26).
      return t !== undefined && ((SELF_BOOKED_KINDS as readonly string[]).includes(t.kind) || (t.kind === 'lane' && t.to === c.to.toLowerCase()));
    };
    if (ours.length > 0) log.debug({ block: block.number.toString(), deposits: ours.length }, 'deposits seen');
    return { credits: ours.filter((c) => !selfBooked(c)), wallets };
  }

  /** Applies one block if the cursor is still where this worker read it; false when another worker moved it. */
  async function apply(cursor: repo.CursorRow, block: BlockRef, credits: Credit[], wallets: Map<string, { id: string; agent_id: string }>): Promise<boolean> {
    return withTransaction(db, async (trx) => {
      const locked = await repo.lockCursor(trx, chain.chainId, DEPOSIT_CURSOR);
      if (!locked || locked.block_number !== cursor.block_number || locked.block_hash !== cursor.block_hash) return false;
      const now = clock.now();
      for (const c of credits) {
        const wallet = wallets.get(c.to.toLowerCase())!;
        const inserted = await repo.insertDepositOnce(trx, {
          id: newId(),
          chain_id: chain.chainId,
          tx_hash: c.txHash,
          log_index: c.logIndex,
          block_number: block.number,
          block_hash: block.hash,
          wallet_id: wallet.id,
          asset_symbol: c.asset.symbol,
          token_address: c.asset.contract_address,
          from_address: c.from.toLowerCase(),
          to_address: c.to.toLowerCase(),
          amount: c.value,
          credited_at: now,
        });
        if (!inserted) continue;
        await ledger.deposit(trx, { walletId: wallet.id, asset: c.asset.symbol, amount: c.value, source: DEPOSIT_SOURCE });
        const usdE8 = await ledger.usdValue(trx, c.asset, c.value).catch(() => null);
        await operations.recordActivity(trx, {
          principal: { agentId: wallet.agent_id, walletId: wallet.id },
          type: 'deposit',
          status: 'executed',
          operationId: null,
          direction: 'in',
          asset: c.asset.symbol,
          amount: c.value,
          amountUsdE8: usdE8,
          counterparty: c.from.toLowerCase(),
          description: `Deposit of ${formatAmount(c.value, c.asset.decimals)} ${c.asset.symbol} (tx ${c.txHash}${c.logIndex < NATIVE_LOG_INDEX ? ', sent by a contract' : ''})`,
          txHash: c.txHash.toLowerCase(),
        });
        log.info({ wallet_id: wallet.id, asset: c.asset.symbol, amount: c.value.toString(), tx_hash: c.txHash, log_index: c.logIndex }, 'deposit credited');
      }
      await repo.moveCursor(trx, chain.chainId, DEPOSIT_CURSOR, block.number, block.hash, now);
      await repo.rememberBlock(trx, chain.chainId, DEPOSIT_CURSOR, block.number, block.hash, REMEMBERED_BLOCKS);
      return true;
    });
  }

  /**
   * The cursor's block is no longer on the chain (a reorganisation deeper than the confirmations, or a node reset):
   * walks back to the newest remembered block the chain still has, or to genesis (-1) when none is left. Re-scanning
   * is safe (credits are unique per tx hash and log index among live rows); deposits credited from the blocks given
   * up are reversed in the same transaction, and credited again if the new branch holds them once it is confirmed.
   */
  async function rewind(cursor: repo.CursorRow): Promise<void> {
    let target = -1n;
    let hash: string | null = null;
    for (const remembered of await repo.listRememberedBlocks(db, chain.chainId, DEPOSIT_CURSOR, BigInt(cursor.block_number))) {
      const block = await chain.block(BigInt(remembered.block_number));
      if (block?.hash === remembered.block_hash) {
        target = BigInt(remembered.block_number);
        hash = block.hash;
        break;
      }
    }
    await withTransaction(db, async (trx) => {
      const locked = await repo.lockCursor(trx, chain.chainId, DEPOSIT_CURSOR);
      if (!locked || locked.block_number !== cursor.block_number || locked.block_hash !== cursor.block_hash) return;
      const exposed = await repo.listDepositsAfter(trx, chain.chainId, target);
      const now = clock.now();
      for (const d of exposed) await reverse(trx, d, now);
      log.error(
        {
          chain_id: chain.chainId,
          from_block: cursor.block_number,
          to_block: target.toString(),
          credited_after: exposed.map((d) => ({ tx_hash: d.tx_hash, log_index: d.log_index, block_hash: d.block_hash })),
        },
        'chain reorganised below the confirmation depth; deposits above the fork reversed, deposit cursor rewound',
      );
      await repo.forgetBlocksAbove(trx, chain.chainId, DEPOSIT_CURSOR, target);
      await repo.moveCursor(trx, chain.chainId, DEPOSIT_CURSOR, target, hash, clock.now());
    });
  }

  /** Reverses one credited deposit whose block left the chain (marks the row, compensating entry, deficit, activity). */
  async function reverse(trx: Db, d: repo.DepositRow, now: Date): Promise<void> {
    if (!(await repo.markDepositReversed(trx, d.id, now))) return;
    const amount = BigInt(d.amount);
    const { taken, short } = await reverseCredit(trx, (db, input) => ledger.post(db, input), { walletId: d.wallet_id, asset: d.asset_symbol, amount, source: DEPOSIT_SOURCE, now });
    const asset = await ledger.requireAsset(trx, d.asset_symbol);
    const wallet = (await repo.findWalletsByAddresses(trx, [d.to_address])).get(d.to_address.toLowerCase());
    const fmt = (units: bigint) => formatAmount(units, asset.decimals);
    if (wallet) {
      await operations.recordActivity(trx, {
        principal: { agentId: wallet.agent_id, walletId: d.wallet_id },
        type: 'deposit',
        status: 'executed',
        operationId: null,
        direction: 'out',
        asset: d.asset_symbol,
        amount,
        amountUsdE8: await ledger.usdValue(trx, asset, amount).catch(() => null),
        counterparty: d.from_address,
        description: `Deposit of ${fmt(amount)} ${d.asset_symbol} reversed: its block left the chain (tx ${d.tx_hash})${short > 0n ? `; ${fmt(short)} ${d.asset_symbol} already spent is owed` : ''}`,
        txHash: d.tx_hash,
      });
    }
    log.warn({ wallet_id: d.wallet_id, asset: d.asset_symbol, amount: d.amount, tx_hash: d.tx_hash, log_index: d.log_index, taken: taken.toString(), deficit: short.toString() }, 'deposit reversed');
  }

  let tracesMissing = false;

  return {
    async ensureCursor() {
      await ensureCursor();
    },
    async tick() {
      let cursor = await ensureCursor();
      if (!cursor) return 0;
      const head = await chain.head();
      if (!head) return 0;
      const tip = head.number - depth + 1n;
      // The cursor's own block must still be on the chain (a node reset or a deep reorganisation replaces it).
      if (cursor.block_number >= 0) {
        const current = BigInt(cursor.block_number) > head.number ? null : await chain.block(BigInt(cursor.block_number));
        if (current?.hash !== cursor.block_hash) {
          await rewind(cursor);
          return 1;
        }
      }
      let done = 0;
      while (done < BLOCKS_PER_TICK && BigInt(cursor.block_number) < tip) {
        const number: bigint = BigInt(cursor.block_number) + 1n;
        const block = await chain.block(number);
        if (!block) break;
        if (cursor.block_hash !== null && block.parentHash !== cursor.block_hash) {
          await rewind(cursor);
          return done + 1;
        }
        const assets = await chainAssets();
        const [logs, natives, traced] = await Promise.all([
          chain.transferLogs(
            [...assets.tokens.values()].map((a) => a.contract_address as Address),
            number,
            number,
          ),
          chain.nativeTransfers(number),
          assets.native ? chain.internalTransfers(block) : Promise.resolve([]),
        ]);
        if (traced === null && !tracesMissing)
          log.warn({ chain_id: chain.chainId }, 'the node answers neither trace_block nor debug_traceBlockByHash: ETH sent to wallets by contracts is not credited');
        tracesMissing = traced === null;
        const internals = traced ?? [];
        // Every read must describe the same block: a reorganisation between the reads is retried next tick.
        if ([...logs, ...natives, ...internals].some((l) => l.blockHash !== block.hash)) break;
        const { credits, wallets } = await creditsOf(block, logs, natives, internals, assets);
        if (!(await apply(cursor, block, credits, wallets))) {
          // Another worker applied it (or rewound): read its cursor and carry on from there.
          const moved = await repo.findCursor(db, chain.chainId, DEPOSIT_CURSOR);
          if (!moved) break;
          cursor = moved;
          done++;
          continue;
        }
        cursor = { ...cursor, block_number: Number(number), block_hash: block.hash };
        done++;
      }
      return done;
    },
  };
}
