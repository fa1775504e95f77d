// Issue 27 in evm mode: the owner's approval of an account wallet's transfer is an EIP-712 ApproveSpend signed by
// the owner's signer and relayed to the account, whose lane call above the approval threshold consumes it
// (docs/CUSTODY.md). This module names the transfer an operation's lane call will make, so the approval covers
// exactly it: the same token, recipient and amount the settlement sends (src/chain/evm-custody.ts submitLane).
import { NATIVE_TOKEN, operationIdBytes32, type OwnerAction } from '../../chain/accounts.js';
import type { Address } from '../../chain/hex.js';
import type { Db } from '../../db/knex.js';
import type { OperationRow } from '../../db/repositories/operation.repository.js';
import { viem } from '../../lib/viem.js';
import type { LedgerService } from '../ledger/ledger.js';
import type { CustodyService } from './accounts.js';

/** The operation types an account's lane settles as a transfer (pay, or a cheque for a one-off payment). */
const TRANSFER_TYPES = ['payment', 'withdrawal.crypto', 'one_off_payment.create'];

/** The ApproveSpend of `op`'s transfer, or null when its wallet is not an agent account or it is no lane transfer. */
export async function spendApprovalOf(db: Db, deps: { custody?: CustodyService; ledger: Pick<LedgerService, 'requireAsset'> }, op: OperationRow): Promise<OwnerAction | null> {
  if (!deps.custody || !TRANSFER_TYPES.includes(op.type) || !op.to_address || op.amount === null || !op.asset_symbol) return null;
  if (!(await deps.custody.account(db, op.agent_id))) return null;
  const asset = await deps.ledger.requireAsset(db, op.asset_symbol);
  const token = asset.contract_address ? (viem().getAddress(asset.contract_address) as Address) : NATIVE_TOKEN;
  return { kind: 'approve_spend', operationId: operationIdBytes32(op.id), token, to: viem().getAddress(op.to_address) as Address, amount: BigInt(op.amount) };
}
