// How x402 operations end: a captured hold pays the seller (outside the simulated wallets). Without a chain the
// settlement worker captures a signed authorization's hold; on an evm chain `trackOnChain` asks the chain whether
// each open authorization was used in a block with CHAIN_CONFIRMATIONS confirmations (captured, whatever the seller
// answered: the money left) or lapsed unused past valid_before (failed, hold released).
import type { Db, Knex } from '../../db/knex.js';
import { savepoint } from '../../db/knex.js';
import { findHeldByOperation } from '../../db/repositories/ledger.repository.js';
import { listOpenOperationsOnChain, type OperationRow } from '../../db/repositories/operation.repository.js';
import type { Address, Hex } from '../../chain/port.js';
import type { SettleOutcome } from '../ledger/operations.js';
import type { X402ServiceDeps } from './types.js';

/** Where captured x402 payments go in the journal (the seller is outside the simulated wallets). */
const X402_ACCOUNT = { kind: 'external', name: 'x402' } as const;

const X402_TYPES = ['x402.sign', 'x402.purchase'];

export function createX402Settlement(deps: Pick<X402ServiceDeps, 'ledger' | 'chain' | 'config'>) {
  const { operations } = deps.ledger;
  const chain = deps.chain ?? null;
  // As for transfers (src/chain/evm/receipts.ts): the block that used the authorization counts as one confirmation.
  const confirmations = BigInt(Math.max(1, deps.config.chain?.confirmations ?? 1));

  async function captureHolds(trx: Db, operationId: string): Promise<void> {
    for (const hold of await findHeldByOperation(trx, operationId)) await deps.ledger.ledger.capture(trx, hold.id, X402_ACCOUNT, 'x402_payment');
  }

  /** A signed authorization stays usable by the seller until valid_before: the settlement worker captures its hold. */
  async function settleSign(trx: Knex.Transaction, op: OperationRow): Promise<SettleOutcome> {
    if (op.to_address && (await deps.ledger.ledger.isFailingAddress(trx, op.to_address)))
      return { ok: false, code: 'settlement_failed', message: `the simulated chain rejected the transfer to ${op.to_address}` };
    await captureHolds(trx, op.id);
    return { ok: true, details: { ...(op.details as Record<string, unknown>), settled_by: 'worker' } };
  }
  // On an evm chain the chain itself tells when a signed authorization is used (trackOnChain).
  if (!chain) operations.registerSettler('x402.sign', settleSign);

  async function trackOnChain(db: Knex): Promise<number> {
    if (!chain) return 0;
    const open = await listOpenOperationsOnChain(db, X402_TYPES, chain.chainId, 100);
    if (open.length === 0) return 0;
    // The head first: an authorization unused at or after a block past valid_before can never be used.
    const head = await chain.head();
    if (!head) return 0;
    let finished = 0;
    for (const op of open) {
      const d = op.details as { token?: string; authorizer?: string; nonce?: string; valid_before?: string; from_block?: number };
      if (!d.token || !d.authorizer || !d.nonce || !d.valid_before) continue;
      // The search starts at the head seen when the authorization was signed (0 for operations recorded before it was).
      const usedAt = await chain.authorizationUsedAt(d.token as Address, d.authorizer as Address, d.nonce as Hex, BigInt(d.from_block ?? 0), head.number);
      // Used, but not yet deep enough: a reorganisation could still undo the transfer.
      if (usedAt !== null && head.number - usedAt + 1n < confirmations) continue;
      const used = usedAt !== null;
      const expired = !used && head.timestamp >= BigInt(Math.floor(new Date(d.valid_before).getTime() / 1000));
      if (!used && !expired) continue;
      const done = await savepoint(db, async (trx) => {
        if (used) {
          const details = { ...(op.details as Record<string, unknown>), settled_on_chain: true, settled_block: Number(usedAt) };
          const row = await operations.finish(trx, op.id, op.status, { ok: true, details });
          if (row) await captureHolds(trx, op.id);
          return row;
        }
        return operations.finish(trx, op.id, op.status, { ok: false, code: 'authorization_expired', message: `the authorization was not used on chain before ${d.valid_before}` });
      });
      if (done) finished += 1;
    }
    return finished;
  }

  return { captureHolds, trackOnChain };
}
