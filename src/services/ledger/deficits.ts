// Deficits (issue 30, item 4): a deposit credited from a block that a reorganisation deeper than the confirmations
// later orphaned is reversed by a compensating journal entry. What the wallet still has available is taken back;
// what it already spent is recorded as the wallet's deficit of that asset (wallet_deficits, and the journal account
// `external:deficit:<wallet>`, which carries the amount owed). While a deficit exists the wallet's money writes are
// refused; the next deposits of the asset cover it first (ledger.deposit), and writes resume once nothing is owed.
// (No import of ledger.ts: it calls coverDeficit, and the layer rules forbid the circle.)
import type { Db } from '../../db/knex.js';
import * as repo from '../../db/repositories/deficit.repository.js';
import type { AssetRow } from '../../db/repositories/ledger.repository.js';
import { ApiError } from '../../lib/errors.js';
import { formatAmount } from '../../lib/money.js';

type Leg = { account: { kind: 'available'; walletId: string } | { kind: 'external'; name: string }; asset: string; amount: bigint };
/** LedgerService.post. */
export type PostEntry = (db: Db, input: { operationId: string | null; entryType: string; postings: Leg[] }) => Promise<string>;

/** The journal account of what a wallet owes after a reversal (negative while owed). */
export const deficitAccount = (walletId: string) => ({ kind: 'external' as const, name: `deficit:${walletId}` });

/**
 * Reverses `amount` of `asset` credited to `walletId` from `source` (the deposit's external account): one entry
 * `deposit_reversal` giving the full amount back to the source, taken from available as far as it goes and from the
 * deficit account for the rest, which is recorded as owed. Runs in the caller's transaction.
 */
export async function reverseCredit(trx: Db, post: PostEntry, input: { walletId: string; asset: string; amount: bigint; source: string; now: Date }): Promise<{ taken: bigint; short: bigint }> {
  const { walletId, asset, amount } = input;
  // Deficit row first, then the balance: the order coverDeficit takes them in.
  await repo.lockDeficit(trx, walletId, asset);
  const available = await repo.lockAvailable(trx, walletId, asset);
  const taken = available < amount ? available : amount;
  const short = amount - taken;
  const postings: Leg[] = [{ account: { kind: 'external', name: input.source }, asset, amount }];
  if (taken > 0n) postings.push({ account: { kind: 'available', walletId }, asset, amount: -taken });
  if (short > 0n) postings.push({ account: deficitAccount(walletId), asset, amount: -short });
  await post(trx, { operationId: null, entryType: 'deposit_reversal', postings });
  if (short > 0n) await repo.addDeficit(trx, walletId, asset, short, input.now);
  return { taken, short };
}

/** The deficit of (wallet, asset) under its row lock (0 when none): taken before the balance row, as everywhere here. */
export const lockDeficit = (trx: Db, walletId: string, asset: string): Promise<bigint> => repo.lockDeficit(trx, walletId, asset);

/** Pays the wallet's deficit of `asset` from its available balance as far as it goes (entry `deficit_cover`); returns what was paid. */
export async function coverDeficit(trx: Db, post: PostEntry, walletId: string, asset: string, now: Date): Promise<bigint> {
  const owed = await repo.lockDeficit(trx, walletId, asset);
  if (owed === 0n) return 0n;
  const available = await repo.lockAvailable(trx, walletId, asset);
  const paid = available < owed ? available : owed;
  if (paid === 0n) return 0n;
  await post(trx, {
    operationId: null,
    entryType: 'deficit_cover',
    postings: [
      { account: { kind: 'available', walletId }, asset, amount: -paid },
      { account: deficitAccount(walletId), asset, amount: paid },
    ],
  });
  await repo.reduceDeficit(trx, walletId, asset, paid, now);
  return paid;
}

/** The wallet's deficits as decimals of their assets. */
export async function walletDeficits(db: Db, walletId: string, assets: Map<string, AssetRow>): Promise<{ asset: string; amount: string }[]> {
  return (await repo.listDeficits(db, walletId)).map((d) => ({ asset: d.asset_symbol, amount: formatAmount(BigInt(d.amount), assets.get(d.asset_symbol)?.decimals ?? 0) }));
}

/** Refuses a money write of a wallet that owes a deficit: `insufficient_funds` naming the deficits (details.reason `deficit`). */
export async function refuseWhileDeficit(db: Db, walletId: string, assets: Map<string, AssetRow>): Promise<void> {
  const deficits = await walletDeficits(db, walletId, assets);
  if (deficits.length === 0) return;
  const owed = deficits.map((d) => `${d.amount} ${d.asset}`).join(', ');
  throw new ApiError('insufficient_funds', `the wallet owes ${owed} after a deposit was reversed (its block left the chain); deposit that much to cover it before moving money again`, {
    reason: 'deficit',
    deficits,
  });
}
